#!/usr/bin/env node
'use strict'
// Makes a fresh clone ready for what is asked of it:
//   node scripts/setup.js demo   the addon, built with cargo; no npm install
//                                (the demo needs nothing else)
//   node scripts/setup.js        the npm dependencies, and the addon (bench, soak)
//   node scripts/setup.js test   first the programs the tests use (support/tools.mjs,
//                                one line: what is missing and what that skips),
//                                then those, the Jest and Vitest suites', the
//                                local registry's (verdaccio) and @types/node 22's,
//                                the addon built by napi-rs (which regenerates
//                                lib/native.d.ts, the types lib/ is checked
//                                against), and the test build with test-only
//                                exports (target/test-hooks/keel.node)
//
// Every build is a release build for the host's target triple, named as napi-rs
// names it (--target), so all of them share target/<triple>/release: the
// dependencies compile once, for the demo and the tests alike, and only this
// crate compiles again (with the test-hooks feature; under napi-rs, which
// has it write its type definitions).

const { spawnSync } = require('node:child_process')
const { copyFileSync, existsSync, mkdirSync, readdirSync, statSync } = require('node:fs')
const { join } = require('node:path')
const { hostPlatform } = require('../lib/platforms.js')
const { hostTriple } = require('./rust-host.js')

const mode = process.argv[2] ?? 'default'
if (!['demo', 'default', 'test'].includes(mode)) {
  console.error(`setup: unknown mode ${mode} (known: demo, test, or none)`)
  process.exit(2)
}
const root = join(__dirname, '..')
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'

/**
 * @param {string} cmd
 * @param {string[]} args
 */
function sh(cmd, args) {
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit' })
  if (r.error) {
    console.error(`setup: could not run ${cmd}: ${r.error.message}`)
    if (cmd === 'cargo') console.error('setup: building the addon needs Rust (https://rustup.rs) on the PATH')
    process.exit(1)
  }
  if (r.status !== 0) process.exit(r.status ?? 1)
}

/** @param {string} dir the newest modification time of anything in it */
function newest(dir) {
  let latest = 0
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs)
  }
  return latest
}

/** The file cargo makes of a cdylib, named as the host's OS names a shared library. */
const LIBRARY = { darwin: 'libkeel_lock.dylib', win32: 'keel_lock.dll' }[process.platform] ?? 'libkeel_lock.so'

/** `cargo build --release --lib --target <host>` with `args`; returns the built library's path. */
function cargoBuild(args) {
  const triple = hostTriple('setup')
  sh('cargo', ['build', '--release', '--lib', '--target', triple, ...args])
  return join(root, 'target', triple, 'release', LIBRARY)
}

const sources = () =>
  Math.max(newest(join(root, 'src')), ...['Cargo.toml', 'Cargo.lock', 'build.rs'].map((f) => statSync(join(root, f)).mtimeMs))
const fresh = (/** @type {string} */ file) => existsSync(file) && statSync(file).mtimeMs >= sources()
const binary = join(root, `keel.${hostPlatform()}.node`)

if (mode === 'demo') {
  if (!fresh(binary)) {
    console.error('setup: building the native addon (cargo, release; the first build compiles the dependencies, a few minutes)')
    copyFileSync(cargoBuild([]), binary)
  }
  process.exit(0)
}

if (mode === 'test') {
  // Before anything long: which programs the tests use are missing, and what that skips.
  const check = spawnSync(process.execPath, [join(root, 'support', 'tools.mjs')], { cwd: root, stdio: 'inherit' })
  if (check.status !== 0) process.exit(check.status ?? 1)
}

if (!existsSync(join(root, 'node_modules', '.package-lock.json'))) {
  console.error('setup: installing npm dependencies (npm ci)')
  sh(npm, ['ci', '--no-audit', '--no-fund'])
}

if (mode === 'default') {
  if (!fresh(binary)) {
    console.error('setup: building the native addon (napi-rs, release)')
    sh(npm, ['run', '--silent', 'build'])
  }
  process.exit(0)
}

// The Jest and Vitest suites (__test__/frameworks/*), the local registry the
// release test publishes to (__test__/registry: verdaccio) and @types/node 22 for
// the docs' TypeScript blocks (__test__/types/node22) have their own dependencies.
for (const suite of ['frameworks/jest', 'frameworks/vitest', 'registry', 'types/node22']) {
  const dir = join(root, '__test__', suite)
  if (!existsSync(join(dir, 'node_modules', '.package-lock.json'))) {
    console.error(`setup: installing the dependencies of __test__/${suite} (npm ci there)`)
    sh(npm, ['ci', '--no-audit', '--no-fund', '--prefix', dir])
  }
}

// The test build first: it and the shipped build share target/<triple>/release,
// and the one built last is what napi-rs copies.
const hooks = join(root, 'target', 'test-hooks', 'keel.node')
if (!fresh(hooks)) {
  console.error('setup: building the test build of the addon (cargo, release, --features test-hooks: test-only exports)')
  const built = cargoBuild(['--features', 'test-hooks'])
  mkdirSync(join(root, 'target', 'test-hooks'), { recursive: true })
  copyFileSync(built, hooks)
}
// Always through napi-rs (cargo itself skips what is up to date): it also
// writes lib/native.d.ts from the Rust signatures, which the type check reads.
console.error('setup: building the native addon (napi-rs, release; writes lib/native.d.ts)')
sh(npm, ['run', '--silent', 'build'])
console.error('setup: ready; next: the type checks, then the tests')
