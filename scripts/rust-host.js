'use strict'
// The host's Rust target triple (`rustc -vV`), as napi-rs builds for it when
// given no --target: scripts/setup.js and scripts/build.js name the same one.

const { spawnSync } = require('node:child_process')

/**
 * @param {string} label the calling script's name, for its messages
 * @returns {string}
 */
function hostTriple(label) {
  const r = spawnSync('rustc', ['-vV'], { encoding: 'utf8' })
  if (r.error || r.status !== 0) {
    console.error(`${label}: could not run rustc: ${r.error?.message ?? r.stderr}`)
    console.error(`${label}: building the addon needs Rust (https://rustup.rs) on the PATH`)
    process.exit(1)
  }
  const host = /^host: (\S+)$/m.exec(r.stdout)
  if (!host) {
    console.error(`${label}: rustc -vV named no host:\n${r.stdout}`)
    process.exit(1)
  }
  return host[1]
}

module.exports = { hostTriple }
