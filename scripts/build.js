#!/usr/bin/env node
'use strict'
// `npm run build [-- --target <triple>] [napi build flags]`: the addon, built by
// napi-rs (release, named keel.<platform>.node, lib/native.d.ts written from
// the Rust signatures).
//
// Without --target it builds for this machine with the host's own linker.
// With a target of another machine (another CPU, or musl on a glibc host) it
// cross-compiles through cargo-zigbuild (napi's --cross-compile): zig links
// every Linux target from here, glibc and musl, x64, arm64 and armv7, with
// no cross toolchain installed. A glibc target with no version suffix is
// linked against glibc 2.17 (`<triple>.2.17`), so the binary loads on every
// glibc distribution still maintained, not only ones as new as this machine.
// Windows MSVC targets need Microsoft's SDK: they are built on Windows (the
// GitHub workflow in .github/workflows/), and asking for one elsewhere says so.

const { spawnSync } = require('node:child_process')
const { join } = require('node:path')
const { hostTriple } = require('./rust-host.js')

const root = join(__dirname, '..')
const FLAGS = ['--platform', '--release', '--no-js', '--no-const-enum', '--runtime-string-enum', '--dts', 'lib/native.d.ts']
/** The oldest glibc a cross-built glibc binary asks for (Rust's own minimum). */
const GLIBC = '2.17'

const args = process.argv.slice(2)
const at = args.findIndex((arg) => arg === '--target' || arg === '-t')
const target = at >= 0 ? args[at + 1] : undefined
if (at >= 0 && !target) fail('--target needs a triple, e.g. --target aarch64-unknown-linux-gnu')

/** @param {string} message */
function fail(message) {
  console.error(`build: ${message}`)
  process.exit(2)
}

const chosen = ['--cross-compile', '-x', '--use-napi-cross', '--use-cross'].some((flag) => args.includes(flag))
if (target && !chosen) {
  const triple = target.split('.')[0]
  const host = hostTriple('build')
  // A versioned target (`x86_64-unknown-linux-gnu.2.17`) goes through zig even on its own host.
  if (triple !== host || target !== triple) {
    if (triple.includes('-windows-') && process.platform !== 'win32') {
      fail(
        `${triple} is built on Windows (Microsoft's SDK cannot be fetched here): see .github/workflows/build.yml, ` +
          'or pass --cross-compile to let napi-rs try cargo-xwin, which downloads the SDK',
      )
    }
    args.push('--cross-compile')
    if (triple.includes('-linux-gnu') && triple === target) args[at + 1] = `${triple}.${GLIBC}`
  }
}

const napi = join(root, 'node_modules', '@napi-rs', 'cli', 'dist', 'cli.js')
const r = spawnSync(process.execPath, [napi, 'build', ...FLAGS, ...args], { cwd: root, stdio: 'inherit' })
if (r.error) fail(`could not run napi-rs (${r.error.message}): run npm ci first`)
process.exit(r.status ?? 1)
