#!/usr/bin/env node
// `npm run check:targets`: the crate compiled (clippy, warnings as errors) for
// every target of package.json's napi.targets, so nothing platform-bound is
// left ungated: Linux, macOS and Windows, x64, arm64 and armv7.
//
// Nothing is linked, but build scripts run, and ring compiles C for the
// target: zig is that C compiler (through cargo-zigbuild for Linux and
// macOS; for Windows, where zig has no MSVC headers, zig cc with MinGW's
// headers stands in for cl.exe and zig's lib for lib.exe: enough for
// objects that are never linked). Builds go to target/check.
//
// Without zig, cargo-zigbuild or a target's standard library it says what is
// missing and how to install it, and skips (a failure under CI=true or
// KEEL_TEST_REQUIRE_ALL=1).

import { spawnSync } from 'node:child_process'
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { missingToCross, stopIfMissing } from '../support/tools.mjs'

const root = fileURLToPath(new URL('..', import.meta.url))
/** @type {string[]} */
const targets = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).napi.targets
stopIfMissing('check:targets', missingToCross(targets))

// zig as the Windows targets' C compiler and archiver (cc-rs calls them as cl.exe and lib.exe).
const tools = mkdtempSync(join(tmpdir(), 'keel-zig-windows-'))
process.on('exit', () => rmSync(tools, { recursive: true, force: true }))
/** @param {string} name @param {string} body */
function script(name, body) {
  writeFileSync(join(tools, name), `#!/bin/sh\n${body}\n`)
  chmodSync(join(tools, name), 0o755)
  return join(tools, name)
}
const lib = script('lib', 'exec python3 -m ziglang lib "$@"')
/** @param {string} cpu */
const windowsCc = (cpu) =>
  script(
    `cc-${cpu}`,
    // cl.exe's target flags mean nothing to zig: dropped.
    'for a in "$@"; do case "$a" in --target=*|-fno-rtlib-defaultlib) ;; *) set -- "$@" "$a" ;; esac; shift; done\n' +
      `exec python3 -m ziglang cc -target ${cpu}-windows-gnu "$@"`,
  )

const results = []
for (const target of targets) {
  const env = { ...process.env, CARGO_TARGET_DIR: join(root, 'target', 'check') }
  let command = ['cargo-zigbuild', 'clippy']
  if (target.includes('-windows-')) {
    const key = target.replaceAll('-', '_')
    Object.assign(env, { [`CC_${key}`]: windowsCc(target.split('-')[0]), [`AR_${key}`]: lib })
    command = ['cargo', 'clippy']
  }
  // A cdylib on musl needs the C runtime linked dynamically (napi-rs builds it so).
  if (target.includes('-musl')) env.RUSTFLAGS = `${env.RUSTFLAGS ?? ''} -C target-feature=-crt-static`.trim()
  const started = Date.now()
  const r = spawnSync(command[0], [...command.slice(1), '--lib', '--target', target, '--', '-D', 'warnings'], {
    cwd: root,
    env,
    encoding: 'utf8',
  })
  const seconds = ((Date.now() - started) / 1000).toFixed(0)
  const ok = r.status === 0
  if (!ok) process.stderr.write(`${r.stderr ?? ''}${r.error?.message ?? ''}\n`)
  console.error(`check:targets: ${ok ? 'ok  ' : 'FAIL'} ${target} (${seconds} s)`)
  results.push({ target, ok })
}
const failed = results.filter((r) => !r.ok).map((r) => r.target)
console.error(`check:targets: ${results.length - failed.length} of ${results.length} targets compile${failed.length ? `; failing: ${failed.join(', ')}` : ''}`)
process.exit(failed.length > 0 ? 1 : 0)
