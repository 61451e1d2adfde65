// RedisLockStore on one server: a plain lock's waiters in other processes
// wait in a line on the server, one place per process. A release hands the
// lock to the first in line and tells that process alone; arrival order
// across processes is kept; a process that died while waiting, or whose
// waiters gave up, holds nobody up for long; nothing is left behind. Child
// processes (helpers/child.mjs) open the same store; a MONITOR connection
// sees every command the server runs.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'
import Redis from 'ioredis'
import { lock, setLockStore, RedisLockStore } from '@shaferllc/keel/core'
import { startRedis, uniqueKey } from '../../support/servers.mjs'
import { runChild } from '../helpers/processes.mjs'
import { eventually } from '../helpers/eventually.mjs'

const CHILD = fileURLToPath(new URL('../helpers/child.mjs', import.meta.url))

let server
let store
let inspect
let env
let dir
before(async () => {
  server = await startRedis()
  env = { KEEL_TEST_STORE: 'redis', KEEL_TEST_REDIS: server.url }
  store = setLockStore(new RedisLockStore({ url: server.url }))
  inspect = new Redis(server.url)
  dir = mkdtempSync(join(tmpdir(), 'keel-line-'))
})
after(async () => {
  await store?.close()
  inspect?.disconnect()
  await server?.close()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

const lineOf = (key) => `keel:line:{k:${key}}`

/**
 * Every command the server runs from now on, until `stop()`: `{ name, key,
 * script }`, where `script` is the text of the script an EVAL or EVALSHA ran.
 */
async function monitor() {
  const seen = []
  const bodies = new Map()
  const base = new Redis(server.url)
  const client = await base.monitor()
  client.on('monitor', (_, args) => {
    const name = String(args[0]).toLowerCase()
    let script
    if (name === 'eval') {
      script = String(args[1])
      bodies.set(createHash('sha1').update(script).digest('hex'), script)
    } else if (name === 'evalsha') {
      script = bodies.get(String(args[1]))
    }
    seen.push({ name, key: String(args[script === undefined ? 1 : 3]), script, args: args.map(String) })
  })
  // MONITOR starts with the next command: one that is surely after it.
  await eventually(async () => {
    await inspect.ping()
    assert.ok(seen.length > 0, 'monitoring')
  })
  return {
    seen,
    /** Acquire attempts on `key`: the line's acquire script is the one that waits in line with its own owner. */
    attempts: (key) => seen.filter((c) => c.key === key && c.script?.includes('wait_in_line(me, owner)')).length,
    publishes: () => seen.filter((c) => c.name === 'publish'),
    stop: () => {
      client.disconnect()
      base.disconnect()
    },
  }
}

/** A child waiting for `key` (up to `timeoutMs`); resolves to what it printed, and can be killed. */
function waiter(key, timeoutMs) {
  const child = spawn(process.execPath, [CHILD, 'queue', key, String(timeoutMs)], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  let err = ''
  child.stdout.on('data', (d) => (out += d))
  child.stderr.on('data', (d) => (err += d))
  const done = new Promise((resolve, reject) =>
    child.once('exit', (code, signal) => {
      if (signal === 'SIGKILL') return resolve({ killed: true })
      if (code !== 0) return reject(new Error(`waiter exited with ${code ?? signal}:\n${err}`))
      resolve(JSON.parse(out.trim().split('\n').pop()))
    }),
  )
  return { child, done, kill: () => child.kill('SIGKILL') }
}

/** Start a waiter and wait until its process has its place in line (`places` in all). */
async function inLine(key, timeoutMs, places) {
  const w = waiter(key, timeoutMs)
  await eventually(async () => assert.equal(await inspect.zcard(lineOf(key)), places, `${places} in line`), 10_000)
  return w
}

test('waiters in other processes get a held lock in the order they came, each process told alone', async () => {
  const key = uniqueKey('order')
  // Watched from before anyone asks (MONITOR started among replies confuses its client).
  const watching = await monitor()
  const holder = lock(key, 30_000)
  assert.equal(await holder.acquire(), true)
  const waiters = []
  for (let i = 1; i <= 3; i++) waiters.push(await inLine(key, 20_000, i))
  const before = watching.publishes().length
  try {
    assert.equal(await holder.release(), true)
    const got = await Promise.all(waiters.map((w) => w.done))
    assert.deepEqual(
      got.map((g) => g.acquired),
      [true, true, true],
    )
    const order = got.map((g, i) => [g.at, i]).sort((a, b) => a[0] - b[0])
    assert.deepEqual(
      order.map(([, i]) => i),
      [0, 1, 2],
      'in the order they came',
    )
    // One hand-over per release, each told to one process, a different one each time.
    const told = watching
      .publishes()
      .slice(before)
      .map((p) => p.args[1])
    assert.equal(told.length, 3, `told: ${told.join(', ')}`)
    assert.equal(new Set(told).size, 3)
    assert.ok(told.every((channel) => channel.startsWith('keel:wake:')))
  } finally {
    watching.stop()
  }
  assert.equal(await store.isLocked(key), false)
})

test('16 waiters in 4 processes, starting together: each gets in once, alone, for about one attempt each', async () => {
  const key = uniqueKey('burst')
  const watching = await monitor()
  try {
    const startAt = Date.now() + 1_500
    const results = await Promise.all(
      Array.from({ length: 4 }, () => runChild(env, 'burst', dir, key, '4', String(startAt))),
    )
    assert.deepEqual(
      results.map((r) => [r.ran, r.overlaps]),
      Array(4).fill([4, 0]),
    )
    // Each waiter's first attempt counts; a hand-over needs no attempt at all
    // (where every process tried after every release, this was about 4 each).
    const attempts = watching.attempts(`${key}`)
    assert.ok(attempts <= 24, `${attempts} acquire attempts for 16 critical sections`)
  } finally {
    watching.stop()
  }
})

test('a waiter killed while first in line holds the others up for well under a second', async () => {
  for (const pause of [0, 800]) {
    const key = uniqueKey(`killed-${pause}`)
    const holder = lock(key, 30_000)
    assert.equal(await holder.acquire(), true)
    const first = await inLine(key, 30_000, 1)
    const second = await inLine(key, 30_000, 2)
    first.kill()
    assert.deepEqual(await first.done, { killed: true })
    // Released at once, the lock goes to the dead one (its place has not
    // lapsed) and is free again when its claim window ends; released later,
    // its place has lapsed and the lock goes straight to the second.
    await sleep(pause)
    const released = Date.now()
    assert.equal(await holder.release(), true)
    const got = await second.done
    assert.equal(got.acquired, true)
    const late = got.at - released
    assert.ok(late < 1_000, `the second waiter got in ${late} ms after the release (pause ${pause} ms)`)
  }
})

test('a process whose waiters gave up leaves the line at once', async () => {
  const key = uniqueKey('gave-up')
  const holder = lock(key, 30_000)
  assert.equal(await holder.acquire(), true)
  const impatient = await inLine(key, 300, 1)
  const patient = await inLine(key, 20_000, 2)
  assert.equal((await impatient.done).acquired, false)
  await eventually(async () => assert.equal(await inspect.zcard(lineOf(key)), 1, 'only the patient one left'))
  const released = Date.now()
  assert.equal(await holder.release(), true)
  const got = await patient.done
  assert.equal(got.acquired, true)
  assert.ok(got.at - released < 400, `got in ${got.at - released} ms after the release`)
})

test('an attempt that does not wait never takes a place in line, and a line leaves nothing behind', async () => {
  const key = uniqueKey('immediate')
  const other = new RedisLockStore({ url: server.url })
  try {
    assert.equal(await other.acquire(key, 'someone', 30_000), true)
    assert.equal(await lock(key).acquireImmediately(), false)
    assert.equal(await inspect.exists(lineOf(key)), 0, 'no line for an attempt that does not wait')
    // One that waits, then gives up: its place goes with it.
    assert.equal(await lock(key).acquire({ timeout: 200, retryDelay: 20 }), false)
    await eventually(async () => assert.equal(await inspect.zcard(lineOf(key)), 0))
    assert.equal(await other.release(key, 'someone'), true)
    // Nobody waits: the line's keys are gone once their places would have lapsed.
    await eventually(async () => assert.deepEqual(await inspect.keys('keel:line:*'), []), 3_000)
  } finally {
    await other.close()
  }
})
