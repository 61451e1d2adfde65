// The store seam for stores written in JS: a class with async methods, an
// object answering plain values (called directly on the JS thread, and from
// another thread when a waiter retries), thenables, subclasses of
// MemoryLockStore; whatever such a store throws or rejects with comes out
// unchanged, wrong types and missing methods are TypeErrors naming the
// method, TTLs arrive as whole milliseconds, the store is always `this`, and
// nothing is left held after an acquire fails.
import { test, beforeEach } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { lock, setLockStore, MemoryLockStore } from '@shaferllc/keel/core'
import { MapLockStore, AsyncMapLockStore, jsStoreOver } from '../helpers/js-stores.mjs'

beforeEach(() => setLockStore(new MemoryLockStore()))

test('a store written in JS (a class with async methods) drives the whole API', async () => {
  const store = setLockStore(new AsyncMapLockStore())
  const [ran, result] = await lock('invoice:42', 5_000).run(async (l) => {
    assert.equal(await l.isLocked(), true)
    await l.extend()
    const left = await l.getRemainingTime()
    assert.ok(left > 4_000 && left <= 5_000)
    assert.equal(await lock('invoice:42').acquire(), false)
    return 'done'
  })
  assert.deepEqual([ran, result], [true, 'done'])
  assert.equal(store.held.size, 0)
  const names = store.calls.map((c) => c[0])
  assert.deepEqual(names.slice(0, 2), ['acquire', 'isLocked'])
  assert.ok(names.includes('extend') && names.at(-1) === 'release')
  const [, key, owner, ttl] = store.calls[0]
  assert.equal(key, 'invoice:42')
  assert.match(owner, /^[0-9a-f-]{36}$/)
  assert.equal(ttl, 5_000)
  assert.ok(store.calls.every((c) => c[0] !== 'release' || c[2] === owner), 'release sends the same owner')
})

test('a JS store whose methods return plain values (not promises) works too', async () => {
  // Time stands still in this store, so its remainingTime is exactly the TTL.
  setLockStore(new MapLockStore({ now: () => 0 }))
  const l = lock('k', 1_000)
  assert.equal(await l.acquire(), true)
  assert.equal(await lock('k').acquire(), false)
  assert.equal(await l.getRemainingTime(), 1_000)
  await l.extend()
  assert.equal(await l.isExpired(), false)
  assert.equal(await l.release(), true)
  assert.equal(await l.getRemainingTime(), null)
})

test('a JS store waits: acquire({ timeout }) retries until the holder releases', async () => {
  const store = setLockStore(new AsyncMapLockStore())
  const holder = lock('k', 10_000)
  await holder.acquire()
  // Whether the holder has started to let go: the waiter's success must come after.
  let releasing = false
  setTimeout(() => {
    releasing = true
    holder.release()
  }, 100)
  assert.equal(await lock('k').acquire({ timeout: 2_000, retryDelay: 20 }), true)
  assert.equal(releasing, true, 'acquired only once the holder let go')
  assert.ok(store.calls.filter((c) => c[0] === 'acquire').length >= 3, 'it polled')
})

test('a JS store method that throws or rejects fails the operation with that same error', async () => {
  const boom = new Error('connection refused')
  for (const acquire of [
    () => {
      throw boom
    },
    async () => {
      throw boom
    },
  ]) {
    setLockStore(jsStoreOver(new AsyncMapLockStore(), { acquire }))
    await assert.rejects(lock('k').acquire(), (e) => e === boom)
    await assert.rejects(lock('k').run(() => assert.fail('fn must not run')), (e) => e === boom)
  }
})

test('whatever a JS store method throws (a string, a number, null, a plain object) comes out as that same value', async () => {
  const thrown = ['store down', 42, null, undefined, { code: 'E_STORE', detail: 'x' }, Symbol('s')]
  for (const value of thrown) {
    const shown = typeof value === 'symbol' ? value.toString() : JSON.stringify(value)
    const same = (e) => (Object.is(e, value) ? true : assert.fail(`${shown}: got ${String(e)}`))
    for (const throwing of [true, false]) {
      const fail = throwing
        ? () => {
            throw value
          }
        : () => Promise.reject(value)
      for (const method of ['acquire', 'release', 'extend', 'isLocked', 'remainingTime']) {
        const store = jsStoreOver(new MemoryLockStore(), { [method]: fail })
        setLockStore(store)
        const l = lock('k')
        const call = {
          acquire: () => l.acquire(),
          release: async () => (await l.acquire(), l.release()),
          extend: async () => (await l.acquire(), l.extend()),
          isLocked: () => l.isLocked(),
          remainingTime: () => l.getRemainingTime(),
        }[method]
        await assert.rejects(call(), same, `${method} ${throwing ? 'throws' : 'rejects'} ${shown}`)
      }
      // Through the lock: run() with a failing acquire, and release().
      setLockStore(jsStoreOver(new MemoryLockStore(), { acquire: fail }))
      await assert.rejects(lock('k').run(() => assert.fail('fn must not run')), same, `run() ${shown}`)
      setLockStore(jsStoreOver(new MemoryLockStore(), { release: fail }))
      const l = lock('k')
      await l.acquire()
      await assert.rejects(l.release(), same, `release() ${shown}`)
    }
  }
})

