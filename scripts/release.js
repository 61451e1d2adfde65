#!/usr/bin/env node
'use strict'
// `npm run release -- --registry <url> [--tag <tag>] [--dry-run]`: publishes
// every platform package built here (scripts/pack.js), then the main package,
// to the registry named (there is no default: publishing is never an
// accident). Credentials are npm's own: `npm login --registry <url>`, or an
// `//host/:_authToken=` line in ~/.npmrc (NPM_CONFIG_USERCONFIG for another
// file). --dry-run asks npm to do everything but upload.
//
// The platform packages go first: once the main package is on the registry,
// an install resolves its optional dependencies, and each one published by
// then is installed where it fits. A platform left out here (no binary built)
// can be published later at the same version; installs from then on get it.

const { spawnSync } = require('node:child_process')
const { mkdtempSync, rmSync } = require('node:fs')
const { tmpdir } = require('node:os')
const { join } = require('node:path')
const { parseArgs } = require('node:util')
const { packAll } = require('./pack.js')

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'

/** @param {string} message */
function fail(message) {
  console.error(`release: ${message}`)
  process.exit(2)
}

let values
try {
  ;({ values } = parseArgs({
    options: { registry: { type: 'string' }, tag: { type: 'string' }, 'dry-run': { type: 'boolean' } },
  }))
} catch (error) {
  fail(`${/** @type {Error} */ (error).message}\nusage: npm run release -- --registry <url> [--tag <tag>] [--dry-run]`)
}
if (!values.registry) fail('--registry <url> is required, e.g. --registry https://registry.npmjs.org/')
try {
  new URL(values.registry)
} catch {
  fail(`--registry is not a URL: ${values.registry}`)
}

const out = mkdtempSync(join(tmpdir(), 'keel-release-'))
process.on('exit', () => rmSync(out, { recursive: true, force: true }))
const packed = packAll(out)
const platforms = Object.entries(packed.platforms)
if (platforms.length === 0) fail('no platform has a binary here: run `npm run build` first (and `-- --target <triple>` for others)')
const flags = ['--registry', values.registry, '--access', 'public', ...(values.tag ? ['--tag', values.tag] : []), ...(values['dry-run'] ? ['--dry-run'] : [])]
for (const [name, tarball] of [...platforms, ['main', packed.main]]) {
  console.error(`release: publishing ${name} (${tarball.slice(out.length + 1)}) to ${values.registry}`)
  const r = spawnSync(npm, ['publish', tarball, ...flags], { stdio: 'inherit' })
  if (r.status !== 0) fail(`npm publish of ${name} failed (exit ${r.status ?? r.signal}); nothing after it was published`)
}
console.error(`release: published ${platforms.map(([name]) => name).join(', ')} and the main package`)
if (packed.missing.length > 0) {
  console.error(
    `release: no binary here for ${packed.missing.join(', ')}: users there get the loader's error ` +
      'until those platform packages are published at this version',
  )
}
