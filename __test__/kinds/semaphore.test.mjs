// semaphore(key, limit): up to `limit` holders at once, each permit with its
// own owner token and expiry, and everything a lock handle does: on
// MemoryLockStore (natively) and on stores written in JS (as permit slots).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import {
  semaphore,
  lock,
  restoreLock,
  setLockStore,
  LockNotHeldError,
  Lock,
} from '@shaferllc/keel/core'
import { onStores } from './on-stores.mjs'
import { MapLockStore, AsyncMapLockStore } from '../helpers/js-stores.mjs'

onStores(
  [
    ['a JS store with plain methods', () => new MapLockStore()],
    ['a JS store with async methods', () => new AsyncMapLockStore()],
  ],
  everyStore,
  memoryOnly,
)

function everyStore() {
  test('holders never exceed the limit, and do reach it', async () => {
    let active = 0
    let most = 0
    const outcomes = await Promise.all(
      Array.from({ length: 12 }, () =>
        semaphore('exports', 3).run(
          async () => {
            active++
            most = Math.max(most, active)
            await sleep(15)
            active--
          },
          { timeout: 5_000 },
        ),
      ),
    )
    assert.ok(outcomes.every(([ran]) => ran), 'every run got a permit in time')
    assert.equal(most, 3)
    assert.equal(await semaphore('exports', 3).holders(), 0, 'every permit given back')
  })

  test('a semaphore handle is a Lock: isLocked() says whether every permit is taken, holders() counts them', async () => {
    const a = semaphore('s', 2)
    const b = semaphore('s', 2)
    assert.ok(a instanceof Lock)
    assert.equal(await a.isLocked(), false)
    assert.equal(await a.acquire(), true)
    assert.equal(await b.holders(), 1)
    assert.equal(await b.isLocked(), false)
    assert.equal(await b.acquire(), true)
    assert.equal(await a.isLocked(), true)
    assert.equal(await semaphore('s', 2).acquireImmediately(), false)
    assert.equal(await a.holders(), 2)
    assert.equal(await a.release(), true)
    assert.equal(await a.release(), false, 'a permit is given back once')
    assert.equal(await b.holders(), 1)
    assert.equal(await b.release(), true)
  })

  test('each permit has its own owner and expiry: a lapsed one frees while the others are kept', async () => {
    const short = semaphore('s', 2, 80)
    const long = semaphore('s', 2, 60_000)
    assert.equal(await short.acquire(), true)
    assert.equal(await long.acquire(), true)
    assert.equal(await semaphore('s', 2).acquireImmediately(), false)
    await sleep(120)
    assert.equal(await long.holders(), 1)
    await assert.rejects(short.extend(), LockNotHeldError)
    assert.equal(await short.isExpired(), true)
    assert.equal(await long.isExpired(), false)
    const left = await long.getRemainingTime()
    assert.ok(left !== null && left > 50_000, String(left))
    assert.equal(await semaphore('s', 2).getRemainingTime(), null, 'a handle that holds nothing has no time left')
    const third = semaphore('s', 2)
    assert.equal(await third.acquireImmediately(), true)
    await long.release()
    await third.release()
  })

  test('a release wakes the next waiter at once, in arrival order', async () => {
    const holders = await Promise.all([semaphore('s', 2), semaphore('s', 2)].map(async (h) => (await h.acquire(), h)))
    const order = []
    // retryDelay far beyond the test: only a wake-up on release lets them in.
    const waiting = ['first', 'second', 'third'].map((name) =>
      semaphore('s', 2).run(() => order.push(name), { timeout: 5_000, retryDelay: 60_000 }),
    )
    await sleep(20)
    assert.deepEqual(order, [])
    await holders[0].release()
    await holders[1].release()
    const outcomes = await Promise.all(waiting)
    assert.ok(outcomes.every(([ran]) => ran))
    assert.deepEqual(order, ['first', 'second', 'third'])
  })

  test('when a permit frees, every waiter that now fits gets in, not one per release', async () => {
    const holder = semaphore('s', 3)
    await holder.acquire()
    await Promise.all([semaphore('s', 3).acquire(), semaphore('s', 3).acquire()])
    // Three more wait; freeing one permit at a time lets one in each time...
    const waiters = Array.from({ length: 3 }, () => semaphore('s', 3))
    const got = waiters.map((w) => w.acquire({ timeout: 5_000, retryDelay: 60_000 }))
    await sleep(10)
    await holder.release()
    assert.equal(await got[0], true)
    assert.equal(await semaphore('s', 3).holders(), 3)
    // ...and a wider semaphore admits the queue as far as it now fits.
    await waiters[0].release()
    assert.equal(await got[1], true)
    await Promise.all(waiters.slice(0, 2).map((w) => w.release()))
    assert.equal(await got[2], true)
  })

  test('lock(k) and semaphore(k, n) are separate: neither sees the other', async () => {
    const plain = lock('k')
    await plain.acquire()
    const permit = semaphore('k', 1)
    assert.equal(await permit.acquire(), true)
    assert.equal(await lock('k').isLocked(), true)
    assert.equal(await semaphore('k', 1).holders(), 1)
    assert.equal(await plain.release(), true)
    assert.equal(await semaphore('k', 1).isLocked(), true, 'the plain release left the permit')
    assert.equal(await permit.release(), true)
  })

  test('autoExtend keeps a permit past its TTL; signal aborts when a permit is lost', async () => {
    const kept = semaphore('s', 1, 90)
    const [, seen] = await kept.run(
      async (held) => {
        await sleep(250)
        return [held.signal.aborted, await semaphore('s', 1).isLocked()]
      },
      { autoExtend: true },
    )
    assert.deepEqual(seen, [false, true])
    const lapsing = semaphore('s', 1, 60)
    await lapsing.acquire()
    const { signal } = lapsing
    // (The signal's timer does not keep the process alive: the sleep does.)
    await Promise.race([new Promise((resolve) => signal.addEventListener('abort', resolve)), sleep(5_000)])
    assert.ok(signal.aborted, 'aborted when the permit lapsed')
    assert.ok(signal.reason instanceof LockNotHeldError)
  })

  test('Symbol.asyncDispose (what `await using` calls) gives the permit back', async () => {
    const permit = semaphore('s', 1)
    assert.equal(await permit.acquire(), true)
    assert.equal(await semaphore('s', 1).isLocked(), true)
    await permit[Symbol.asyncDispose]()
    assert.equal(await semaphore('s', 1).holders(), 0)
  })

  test('serialize() carries the kind and limit; the restored handle extends and releases the same permit', async () => {
    const permit = semaphore('s', 4, 5_000)
    assert.equal(permit.serialize(), '{"key":"s","ttlMs":5000,"kind":"semaphore","limit":4}')
    await permit.acquire()
    const restored = restoreLock(permit.serialize())
    assert.equal(JSON.parse(restored.serialize()).owner, JSON.parse(permit.serialize()).owner)
    await restored.extend(20_000)
    const left = await restored.getRemainingTime()
    assert.ok(left !== null && left > 10_000, String(left))
    assert.equal(await restored.holders(), 1)
    assert.equal(await restored.release(), true)
    assert.equal(await permit.release(), false)
    const plain = '{"key":"s","ttlMs":5000}'
    assert.equal(restoreLock(plain).serialize(), plain, "a plain lock's string is unchanged")
  })

  test('a bad limit is an error that names it', () => {
    for (const bad of [0, -1, 1.5, NaN, Infinity, 2 ** 53]) {
      assert.throws(() => semaphore('s', bad), (e) => e instanceof RangeError && /semaphore: limit must be a positive safe integer/.test(e.message), String(bad))
    }
    for (const bad of [undefined, '3', null, 3n]) {
      assert.throws(() => semaphore('s', /** @type {any} */ (bad)), (e) => e instanceof TypeError && /semaphore: limit must be a number/.test(e.message))
    }
    assert.throws(() => semaphore(/** @type {any} */ (1), 2), (e) => e instanceof TypeError && /semaphore: key/.test(e.message))
    assert.throws(() => semaphore('s', 2, 0), (e) => e instanceof RangeError && /semaphore: ttlMs/.test(e.message))
    for (const bad of [
      '{"key":"s","ttlMs":5,"kind":"semaphore"}',
      '{"key":"s","ttlMs":5,"kind":"semaphore","limit":0}',
      '{"key":"s","ttlMs":5,"kind":"sem","limit":2}',
    ]) {
      assert.throws(() => restoreLock(bad), TypeError, bad)
    }
  })
}

