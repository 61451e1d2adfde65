// Under fake timers installed globally (@sinonjs/fake-timers, what
// vi.useFakeTimers() and jest.useFakeTimers() use), a lock's own time stays
// real: the store counts the TTL in real time, so autoExtend's renewals and
// the lapse that aborts a hold's signal run on the real clock, whether the
// fake one stands still or races ahead. Waiting still follows the fake clock.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as realSetTimeout } from 'node:timers'
import FakeTimers from '@sinonjs/fake-timers'
import { lock, setLockStore, MemoryLockStore, RedisLockStore } from '@shaferllc/keel/core'
import { startRedis, uniqueKey } from '../../support/servers.mjs'

// The real clock, taken before any test fakes it.
const realSleep = (ms) => new Promise((resolve) => realSetTimeout(resolve, ms))

let redis
before(async () => {
  redis = await startRedis()
})
after(() => redis?.close())

/**
 * Fake every clock, as vi.useFakeTimers() does, until the test ends: timers,
 * Date, hrtime and performance, the global functions and node:timers' (all
 * but the microtask queue and nextTick, which node:test itself needs).
 */
const fakeClocks = (t) => {
  const toFake = ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'setImmediate', 'clearImmediate', 'Date', 'hrtime', 'performance']
  const clock = FakeTimers.install({ toFake })
  t.after(() => clock.uninstall())
  assert.notEqual(globalThis.setTimeout, realSetTimeout, 'the global setTimeout is faked')
  return clock
}

const stores = {
  MemoryLockStore: () => new MemoryLockStore(),
  RedisLockStore: () => new RedisLockStore({ url: redis.url }),
}

for (const [name, open] of Object.entries(stores)) {
  // A TTL of 1 s, renewed every third of it: a renewal may land 600 ms late (an event loop held
  // up by a busy machine) and the hold still stands; the real time spans two and a half TTLs.
  test(`${name}: a 1 s autoExtend lock stays held across 2.5 s of real time while the fake clock stands still`, async (t) => {
    const store = setLockStore(open())
    t.after(() => store.close?.())
    const key = uniqueKey('renewed')
    // Connected first: a hold is timed from before its acquire, so a first
    // connect on a loaded machine would eat into the TTL.
    await store.isLocked(key)
    fakeClocks(t)
    const l = lock(key, 1_000)
    assert.equal(await l.acquire({ autoExtend: true }), true)
    const { signal } = l
    await realSleep(2_500)
    assert.equal(signal.aborted, false, 'the hold was not found lapsed')
    assert.equal(await l.isExpired(), false)
    assert.equal(await lock(key).acquireImmediately(), false, 'nobody else could take it')
    assert.equal(await l.release(), true)
  })

  test(`${name}: run(fn, { autoExtend }) keeps a 1 s lock through 2.5 s of real work under fake timers`, async (t) => {
    const store = setLockStore(open())
    t.after(() => store.close?.())
    const key = uniqueKey('run')
    await store.isLocked(key)
    fakeClocks(t)
    const [ran, stillMine] = await lock(key, 1_000).run(
      async (held) => {
        await realSleep(2_500)
        return !held.signal.aborted && !(await held.isExpired())
      },
      { autoExtend: true },
    )
    assert.equal(ran, true)
    assert.equal(stillMine, true)
  })
}

test('the fake clock racing ahead neither lapses an autoExtend hold nor aborts its signal', async (t) => {
  // (On a server store, whose holds this process times itself.)
  const store = setLockStore(new RedisLockStore({ url: redis.url }))
  t.after(() => store.close())
  const clock = fakeClocks(t)
  const l = lock(uniqueKey('raced'), 300)
  assert.equal(await l.acquire({ autoExtend: true }), true)
  const { signal } = l
  await clock.tickAsync(60_000)
  await realSleep(150)
  assert.equal(signal.aborted, false)
  assert.equal(await l.isExpired(), false)
  await l.release()
})

test('a hold whose TTL passes in real time still aborts its signal under a fake clock that stands still', async (t) => {
  setLockStore(new MemoryLockStore())
  fakeClocks(t)
  const l = lock('lapses', 100)
  assert.equal(await l.acquire(), true)
  const { signal } = l
  await realSleep(300)
  assert.equal(signal.aborted, true, 'the lapse is seen on the real clock')
  assert.equal(await l.isExpired(), true)
})

test('waiting still follows the fake clock: a waiter gives up when the fake clock passes its timeout', async (t) => {
  const store = setLockStore(new RedisLockStore({ url: redis.url }))
  t.after(() => store.close())
  const key = uniqueKey('busy')
  await store.acquire(key, 'someone else', 60_000)
  const clock = fakeClocks(t)
  let settled = false
  const waiting = lock(key)
    .acquire({ timeout: 5_000, retryDelay: 1_000 })
    .finally(() => (settled = true))
  await realSleep(100)
  await clock.tickAsync(4_000)
  assert.equal(settled, false)
  await clock.tickAsync(1_000)
  await realSleep(50)
  assert.equal(settled, true)
  assert.equal(await waiting, false)
})
