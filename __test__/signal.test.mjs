// Lock.signal and autoExtend: the signal aborts (reason: LockNotHeldError) as
// soon as a hold is known lost (an extension that failed, its TTL passing
// without one, an event-loop stall longer than the TTL), never on a release;
// autoExtend keeps a hold alive every third of its TTL and stops on release.
// Against MemoryLockStore and a RedisLockStore on a server this file starts.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { lock, setLockStore, MemoryLockStore, RedisLockStore, LockNotHeldError } from '@shaferllc/keel/core'
import { startRedis, uniqueKey } from './helpers/servers.mjs'
import { jsStoreOver } from './helpers/stores.mjs'

const exec = promisify(execFile)
const server = await startRedis()
const inspect = new Redis(server.url)
const redis = new RedisLockStore({ url: server.url, commandTimeout: 1_000 })
after(async () => {
  await redis.close()
  inspect.disconnect()
  await server.close()
})

const stores = { memory: () => new MemoryLockStore(), redis: () => redis }
/** Resolves with the time (ms after `from`) the signal aborted, or rejects after `ms`. */
const abortedAt = (signal, from, ms = 5_000) =>
  new Promise((resolve, reject) => {
    if (signal.aborted) return resolve(performance.now() - from)
    const t = setTimeout(() => reject(new Error(`not aborted within ${ms} ms`)), ms)
    signal.addEventListener('abort', () => {
      clearTimeout(t)
      resolve(performance.now() - from)
    })
  })
const busy = (ms) => {
  const until = performance.now() + ms
  while (performance.now() < until);
}

test('a handle that holds nothing has an aborted signal; options.autoExtend must be a boolean', async () => {
  setLockStore(new MemoryLockStore())
  const l = lock('nothing')
  assert.equal(l.signal.aborted, true)
  assert.ok(l.signal.reason instanceof LockNotHeldError)
  assert.equal(l.signal.reason.key, 'nothing')
  await assert.rejects(l.acquire({ autoExtend: 'yes' }), /Lock\.acquire: options\.autoExtend must be true or false, got a string/)
  await assert.rejects(l.run(() => 1, { autoExtend: 1 }), TypeError)
})

