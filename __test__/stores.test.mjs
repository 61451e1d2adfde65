// The store seam: setLockStore/getLockStore, MemoryLockStore used directly,
// expiry sweeping, and a store written in JS plugged in.
import { test, beforeEach } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { lock, restoreLock, setLockStore, getLockStore, MemoryLockStore } from '@shaferllc/keel/core'
import { jsStoreOver } from './helpers/stores.mjs'

beforeEach(() => setLockStore(new MemoryLockStore()))

test('setLockStore() returns the store and getLockStore() reads it back', () => {
  const store = new MemoryLockStore()
  assert.equal(setLockStore(store), store)
  assert.equal(getLockStore(), store)
})

test('a lock keeps the store it was created with', async () => {
  const first = setLockStore(new MemoryLockStore())
  const l = lock('k')
  const second = setLockStore(new MemoryLockStore())
  await l.acquire()
  assert.equal(l.store, first)
  assert.equal(await first.isLocked('k'), true)
  assert.equal(await second.isLocked('k'), false)
  await l.release()
})

test('a fresh MemoryLockStore per test means keys cannot leak between tests', async () => {
  await lock('leaky', 60_000).acquire()
  setLockStore(new MemoryLockStore())
  assert.equal(await lock('leaky').isLocked(), false)
  assert.equal(await lock('leaky').acquire(), true)
})

test('MemoryLockStore works directly as a LockStore', async () => {
  const store = new MemoryLockStore()
  assert.equal(await store.acquire('k', 'A', 1_000), true)
  assert.equal(await store.acquire('k', 'B', 1_000), false, 'acquire is set-if-absent')
  assert.equal(await store.isLocked('k'), true)
  const left = await store.remainingTime('k')
  assert.ok(left > 900 && left <= 1_000)
  assert.equal(await store.release('k', 'B'), false, 'release is owner-conditional')
  assert.equal(await store.extend('k', 'B', 5_000), false, 'extend is owner-conditional')
  assert.equal(await store.extend('k', 'A', 5_000), true)
  assert.ok((await store.remainingTime('k')) > 4_000)
  assert.equal(await store.release('k', 'A'), true)
  assert.equal(await store.isLocked('k'), false)
  assert.equal(await store.remainingTime('k'), null)
  for (const p of [store.acquire('x', 'o', 1), store.isLocked('x')]) assert.ok(p instanceof Promise)
})

test('MemoryLockStore expiry: an expired entry is free, and its old owner cannot act on it', async () => {
  const store = new MemoryLockStore()
  await store.acquire('k', 'A', 30)
  await sleep(50)
  assert.equal(await store.isLocked('k'), false)
  assert.equal(await store.remainingTime('k'), null)
  assert.equal(await store.extend('k', 'A', 1_000), false)
  assert.equal(await store.acquire('k', 'B', 1_000), true)
  assert.equal(await store.release('k', 'A'), false)
  assert.equal(await store.isLocked('k'), true)
})

test('a million keys taken and left to expire do not stay in memory', async () => {
  const store = setLockStore(new MemoryLockStore())
  for (let i = 0; i < 1_000_000; i++) {
    if (!(await lock(`job:${i}`, 200).acquire())) throw new Error(`job:${i} was not free`)
  }
  assert.ok(store.size > 1_000, `the store held ${store.size} entries while they were live`)
  await sleep(1_300) // past the TTL and the store's sweep interval
  await lock('one-more').acquire()
  assert.equal(store.size, 1)
})

test('two memory stores are independent', async () => {
  const a = new MemoryLockStore()
  const b = new MemoryLockStore()
  await a.acquire('k', 'o', 1_000)
  assert.equal(await b.isLocked('k'), false)
})

/** A store in plain JS over a Map, with the methods' `this` checked. */
class MapStore {
  entries = new Map()
  calls = []
  #live(key) {
    const e = this.entries.get(key)
    if (e && e.expiresAt <= Date.now()) this.entries.delete(key)
    return this.entries.get(key)
  }
  async acquire(key, owner, ttlMs) {
    assert.ok(this instanceof MapStore, 'this is the store')
    this.calls.push(['acquire', key, owner, ttlMs])
    if (this.#live(key)) return false
    this.entries.set(key, { owner, expiresAt: Date.now() + ttlMs })
    return true
  }
  async release(key, owner) {
    this.calls.push(['release', key, owner])
    const e = this.#live(key)
    if (!e || e.owner !== owner) return false
    this.entries.delete(key)
    return true
  }
  async extend(key, owner, ttlMs) {
    this.calls.push(['extend', key, owner, ttlMs])
    const e = this.#live(key)
    if (!e || e.owner !== owner) return false
    e.expiresAt = Date.now() + ttlMs
    return true
  }
  async isLocked(key) {
    this.calls.push(['isLocked', key])
    return this.#live(key) !== undefined
  }
  async remainingTime(key) {
    this.calls.push(['remainingTime', key])
    const e = this.#live(key)
    return e ? e.expiresAt - Date.now() : null
  }
}

test('a store written in JS (a class with async methods) drives the whole API', async () => {
  const store = setLockStore(new MapStore())
  const [ran, result] = await lock('invoice:42', 5_000).run(async (l) => {
    assert.equal(await l.isLocked(), true)
    await l.extend()
    const left = await l.getRemainingTime()
    assert.ok(left > 4_000 && left <= 5_000)
    assert.equal(await lock('invoice:42').acquire(), false)
    return 'done'
  })
  assert.deepEqual([ran, result], [true, 'done'])
  assert.equal(store.entries.size, 0)
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
  const held = new Map()
  setLockStore({
    acquire: (k, o) => (held.has(k) ? false : (held.set(k, o), true)),
    release: (k, o) => held.get(k) === o && held.delete(k),
    extend: (k, o) => held.get(k) === o,
    isLocked: (k) => held.has(k),
    remainingTime: (k) => (held.has(k) ? 1_000 : null),
  })
  const l = lock('k')
  assert.equal(await l.acquire(), true)
  assert.equal(await lock('k').acquire(), false)
  assert.equal(await l.getRemainingTime(), 1_000)
  await l.extend()
  assert.equal(await l.isExpired(), false)
  assert.equal(await l.release(), true)
  assert.equal(await l.getRemainingTime(), null)
})