function memoryOnly() {
  test('callers with different limits: each is admitted only while fewer than its own limit are held', async () => {
    await semaphore('mixed', 2).acquire()
    await semaphore('mixed', 2).acquire()
    assert.equal(await semaphore('mixed', 2).acquireImmediately(), false)
    assert.equal(await semaphore('mixed', 3).isLocked(), false)
    assert.equal(await semaphore('mixed', 3).acquireImmediately(), true)
    assert.equal(await semaphore('mixed', 3).acquireImmediately(), false)
    assert.equal(await semaphore('mixed', 1).holders(), 3)
  })

  test('fencing tokens: every permit gets one, and they grow', async () => {
    const a = semaphore('s', 2)
    const b = semaphore('s', 2)
    await a.acquire()
    await b.acquire()
    assert.equal(typeof a.fencingToken, 'number')
    assert.ok(/** @type {number} */ (b.fencingToken) > /** @type {number} */ (a.fencingToken))
    await a.release()
    assert.equal(a.fencingToken, null)
  })
}

test('on a JS store, permits are plain locks on keys of their own: keel:permit:<slot>:<key>', async () => {
  const store = setLockStore(new MapLockStore())
  const a = semaphore('exports', 2)
  const b = semaphore('exports', 2)
  await a.acquire()
  await b.acquire()
  assert.deepEqual([...store.held.keys()].sort(), ['keel:permit:0:exports', 'keel:permit:1:exports'])
  assert.equal(await semaphore('exports', 2).acquireImmediately(), false)
  // A caller with a higher limit finds the next slot free.
  assert.equal(await semaphore('exports', 3).acquireImmediately(), true)
  await a.release()
  assert.deepEqual([...store.held.keys()].sort(), ['keel:permit:1:exports', 'keel:permit:2:exports'])
  assert.equal(await lock('exports').acquireImmediately(), true, 'the plain lock of the key is apart')
})

test('on a JS store, a permit slot given back after a failed attempt wakes the semaphore\'s waiters', async () => {
  const store = setLockStore(new MapLockStore())
  let failNext = false
  // The store takes the slot, then the connection fails before it answers.
  store.acquire = function (key, owner, ttlMs) {
    const took = MapLockStore.prototype.acquire.call(this, key, owner, ttlMs)
    if (took && failNext) {
      failNext = false
      throw Object.assign(new Error('connection reset'), { code: 'ERR_LOCK_STORE_CONNECTION' })
    }
    return took
  }
  const [a, c] = [semaphore('x', 2), semaphore('x', 2)]
  await a.acquire()
  await c.acquire()
  const waiter = semaphore('x', 2)
  const waiting = waiter.acquire({ timeout: 5_000, retryDelay: 60_000 })
  await sleep(20)
  failNext = true
  const started = performance.now()
  await c.release()
  assert.equal(await waiting, true)
  const took = performance.now() - started
  assert.ok(took < 2_000, `in after ${took} ms: the give-back woke it, not its 60 s poll`)
})