test('a store method replaced by something that is not a function is a TypeError naming it', async () => {
  const store = jsStoreOver(new MemoryLockStore())
  setLockStore(store)
  for (const [method, call] of [
    ['acquire', () => lock('k').acquire()],
    ['isLocked', () => lock('k').isLocked()],
    ['remainingTime', () => lock('k').getRemainingTime()],
  ]) {
    const saved = store[method]
    store[method] = 'not a method'
    await assert.rejects(call(), (e) => {
      assert.ok(e instanceof TypeError, String(e))
      assert.match(e.message, new RegExp(`LockStore\\.${method} must be a function, but the store's ${method} is a string`))
      return true
    })
    store[method] = saved
  }
})

test('a JS store receives whole milliseconds, rounded up, as the native stores count them', async () => {
  const store = new AsyncMapLockStore()
  setLockStore(store)
  // Long enough that a busy machine cannot expire the lock between acquire and extend.
  const l = lock('k', 1_000.5)
  await l.acquire()
  await l.extend(2_000.25)
  await l.release()
  assert.deepEqual(
    store.calls.filter(([m]) => m === 'acquire' || m === 'extend').map((c) => c[3]),
    [1_001, 2_001],
  )
  assert.equal(l.ttlMs, 1_000.5, 'the lock keeps the TTL it was given')
})

test('a JS store method resolving the wrong type is a TypeError naming the method', async () => {
  const base = new AsyncMapLockStore()
  setLockStore(jsStoreOver(base, { acquire: async () => 'OK' }))
  await assert.rejects(lock('k').acquire(), (e) => e instanceof TypeError && e.message.includes('acquire') && e.message.includes('string'))
  setLockStore(jsStoreOver(base, { remainingTime: async () => '5' }))
  await assert.rejects(lock('k').getRemainingTime(), (e) => e instanceof TypeError && e.message.includes('remainingTime'))
  setLockStore(jsStoreOver(base, { isLocked: () => 1 }))
  await assert.rejects(lock('k').isLocked(), (e) => e instanceof TypeError && e.message.includes('isLocked'))
})

test('a MemoryLockStore subclass that overrides a method has its override called', async () => {
  const seen = []
  class Audited extends MemoryLockStore {
    async acquire(key, owner, ttlMs) {
      seen.push(key)
      return super.acquire(key, owner, ttlMs)
    }
  }
  setLockStore(new Audited())
  assert.deepEqual(await lock('audited').run(() => 'ok'), [true, 'ok'])
  assert.deepEqual(seen, ['audited'])
})

test('run() keeps the callback outcome when the store fails the release, and warns', async () => {
  const failing = new Error('store down during release')
  class FlakyRelease extends MemoryLockStore {
    async release() {
      throw failing
    }
  }
  setLockStore(new FlakyRelease())
  const warnings = []
  const onWarning = (w) => warnings.push(w)
  process.on('warning', onWarning)
  try {
    let calls = 0
    assert.deepEqual(await lock('rf').run(() => (calls++, 'done')), [true, 'done'])
    assert.equal(calls, 1)
    const boom = new Error('callback failed')
    await assert.rejects(
      lock('rf2').run(() => {
        throw boom
      }),
      (e) => e === boom,
    )
    // A release failure whose value cannot be turned into a string still loses nothing.
    class OddRelease extends MemoryLockStore {
      release() {
        return Promise.reject(Object.create(null))
      }
    }
    setLockStore(new OddRelease())
    await assert.rejects(
      lock('rf3').run(() => {
        throw boom
      }),
      (e) => e === boom,
    )
    await new Promise((r) => setImmediate(r))
    assert.equal(warnings.filter((w) => w.name === 'LockReleaseWarning').length, 3)
  } finally {
    process.off('warning', onWarning)
  }
})