test('a JS store waits: acquire({ timeout }) retries until the holder releases', async () => {
  const store = setLockStore(new MapStore())
  const holder = lock('k', 10_000)
  await holder.acquire()
  setTimeout(() => holder.release(), 100)
  const started = Date.now()
  assert.equal(await lock('k').acquire({ timeout: 2_000, retryDelay: 20 }), true)
  assert.ok(Date.now() - started >= 95)
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
    setLockStore({ ...new MapStore(), acquire, release() {}, extend() {}, isLocked() {}, remainingTime() {} })
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
  const store = new MapStore()
  setLockStore(store)
  const l = lock('k', 1.5)
  await l.acquire()
  await l.extend(2_000.25)
  await l.release()
  assert.deepEqual(
    store.calls.filter(([m]) => m === 'acquire' || m === 'extend').map((c) => c[3]),
    [2, 2_001],
  )
  assert.equal(l.ttlMs, 1.5, 'the lock keeps the TTL it was given')
})

test('a JS store method resolving the wrong type is a TypeError naming the method', async () => {
  const base = new MapStore()
  const methods = (overrides) => ({
    acquire: (...a) => base.acquire(...a),
    release: (...a) => base.release(...a),
    extend: (...a) => base.extend(...a),
    isLocked: (...a) => base.isLocked(...a),
    remainingTime: (...a) => base.remainingTime(...a),
    ...overrides,
  })
  setLockStore(methods({ acquire: async () => 'OK' }))
  await assert.rejects(lock('k').acquire(), (e) => e instanceof TypeError && e.message.includes('acquire') && e.message.includes('string'))
  setLockStore(methods({ remainingTime: async () => '5' }))
  await assert.rejects(lock('k').getRemainingTime(), (e) => e instanceof TypeError && e.message.includes('remainingTime'))
  setLockStore(methods({ isLocked: () => 1 }))
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

test('restoreLock() uses the current store', async () => {
  const store = setLockStore(new MapStore())
  const owner = crypto.randomUUID()
  await store.acquire('k', owner, 10_000)
  const l = restoreLock(JSON.stringify({ key: 'k', ttlMs: 10_000, owner }))
  assert.equal(l.store, store)
  assert.equal(await l.release(), true)
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
  const store = {
    acquire: (k, o, t) => ({ then: (res, rej) => inner.acquire(k, o, t).then(res, rej) }),
    release: (k, o) => inner.release(k, o),
    extend: () => thenable(true),
    isLocked: (k) => inner.isLocked(k),
    remainingTime: () => thenable(null),
  }
  setLockStore(store)
  const l = lock('k')
  assert.equal(await l.acquire(), true)
  await l.extend()
  assert.equal(await l.getRemainingTime(), null)
  store.remainingTime = () => 7 // swapped after setLockStore
  assert.equal(await l.getRemainingTime(), 7)
  assert.equal(await l.release(), true)
})

/** A synchronous store over a Map that records each call and the thread it came in on. */
function syncStore() {
  const held = new Map()
  const calls = []
  return {
    held,
    calls,
    acquire(k, o) {
      calls.push(['acquire', k, o])
      return held.has(k) ? false : (held.set(k, o), true)
    },
    release(k, o) {
      calls.push(['release', k, o])
      return held.get(k) === o && held.delete(k)
    },
    extend(k, o) {
      calls.push(['extend', k, o])
      return held.get(k) === o
    },
    isLocked(k) {
      calls.push(['isLocked', k])
      return held.has(k)
    },
    remainingTime(k) {
      calls.push(['remainingTime', k])
      return held.has(k) ? 1_000 : null
    },
  }
}

test('an operation that starts on the JS thread calls the JS store directly, before returning', async () => {
  const store = setLockStore(syncStore())
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
  const store = setLockStore(syncStore())
  const holder = lock('k', 10_000)
  await holder.acquire()
  setTimeout(() => holder.release(), 80)
  assert.equal(await lock('k').acquire({ timeout: 2_000, retryDelay: 10 }), true)
  assert.ok(store.calls.filter((c) => c[0] === 'acquire').length >= 3, 'it retried')
})

test('every store method is called with the store as `this`, directly and from a retry', async () => {
  const calls = []
  const store = syncStore()
  for (const m of ['acquire', 'release', 'extend', 'isLocked', 'remainingTime']) {
    const original = store[m]
    store[m] = function (...args) {
      calls.push([m, this === store])
      return original(...args)
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
    ['throws after taking it', (store) => (k, o) => (store.held.set(k, o), (() => { throw boom })()), (e) => e === boom],
    ['rejects after taking it', (store) => async (k, o) => (store.held.set(k, o), Promise.reject(boom)), (e) => e === boom],
    ['resolves "OK" after taking it', (store) => async (k, o) => (store.held.set(k, o), 'OK'), (e) => e instanceof TypeError],
  ]
  for (const [what, acquire, expected] of cases) {
    const store = syncStore()
    store.acquire = acquire(store)
    setLockStore(store)
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
    setLockStore({ ...syncStore(), remainingTime })
    await assert.rejects(lock('k').getRemainingTime(), (e) => e instanceof TypeError && /LockStore\.remainingTime\(\) must return a number or null/.test(e.message))
  }
})
