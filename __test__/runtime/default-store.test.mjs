// The implicit default store in a process that is one of several (a
// node:cluster worker, a child forked with an IPC channel) warns once, at its
// first lock; a store set with setLockStore (even a MemoryLockStore), or a
// plain process, is quiet.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { fork, spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const entry = fileURLToPath(new URL('../../index.js', import.meta.url))
const dir = mkdtempSync(join(tmpdir(), 'keel-default-store-'))
after(() => rmSync(dir, { recursive: true, force: true }))

/**
 * A child that takes two locks and a semaphore permit (setting a
 * MemoryLockStore first if `setStore`), then reports the warnings it saw:
 * over IPC when it has a channel, else on stdout. In `cluster` mode it is the
 * primary of one worker, which does that and whose report it passes on.
 */
function script(name, { setStore = false, cluster = false } = {}) {
  const path = join(dir, `${name}.cjs`)
  writeFileSync(
    path,
    `const warnings = []
process.on('warning', (w) => warnings.push({ code: w.code, message: w.message }))
const cluster = require('node:cluster')
const report = (text) =>
  cluster.isWorker ? process.send(text) : process.send ? process.send(text, () => process.disconnect()) : process.stdout.write(text)
if (${cluster} && cluster.isPrimary) {
  const worker = cluster.fork()
  worker.on('message', (text) => { report(text); worker.kill() })
} else {
  const keel = require(${JSON.stringify(entry)})
  ${setStore ? 'keel.setLockStore(new keel.MemoryLockStore())' : ''}
  ;(async () => {
    await keel.lock('a').run(async () => {})
    await keel.lock('b').run(async () => {})
    await keel.semaphore('s', 2).run(async () => {})
    await new Promise((resolve) => setImmediate(resolve))
    report(JSON.stringify(warnings))
  })()
}
`,
  )
  return path
}

/** Runs a script, forked (with an IPC channel) or spawned (without); its reported warnings and its stderr. */
function run(path, { ipc }) {
  return new Promise((resolve, reject) => {
    const stdio = ['ignore', 'pipe', 'pipe']
    const child = ipc ? fork(path, [], { stdio: [...stdio, 'ipc'] }) : spawn(process.execPath, [path], { stdio })
    let out = ''
    let err = ''
    let message
    child.stdout.on('data', (d) => (out += d))
    child.stderr.on('data', (d) => (err += d))
    child.on('message', (m) => (message = m))
    child.on('error', reject)
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`${path} exited ${code}:\n${err}`))
      resolve({ warnings: JSON.parse(message ?? out), stderr: err })
    })
  })
}

test('a forked child on the implicit default store warns once, with a code, saying what to do', async () => {
  const { warnings, stderr } = await run(script('forked'), { ipc: true })
  assert.equal(warnings.length, 1, JSON.stringify(warnings))
  assert.equal(warnings[0].code, 'KEEL_LOCK_DEFAULT_STORE')
  assert.match(warnings[0].message, /this process is a child process with an IPC channel \(forked\)/)
  assert.match(warnings[0].message, /Call setLockStore\(\) with a store every process reaches/)
  assert.equal(stderr.match(/KEEL_LOCK_DEFAULT_STORE/g)?.length, 1, stderr)
})

test('a node:cluster worker on the implicit default store warns once', async () => {
  const { warnings } = await run(script('cluster', { cluster: true }), { ipc: false })
  assert.equal(warnings.length, 1, JSON.stringify(warnings))
  assert.equal(warnings[0].code, 'KEEL_LOCK_DEFAULT_STORE')
  assert.match(warnings[0].message, /this process is a node:cluster worker/)
})

test('a store set explicitly (a MemoryLockStore, as tests set it) is quiet, forked or in a cluster worker', async () => {
  assert.deepEqual((await run(script('forked-set', { setStore: true }), { ipc: true })).warnings, [])
  const clustered = await run(script('cluster-set', { setStore: true, cluster: true }), { ipc: false })
  assert.deepEqual(clustered.warnings, [])
  assert.doesNotMatch(clustered.stderr, /KEEL_LOCK_DEFAULT_STORE/)
})

test('a plain process on the default store is quiet', async () => {
  const { warnings, stderr } = await run(script('plain'), { ipc: false })
  assert.deepEqual(warnings, [])
  assert.doesNotMatch(stderr, /KEEL_LOCK_DEFAULT_STORE/)
})
