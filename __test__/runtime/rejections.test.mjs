// No unhandled promise rejections: every failure path that settles a promise
// in the background (a give-back after a failed or late acquire, run()'s
// release after its callback, attempts of waiters that gave up, a store that
// cannot be reached) hands its error to the caller or drops it on purpose.
// This file counts every 'unhandledRejection' the process sees; and the
// first test proves that the suite's runner fails a run that has one.

import { test, afterEach } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'
import { lock, setLockStore, MemoryLockStore, RedisLockStore, LockNotHeldError } from '@shaferllc/keel/core'
import { jsStoreOver } from '../helpers/js-stores.mjs'

const unhandled = []
process.on('unhandledRejection', (reason) => unhandled.push(reason))
// LockReleaseWarnings are expected here: counted, not printed.
process.removeAllListeners('warning')
const warnings = []
process.on('warning', (w) => warnings.push(w))

/** Let background work (late answers, give-backs, timers) run out, then check. */
async function noneUnhandled(ms = 50) {
  await sleep(ms)
  for (let i = 0; i < 5; i++) await new Promise(setImmediate)
  assert.deepEqual(unhandled.map(String), [], 'unhandled rejections')
}

afterEach(() => {
  unhandled.length = 0
  warnings.length = 0
  setLockStore(new MemoryLockStore())
})

const failing = (message) => () => Promise.reject(new Error(message))

test('the suite runner fails a test file that leaves a rejection unhandled', () => {
  const canary = fileURLToPath(new URL('../helpers/unhandled-canary.mjs', import.meta.url))
  // Without this runner's NODE_TEST_CONTEXT, the child is a top-level run of its own.
  const { NODE_TEST_CONTEXT, ...env } = process.env
  const r = spawnSync(process.execPath, ['--test', '--test-reporter=tap', canary], { encoding: 'utf8', env })
  assert.notEqual(r.status, 0, `the run passed:\n${r.stdout}`)
  assert.match(r.stdout + r.stderr, /canary: nobody handles this/)
})

test('an acquire that rejects, then a give-back that rejects too: one error, to the caller', async () => {
  const store = {
    acquire: failing('acquire failed'),
    release: failing('give-back failed'),
    extend: failing('no'),
    isLocked: async () => false,
    remainingTime: async () => null,
  }
  setLockStore(store)
  await assert.rejects(lock('k').acquire(), /acquire failed/)
  await assert.rejects(lock('k').run(async () => assert.fail('ran')), /acquire failed/)
  await assert.rejects(lock('k').acquire({ timeout: 100, retryDelay: 5 }), /acquire failed/)
  await noneUnhandled()
})

test('run(): a release that throws or rejects after the callback becomes a warning, never a rejection', async () => {
  for (const release of [failing('release rejected'), () => { throw new Error('release threw') }]) {
    const memory = new MemoryLockStore()
    setLockStore(jsStoreOver(memory, { release }))
    assert.deepEqual(await lock('r', 1_000).run(async () => 'result'), [true, 'result'])
    await assert.rejects(lock('s', 1_000).run(async () => { throw new Error('callback error') }), /callback error/)
  }
  await noneUnhandled()
  assert.equal(warnings.filter((w) => w.name === 'LockReleaseWarning').length, 4)
})

test('waiters that gave up: their late answers (a token, or a rejection) are dealt with quietly', async () => {
  const answers = []
  setLockStore({
    acquire: () => new Promise((resolve, reject) => answers.push({ resolve, reject })),
    release: failing('give-back of the late token failed'),
    extend: async () => false,
    isLocked: async () => true,
    remainingTime: async () => 1_000,
  })
  const [a, b] = [lock('late').acquire({ timeout: 30 }), lock('late2').acquire({ timeout: 30 })]
  assert.equal(await a, false)
  assert.equal(await b, false)
  assert.equal(answers.length, 2)
  answers[0].resolve(true) // taken after its caller left: given back, and that fails
  answers[1].reject(new Error('late failure'))
  await noneUnhandled()
})

test('a queue whose head fails: that caller gets the error, the next waiter carries on', async () => {
  let calls = 0
  const memory = new MemoryLockStore()
  await memory.acquire('q', 'someone', 60)
  setLockStore(
    jsStoreOver(memory, {
      acquire: (k, o, t) => (++calls === 3 ? Promise.reject(new Error('an attempt failed')) : memory.acquire(k, o, t)),
    }),
  )
  const first = lock('q').acquire({ timeout: 2_000, retryDelay: 10 })
  const second = lock('q').acquire({ timeout: 2_000, retryDelay: 10 })
  // Both try at once; whichever makes the failing third call gets its error.
  const outcomes = await Promise.allSettled([first, second])
  assert.deepEqual(outcomes.map((o) => o.status).sort(), ['fulfilled', 'rejected'])
  assert.match(outcomes.find((o) => o.status === 'rejected').reason.message, /an attempt failed/)
  assert.equal(outcomes.find((o) => o.status === 'fulfilled').value, true)
  await noneUnhandled()
})

test('a lost lock: extend() rejects with LockNotHeldError to its caller only', async () => {
  const l = lock('lost', 20)
  assert.equal(await l.acquire(), true)
  await sleep(40)
  await assert.rejects(l.extend(), LockNotHeldError)
  assert.equal(await l.release(), false)
  await noneUnhandled()
})

test('a Redis store that cannot be reached: every operation and every waiter rejects to its caller', async () => {
  const dead = new RedisLockStore({ url: 'redis://127.0.0.1:1', connectTimeout: 100, commandTimeout: 100 })
  setLockStore(dead)
  const l = lock('nowhere')
  const outcomes = await Promise.allSettled([
    l.acquire(),
    l.acquire({ timeout: 300, retryDelay: 20 }),
    lock('nowhere').run(async () => assert.fail('ran without the lock')),
    lock('nowhere').acquire({ timeout: 300 }),
    dead.release('nowhere', 'someone'),
    l.extend(),
    l.isLocked(),
    l.getRemainingTime(),
  ])
  for (const o of outcomes) assert.equal(o.status, 'rejected', String(o.value))
  await dead.close()
  await noneUnhandled(200)
})