for (const [name, make] of Object.entries(stores)) {
  test(`${name}: a held lock's signal is live; release does not abort it, and the next hold gets a new one`, async () => {
    setLockStore(make())
    const l = lock(uniqueKey('live'), 5_000)
    assert.equal(await l.acquire(), true)
    const first = l.signal
    assert.equal(first.aborted, false)
    assert.equal(l.signal, first, 'one signal per hold')
    assert.equal(await l.release(), true)
    assert.equal(first.aborted, false, 'a release is not a loss')
    assert.equal(l.signal.aborted, true, 'after release the handle holds nothing')
    assert.equal(await l.acquire(), true)
    assert.notEqual(l.signal, first)
    assert.equal(l.signal.aborted, false)
    await l.release()
  })

  test(`${name}: the TTL passing without an extension aborts the signal, not before`, async () => {
    setLockStore(make())
    const key = uniqueKey('lapse')
    const l = lock(key, 300)
    const start = performance.now()
    assert.equal(await l.acquire(), true)
    const at = await abortedAt(l.signal, start)
    assert.ok(at >= 250 && at < 1_000, `aborted after ${at} ms (TTL 300)`)
    assert.ok(l.signal.reason instanceof LockNotHeldError)
    assert.equal(await l.isExpired(), true)
    if (name === 'memory') assert.equal(await l.isLocked(), false, 'in memory it aborts exactly as the store lets go')
  })

  test(`${name}: an extension moves the deadline; a failed one aborts at once`, async () => {
    const store = setLockStore(make())
    const key = uniqueKey('extend')
    const l = lock(key, 300)
    const start = performance.now()
    assert.equal(await l.acquire(), true)
    const { signal } = l
    await sleep(200)
    await l.extend(600)
    await sleep(300)
    assert.equal(signal.aborted, false, 'still held 500 ms in, after extending to 600 ms at 200')
    const at = await abortedAt(signal, start)
    assert.ok(at >= 700, `aborted after ${at} ms`)
    // Lost to someone else: extend() rejects and the signal aborts with it.
    const m = lock(uniqueKey('stolen'), 200)
    assert.equal(await m.acquire(), true)
    const lost = m.signal
    await sleep(250)
    assert.equal(await store.acquire(m.key, 'someone else', 5_000), true)
    await assert.rejects(m.extend(), LockNotHeldError)
    assert.equal(lost.aborted, true)
    assert.ok(lost.reason instanceof LockNotHeldError)
    assert.equal(await store.release(m.key, 'someone else'), true)
  })

  test(`${name}: run(fn, { autoExtend: true }) keeps the lock past its TTL, then releases and stops`, async () => {
    const store = setLockStore(make())
    const key = uniqueKey('auto')
    let signal
    const [ran, seen] = await lock(key, 150).run(
      async (l) => {
        signal = l.signal
        const checks = []
        for (let i = 0; i < 6; i++) {
          await sleep(100)
          checks.push(await store.acquire(key, 'intruder', 1_000))
        }
        return checks
      },
      { autoExtend: true },
    )
    assert.equal(ran, true)
    assert.deepEqual(seen, [false, false, false, false, false, false], 'nobody got in during 600 ms on a 150 ms TTL')
    assert.equal(signal.aborted, false)
    assert.equal(await store.isLocked(key), false, 'released at the end')
    await sleep(200)
    assert.equal(await store.isLocked(key), false, 'no extension after release')
  })

  test(`${name}: autoExtend that finds the lock gone aborts the signal and stops`, async () => {
    // The hold is taken away underneath: in memory by a store that forgets,
    // in Redis by deleting the key behind the lock's back.
    const memory = make()
    const forgetful = name === 'memory'
      ? jsStoreOver(memory, { extend: async (k, o, t) => (forgotten ? false : memory.extend(k, o, t)) })
      : memory
    let forgotten = false
    setLockStore(forgetful)
    const l = lock(uniqueKey('gone'), 300)
    assert.equal(await l.acquire({ autoExtend: true }), true)
    const { signal } = l
    await sleep(150)
    assert.equal(signal.aborted, false)
    const start = performance.now()
    if (name === 'memory') forgotten = true
    else await inspect.del(l.key)
    const at = await abortedAt(signal, start)
    assert.ok(at < 300, `aborted ${at} ms after the loss (renewals every 100 ms)`)
    assert.ok(signal.reason instanceof LockNotHeldError)
    assert.equal(await l.isExpired(), true)
    assert.equal(await l.release(), false)
  })

  test(`${name}: an event loop stalled longer than the TTL sees the signal aborted when it wakes`, async () => {
    setLockStore(make())
    const l = lock(uniqueKey('stall'), 200)
    assert.equal(await l.acquire({ autoExtend: true }), true)
    const { signal } = l
    busy(450)
    // Before any timer or answer: reading the signal already knows.
    assert.equal(l.signal.aborted, true)
    assert.equal(signal.aborted, true)
    assert.ok(signal.reason instanceof LockNotHeldError)

    const m = lock(uniqueKey('stall-timer'), 200)
    assert.equal(await m.acquire({ autoExtend: true }), true)
    const held = m.signal
    busy(450)
    // Without reading it again: the first timer after the stall aborts it.
    await new Promise((resolve) => setImmediate(resolve))
    await sleep(0)
    assert.equal(held.aborted, true)
  })
}

test('the signal is the channel: work given l.signal stops when the lock is lost, nothing throws elsewhere', async () => {
  setLockStore(new MemoryLockStore())
  const unhandled = []
  const onUnhandled = (e) => unhandled.push(e)
  process.on('unhandledRejection', onUnhandled)
  try {
    const started = performance.now()
    await assert.rejects(
      lock('long-job', 150).run((l) => sleep(5_000, 'done', { signal: l.signal })),
      (e) => e.name === 'AbortError' && e.cause instanceof LockNotHeldError,
    )
    const took = performance.now() - started
    assert.ok(took < 1_000, `stopped after ${took} ms`)
    // autoExtend against a store whose extend fails: the failure is the signal, not a rejection.
    const memory = new MemoryLockStore()
    setLockStore(
      jsStoreOver(memory, {
        extend: async () => {
          throw new Error('store down')
        },
      }),
    )
    const l = lock('flaky', 150)
    assert.equal(await l.acquire({ autoExtend: true }), true)
    await abortedAt(l.signal, performance.now(), 2_000)
    await sleep(100)
    assert.deepEqual(unhandled, [])
  } finally {
    process.off('unhandledRejection', onUnhandled)
  }
})

test('a held lock with autoExtend does not keep the process alive', async () => {
  const script = `
    const { lock } = require('@shaferllc/keel/core');
    lock('held-forever', 300).acquire({ autoExtend: true }).then((ok) => {
      const { signal } = lock('other', 300);
      console.log(ok);
    });`
  const started = Date.now()
  const { stdout } = await exec(process.execPath, ['-e', script], { timeout: 10_000 })
  assert.equal(stdout, 'true\n')
  assert.ok(Date.now() - started < 3_000)
})
