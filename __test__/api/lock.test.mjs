// The documented semantics of lock(), run(), acquire(), release(), extend() and
// the inspection methods, on the default in-memory store.
import { test, beforeEach } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { lock, setLockStore, MemoryLockStore, LockNotHeldError, Lock } from '@shaferllc/keel/core'

beforeEach(() => setLockStore(new MemoryLockStore()))

test('run() acquires, runs, releases and returns [true, result]', async () => {
  let inside
  const [ran, result] = await lock('invoice:42').run(async () => {
    inside = await lock('invoice:42').isLocked()
    return 'charged'
  })
  assert.equal(ran, true)
  assert.equal(result, 'charged')
  assert.equal(inside, true)
  assert.equal(await lock('invoice:42').isLocked(), false)
})

test('run() accepts a plain (non-async) callback', async () => {
  assert.deepEqual(await lock('k').run(() => 42), [true, 42])
})

test('run() never calls fn when the lock is taken, and returns [false, undefined]', async () => {
  const holder = lock('invoice:42')
  assert.equal(await holder.acquire(), true)
  let called = false
  const outcome = await lock('invoice:42').run(() => {
    called = true
  })
  assert.deepEqual(outcome, [false, undefined])
  assert.equal(called, false)
  assert.equal(await holder.release(), true)
})

test('concurrent run() calls on one key: exactly one runs', async () => {
  let charges = 0
  const outcomes = await Promise.all(
    Array.from({ length: 20 }, () =>
      lock('invoice:42').run(async () => {
        charges++
        await sleep(20)
      }),
    ),
  )
  assert.equal(charges, 1)
  assert.equal(outcomes.filter(([ran]) => ran).length, 1)
})

test('run() passes the callback a lock for its acquisition, so extend() works from inside', async () => {
  const l = lock('import', 60_000)
  const [ran] = await l.run(async (held) => {
    assert.ok(held instanceof Lock)
    assert.equal(held.key, l.key)
    assert.equal(held.ttlMs, l.ttlMs)
    assert.equal(held.store, l.store)
    assert.equal(held.serialize(), l.serialize(), 'the same acquisition as the handle that took it')
    await held.extend()
    await held.extend(120_000)
    const left = await held.getRemainingTime()
    assert.ok(left > 60_000 && left <= 120_000, `remaining ${left}`)
  })
  assert.equal(ran, true)
})

test('a throwing callback propagates its own error object, after release', async () => {
  const boom = new Error('card declined')
  await assert.rejects(
    lock('invoice:42').run(() => {
      throw boom
    }),
    (e) => e === boom,
  )
  assert.equal(await lock('invoice:42').isLocked(), false)
})

test('a rejecting callback propagates its own rejection value, after release', async () => {
  const reason = { code: 'E_DECLINED' }
  await assert.rejects(
    lock('invoice:42').run(async () => {
      await sleep(1)
      throw reason
    }),
    (e) => e === reason,
  )
  assert.equal(await lock('invoice:42').isLocked(), false)
})

test('run() does not wait by default; with a timeout it waits for the holder', async () => {
  const holder = lock('report', 10_000)
  await holder.acquire()
  const started = Date.now()
  assert.deepEqual(await lock('report').run(() => 'x'), [false, undefined])
  assert.ok(Date.now() - started < 40)

  setTimeout(() => holder.release(), 80)
  const [ran, result] = await lock('report').run(() => 'rebuilt', { timeout: 2_000, retryDelay: 10 })
  assert.equal(ran, true)
  assert.equal(result, 'rebuilt')
  assert.ok(Date.now() - started >= 75)
})

test('a waiting acquire gives up at its timeout, not before and not much after', async () => {
  await lock('report', 10_000).acquire()
  const started = performance.now()
  assert.equal(await lock('report').acquire({ timeout: 150, retryDelay: 40 }), false)
  const waited = performance.now() - started
  assert.ok(waited >= 145, `gave up after ${waited} ms`)
  assert.ok(waited < 1_000, `gave up after ${waited} ms`)
})

test('a waiting acquire gets the lock once the holder expires', async () => {
  await lock('k', 60).acquire()
  const l = lock('k')
  assert.equal(await l.acquire({ timeout: 1_000, retryDelay: 5 }), true)
  assert.equal(await l.release(), true)
})

test('runImmediately() never waits', async () => {
  const holder = lock('k', 10_000)
  await holder.acquire()
  setTimeout(() => holder.release(), 20)
  assert.deepEqual(await lock('k').runImmediately(() => 1), [false, undefined])
  await sleep(40)
  assert.deepEqual(await lock('k').runImmediately(() => 1), [true, 1])
})