test('a JS store may return any thenable, and methods are looked up at each call', async () => {
  const inner = new MemoryLockStore()
  const thenable = (value) => ({ then: (resolve) => resolve(value) })
  const store = jsStoreOver(inner, {
    acquire: (k, o, t) => ({ then: (res, rej) => inner.acquire(k, o, t).then(res, rej) }),
    extend: () => thenable(true),
    remainingTime: () => thenable(null),
  })
  setLockStore(store)
  const l = lock('k')
  assert.equal(await l.acquire(), true)
  await l.extend()
  assert.equal(await l.getRemainingTime(), null)
  store.remainingTime = () => 7 // swapped after setLockStore
  assert.equal(await l.getRemainingTime(), 7)
  assert.equal(await l.release(), true)
})

test('an operation that starts on the JS thread calls the JS store directly, before returning', async () => {
  const store = setLockStore(new MapLockStore())
  const l = lock('direct')
  const pending = l.acquire()
  // The store ran inside the call itself: no thread hop, no queued callback.
  assert.deepEqual(store.calls.map((c) => c[0]), ['acquire'])
  assert.equal(await pending, true)
  const releasing = l.release()
  assert.deepEqual(store.calls.map((c) => c[0]), ['acquire', 'release'])
  assert.equal(await releasing, true)
})

test('a waiting acquire retries a synchronous JS store from another thread until the holder lets go', async () => {
  const store = setLockStore(new MapLockStore())
  const holder = lock('k', 10_000)
  await holder.acquire()
  setTimeout(() => holder.release(), 80)
  assert.equal(await lock('k').acquire({ timeout: 2_000, retryDelay: 10 }), true)
  assert.ok(store.calls.filter((c) => c[0] === 'acquire').length >= 3, 'it retried')
})

test('every store method is called with the store as `this`, directly and from a retry', async () => {
  const calls = []
  const store = new MapLockStore()
  for (const m of ['acquire', 'release', 'extend', 'isLocked', 'remainingTime']) {
    const original = store[m]
    store[m] = function (...args) {
      calls.push([m, this === store])
      return original.apply(store, args)
    }
  }
  setLockStore(store)
  const l = lock('this')
  await l.acquire()
  await l.isLocked()
  await l.getRemainingTime()
  await l.extend()
  // Retries of a waiting acquire come through the threadsafe path.
  assert.equal(await lock('this').acquire({ timeout: 40, retryDelay: 5 }), false)
  await l.release()
  assert.deepEqual([...new Set(calls.map(([m]) => m))].sort(), ['acquire', 'extend', 'isLocked', 'release', 'remainingTime'])
  assert.ok(calls.filter(([m]) => m === 'acquire').length >= 3, 'the waiter retried')
  assert.deepEqual(calls.filter(([, self]) => !self), [], 'every call had the store as this')
})

test('after a failed acquire nothing is left held: not by the handle, not in the store', async () => {
  const boom = new Error('reply lost')
  const cases = [
    ['throws after taking it', (store) => (k, o, t) => (store.acquire(k, o, t), (() => { throw boom })()), (e) => e === boom],
    ['rejects after taking it', (store) => async (k, o, t) => (store.acquire(k, o, t), Promise.reject(boom)), (e) => e === boom],
    ['resolves "OK" after taking it', (store) => async (k, o, t) => (store.acquire(k, o, t), 'OK'), (e) => e instanceof TypeError],
  ]
  for (const [what, acquire, expected] of cases) {
    const store = new MapLockStore()
    setLockStore(jsStoreOver(store, { acquire: acquire(store) }))
    const l = lock('k')
    await assert.rejects(l.acquire(), expected, what)
    // The token our acquire may have left is given back (release only ever
    // deletes our own token, so this is safe).
    for (let i = 0; i < 100 && store.held.size > 0; i++) await sleep(5)
    assert.equal(store.held.size, 0, `${what}: the store still holds the token`)
    const releases = store.calls.filter((c) => c[0] === 'release').length
    assert.equal(await l.release(), false, `${what}: the handle does not think it holds the lock`)
    assert.equal(store.calls.filter((c) => c[0] === 'release').length, releases, 'and sends no release of its own')
  }
})

test('a remainingTime of the wrong type, from a direct or an async call, is a TypeError naming it', async () => {
  for (const remainingTime of [() => 'soon', async () => 'soon', () => NaN, () => ({})]) {
    setLockStore(jsStoreOver(new MapLockStore(), { remainingTime }))
    await assert.rejects(lock('k').getRemainingTime(), (e) => e instanceof TypeError && /LockStore\.remainingTime\(\) must return a number or null/.test(e.message))
  }
})
