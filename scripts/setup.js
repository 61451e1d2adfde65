#!/usr/bin/env node
'use strict'
// Makes a fresh clone ready to run: installs the npm dependencies if they are
// missing, then builds the native addon if it is missing or older than its
// Rust sources. `npm run demo` and `npm test` both start here.

const { spawnSync } = require('node:child_process')
const { existsSync, statSync, readdirSync } = require('node:fs')
const { join } = require('node:path')

const root = join(__dirname, '..')
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'

function sh(cmd, args) {
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit' })
  if (r.error) {
    console.error(`setup: could not run ${cmd}: ${r.error.message}`)
    if (cmd === 'cargo') console.error('setup: building the addon needs Rust (https://rustup.rs) on the PATH')
    process.exit(1)
  }
  if (r.status !== 0) process.exit(r.status ?? 1)
}

function newest(dir) {
  let latest = 0
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs)
  }
  return latest
}

if (!existsSync(join(root, 'node_modules', '.package-lock.json'))) {
  console.error('setup: installing npm dependencies (npm ci)')
  sh(npm, ['ci', '--no-audit', '--no-fund'])
}

// The Jest and Vitest suites (__test__/frameworks/*) have their own dependencies.
for (const name of ['jest', 'vitest']) {
  const dir = join(root, '__test__', 'frameworks', name)
  if (!existsSync(join(dir, 'node_modules', '.package-lock.json'))) {
    console.error(`setup: installing the ${name} suite's dependencies (npm ci in __test__/frameworks/${name})`)
    sh(npm, ['ci', '--no-audit', '--no-fund', '--prefix', dir])
  }
}

const binary = join(root, `keel.${process.platform}-${process.arch}-gnu.node`)
const sources = Math.max(
  newest(join(root, 'src')),
  ...['Cargo.toml', 'Cargo.lock', 'build.rs'].map((f) => statSync(join(root, f)).mtimeMs),
)
if (!existsSync(binary) || statSync(binary).mtimeMs < sources) {
  console.error('setup: building the native addon (cargo, release)')
  sh(npm, ['run', '--silent', 'build'])
}