test('acquire() and acquireImmediately() return booleans', async () => {
  const a = lock('k')
  assert.equal(await a.acquireImmediately(), true)
  assert.equal(await lock('k').acquireImmediately(), false)
  assert.equal(await lock('k').acquire(), false)
  assert.equal(await lock('k').acquire({}), false)
  assert.equal(await a.release(), true)
})

test('release() reports whether this owner released it', async () => {
  const a = lock('k')
  assert.equal(await a.release(), false, 'never acquired')
  await a.acquire()
  assert.equal(await a.release(), true)
  assert.equal(await a.release(), false, 'already released')
})

test('two concurrent release() calls on one handle release once', async () => {
  const a = lock('k')
  await a.acquire()
  const results = await Promise.all([a.release(), a.release()])
  assert.deepEqual(results.sort(), [false, true])
})

test('extend() throws LockNotHeldError when never acquired, released, or lost', async () => {
  const never = lock('never')
  await assert.rejects(never.extend(), LockNotHeldError)

  const released = lock('released')
  await released.acquire()
  await released.release()
  await assert.rejects(released.extend(), LockNotHeldError)

  const lost = lock('lost', 30)
  await lost.acquire()
  await sleep(50)
  await assert.rejects(lost.extend(), (e) => e instanceof LockNotHeldError && e.key === 'lost')
  await assert.rejects(lost.extend(), LockNotHeldError, 'stays lost')
})

test('extend() with no argument pushes the expiry out by the lock TTL', async () => {
  const l = lock('k', 200)
  await l.acquire()
  await sleep(120)
  await l.extend()
  const left = await l.getRemainingTime()
  assert.ok(left > 150 && left <= 200, `remaining ${left}`)
  await sleep(120)
  assert.equal(await l.isLocked(), true, 'the extension kept it alive past the first TTL')
  assert.equal(await l.extend(), undefined)
})

test('the default TTL is 30 seconds', async () => {
  const l = lock('k')
  assert.equal(l.ttlMs, 30_000)
  await l.acquire()
  const left = await l.getRemainingTime()
  assert.ok(left > 29_000 && left <= 30_000, `remaining ${left}`)
})

test('a lock always expires: the TTL frees it without a release', async () => {
  const l = lock('nightly-report', 50)
  await l.acquire()
  assert.equal(await lock('nightly-report').acquire(), false)
  await sleep(70)
  assert.equal(await l.isLocked(), false)
  assert.equal(await lock('nightly-report').acquire(), true)
})

test('isLocked() is about anyone; isExpired() about us having held it and lost it', async () => {
  const a = lock('k', 40)
  const b = lock('k')
  assert.equal(await a.isLocked(), false)
  assert.equal(await a.isExpired(), false, 'never acquired is not expired')
  await a.acquire()
  assert.equal(await b.isLocked(), true, 'held, not by b')
  assert.equal(await b.isExpired(), false)
  assert.equal(await a.isExpired(), false)
  await sleep(60)
  assert.equal(await a.isExpired(), true)
})

test('isExpired() is true when another owner took the lock after ours expired', async () => {
  const a = lock('k', 30)
  await a.acquire()
  await sleep(50)
  const b = lock('k', 10_000)
  assert.equal(await b.acquire(), true)
  assert.equal(await a.isLocked(), true)
  assert.equal(await a.isExpired(), true)
  assert.equal(await b.isExpired(), false)
})

test('isExpired() after a successful release is false; after a failed extend it is true', async () => {
  const a = lock('k')
  await a.acquire()
  await a.release()
  assert.equal(await a.isExpired(), false)

  const c = lock('c', 20)
  await c.acquire()
  await sleep(40)
  await assert.rejects(c.extend(), LockNotHeldError)
  assert.equal(await c.isExpired(), true)
})

test('getRemainingTime() is milliseconds while held and null when free', async () => {
  const l = lock('k', 5_000)
  assert.equal(await l.getRemainingTime(), null)
  await l.acquire()
  const left = await l.getRemainingTime()
  assert.equal(typeof left, 'number')
  assert.ok(Number.isInteger(left) && left > 4_900 && left <= 5_000, `remaining ${left}`)
  await l.release()
  assert.equal(await l.getRemainingTime(), null)
})

test('the ownership scenario: a late release from an expired holder does not free the next holder', async () => {
  const a = lock('job', 40) // 1. A takes the lock
  assert.equal(await a.acquire(), true)
  await sleep(60) // 2. A's work outruns the TTL
  const b = lock('job', 10_000) // 3. B takes the now-free lock
  assert.equal(await b.acquire(), true)
  assert.equal(await a.release(), false) // 4. A's late release is a no-op
  assert.equal(await lock('job').acquire(), false, 'a third process must not walk in')
  await assert.rejects(a.extend(), LockNotHeldError)
  assert.equal(await b.release(), true)
})

test('a lock handle can be taken again after release, with a fresh owner', async () => {
  const l = lock('k')
  assert.equal(await l.acquire(), true)
  const first = JSON.parse(l.serialize()).owner
  assert.equal(await l.release(), true)
  assert.equal(await l.acquire(), true)
  const second = JSON.parse(l.serialize()).owner
  assert.notEqual(first, second)
  await l.release()
})

test('every method returns a real Promise', async () => {
  const l = lock('k')
  for (const call of [
    () => l.acquire(),
    () => l.isLocked(),
    () => l.isExpired(),
    () => l.getRemainingTime(),
    () => l.release(),
    () => l.acquireImmediately(),
    () => l.run(() => 1),
    () => l.runImmediately(() => 1),
  ]) {
    const p = call()
    assert.ok(p instanceof Promise)
    await p
  }
  const e = lock('x').extend()
  assert.ok(e instanceof Promise)
  await assert.rejects(e, LockNotHeldError)
})

test('a Lock is not constructed directly', () => {
  assert.throws(() => new Lock('k', 1000), TypeError)
})

test('key and ttlMs are readable on the handle', () => {
  const l = lock('nightly-report', 300_000)
  assert.equal(l.key, 'nightly-report')
  assert.equal(l.ttlMs, 300_000)
})

test('unusual keys: empty, NUL, emoji, 1 MB, and many distinct ones at once', async () => {
  for (const key of ['', 'a\u0000b', 'a\u0000c', '🔒 invoice 😀', 'x'.repeat(1 << 20)]) {
    const l = lock(key)
    assert.equal(await l.acquire(), true, `acquire ${JSON.stringify(key.slice(0, 20))}`)
    assert.equal(await lock(key).acquire(), false)
    assert.equal(await l.release(), true)
  }
  const locks = Array.from({ length: 10_000 }, (_, i) => lock(`order:${i}`))
  const got = await Promise.all(locks.map((l) => l.acquire()))
  assert.ok(got.every(Boolean))
  assert.ok((await Promise.all(locks.map((l) => l.release()))).every(Boolean))
})

test('a handle reused by two run() calls: the first call never releases the second one\'s lock', async () => {
  const l = lock('shared-handle', 30)
  const first = l.run(() => sleep(60)) // outlives its 30 ms TTL
  await sleep(5)
  let stillHeldWhileSecondRuns
  const second = l.run(
    async (held) => {
      await held.extend(5_000) // this holder's work is long; it keeps its lock alive
      await sleep(50) // the first call finishes and releases during this
      stillHeldWhileSecondRuns = !(await lock('shared-handle').acquire())
    },
    { timeout: 500, retryDelay: 5 },
  )
  const [[ran1], [ran2]] = await Promise.all([first, second])
  assert.deepEqual([ran1, ran2], [true, true])
  assert.equal(stillHeldWhileSecondRuns, true, 'the second holder kept its lock')
})

test('a sub-millisecond TTL still excludes (TTLs round up to whole milliseconds)', async () => {
  assert.equal(await lock('tiny', 1e-7).acquire(), true)
  // The hold lasts 1 ms: asked for back to back, the second is refused. A machine slow enough
  // (an emulator, a busy core) to let that millisecond pass between the two calls tries again.
  const store = setLockStore(new MemoryLockStore())
  for (let attempt = 0; attempt < 50; attempt++) {
    const key = `tiny-${attempt}`
    const started = performance.now()
    const first = store.acquire(key, 'a', 1e-7)
    const second = store.acquire(key, 'b', 1e-7)
    const gap = performance.now() - started
    const [a, b] = await Promise.all([first, second])
    assert.equal(a, true)
    if (gap < 0.5) return assert.equal(b, false, `refused ${gap.toFixed(3)} ms into a 1 ms hold`)
  }
  assert.fail('never two calls within half a millisecond in 50 tries')
})

test('a TTL far beyond any clock is honoured, not clamped', async () => {
  const l = lock('forever-ish', Number.MAX_SAFE_INTEGER)
  await l.acquire()
  // The clock moves between acquire and the question (a millisecond or two under load), so the
  // answer is the TTL less that, never a clamped value far below it.
  const remaining = await l.getRemainingTime()
  assert.ok(remaining <= Number.MAX_SAFE_INTEGER, `remaining ${remaining}`)
  assert.ok(remaining > Number.MAX_SAFE_INTEGER - 60_000, `remaining ${remaining}`)
  await l.release()
})
