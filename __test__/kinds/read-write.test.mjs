// readLock(key) and writeLock(key): many readers at once while no writer
// holds the key, one writer alone; a waiting writer holds back new readers.
// On MemoryLockStore (natively) and on stores written in JS that opt into
// the eight read-write methods (LockStore), answering plain values or promises.
import { test, describe } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { readLock, writeLock, lock, semaphore, restoreLock, setLockStore, LockNotHeldError } from '@shaferllc/keel/core'
import { onStores } from './on-stores.mjs'
import { MapLockStore, MapReadWriteStore, AsyncMapReadWriteStore } from '../helpers/js-stores.mjs'

onStores(
  [
    ['a JS store with the read-write methods, answering plain values', () => new MapReadWriteStore()],
    ['a JS store with the read-write methods, answering promises', () => new AsyncMapReadWriteStore()],
  ],
  everyStore,
  memoryOnly,
)

function everyStore() {
  test('readers overlap; a writer never overlaps a reader or another writer', async () => {
    let readers = 0
    let writers = 0
    let mostReaders = 0
    const clashes = []
    const section = async (/** @type {boolean} */ writing) => {
      if (writing) writers++
      else readers++
      if (writers > 1 || (writers === 1 && readers > 0)) clashes.push({ readers, writers })
      mostReaders = Math.max(mostReaders, readers)
      await sleep(5)
      if (writing) writers--
      else readers--
    }
    const work = Array.from({ length: 40 }, (_, i) => {
      const writing = i % 5 === 0
      const handle = writing ? writeLock('price-list') : readLock('price-list')
      return handle.run(() => section(writing), { timeout: 10_000, retryDelay: 5 })
    })
    const outcomes = await Promise.all(work)
    assert.ok(outcomes.every(([ran]) => ran), 'everyone got in')
    assert.deepEqual(clashes, [])
    assert.ok(mostReaders > 1, `readers overlapped (at most ${mostReaders} at once)`)
  })

  test('a waiting writer holds back new readers, and gets in within its timeout against a stream of readers', async () => {
    let stop = false
    let readsDone = 0
    // Readers that keep coming, each overlapping the next.
    const streams = Array.from({ length: 4 }, async () => {
      while (!stop) {
        await readLock('rw').run(() => sleep(10), { timeout: 5_000, retryDelay: 5 })
        readsDone++
      }
    })
    await sleep(30)
    const [ran] = await writeLock('rw').run(
      async () => {
        assert.equal(await writeLock('rw').holders(), 1, 'the writer alone')
      },
      { timeout: 2_000 },
    )
    stop = true
    await Promise.all(streams)
    assert.equal(ran, true)
    assert.ok(readsDone > 4, `${readsDone} reads`)
  })

  test('isLocked(): on a read handle, whether a reader must wait; on a write handle, whether anyone holds the key', async () => {
    const reader = readLock('k')
    await reader.acquire()
    assert.equal(await readLock('k').isLocked(), false)
    assert.equal(await writeLock('k').isLocked(), true)
    assert.equal(await readLock('k').holders(), 1)
    const writer = writeLock('k')
    const waiting = writer.acquire({ timeout: 5_000, retryDelay: 60_000 })
    await sleep(10)
    assert.equal(await readLock('k').isLocked(), true, 'a writer waits: readers would wait too')
    assert.equal(await readLock('k').acquireImmediately(), false)
    await reader.release()
    assert.equal(await waiting, true, 'the release woke the writer at once')
    assert.equal(await writeLock('k').holders(), 1)
    assert.equal(await readLock('k').isLocked(), true)
    await writer.release()
    assert.equal(await writeLock('k').isLocked(), false)
  })

  test('a writer that gives up waiting holds no reader back', async () => {
    const reader = readLock('k')
    await reader.acquire()
    assert.equal(await writeLock('k', 60_000).acquire({ timeout: 50 }), false)
    assert.equal(await readLock('k').acquireImmediately(), true)
    await reader.release()
  })

  test('a writer asking once (timeout 0) and refused holds no reader back', async () => {
    const reader = readLock('k')
    await reader.acquire()
    assert.equal(await writeLock('k').acquireImmediately(), false)
    assert.equal(await readLock('k').acquireImmediately(), true)
  })

  test('lock(k), semaphore(k, n) and readLock(k)/writeLock(k) never see each other', async () => {
    await lock('k').acquire()
    await semaphore('k', 1).acquire()
    assert.equal(await writeLock('k').acquireImmediately(), true)
    assert.equal(await lock('k').holders(), 1)
  })

  test('serialize() carries the mode; restoreLock() rebuilds a read or write hold', async () => {
    const reader = readLock('k', 5_000)
    await reader.acquire()
    const text = reader.serialize()
    assert.equal(JSON.parse(text).kind, 'read')
    const restored = restoreLock(text)
    await restored.extend()
    assert.equal(await restored.release(), true)
    const writer = writeLock('k', 5_000)
    assert.equal(writer.serialize(), '{"key":"k","ttlMs":5000,"kind":"write"}')
    await writer.acquire()
    assert.equal(await restoreLock(writer.serialize()).release(), true)
    assert.equal(await writeLock('k').isLocked(), false)
  })

  test('autoExtend keeps a write hold past its TTL; signal aborts when a read hold is lost; asyncDispose gives it back', async () => {
    const writer = writeLock('kept', 150)
    const [ran] = await writer.run(
      async (held) => {
        await sleep(400)
        assert.equal(held.signal.aborted, false)
        assert.equal(await held.isExpired(), false)
        assert.equal(await writeLock('kept').holders(), 1)
      },
      { autoExtend: true },
    )
    assert.equal(ran, true)
    assert.equal(await writeLock('kept').isLocked(), false)
    const reader = readLock('lost', 100)
    await reader.acquire()
    const { signal } = reader
    await sleep(300)
    assert.equal(await reader.isExpired(), true)
    assert.ok(signal.aborted)
    await assert.rejects(reader.extend(), LockNotHeldError)
    const disposed = readLock('disposed')
    await disposed.acquire()
    await disposed[Symbol.asyncDispose]()
    assert.equal(await readLock('disposed').holders(), 0)
  })
}

function memoryOnly() {
  test('writeLock holds carry fencing tokens that grow', async () => {
    const first = writeLock('k')
    await first.acquire()
    const a = /** @type {number} */ (first.fencingToken)
    await first.release()
    const second = writeLock('k')
    await second.acquire()
    assert.ok(/** @type {number} */ (second.fencingToken) > a)
    await second.release()
  })

}

test('bad arguments name themselves', () => {
  assert.throws(() => readLock(/** @type {any} */ (null)), (e) => e instanceof TypeError && /readLock: key/.test(e.message))
  assert.throws(() => writeLock('k', -1), (e) => e instanceof RangeError && /writeLock: ttlMs/.test(e.message))
})

describe('on stores written in JS', () => {
  test('a store without the read-write methods says which it lacks', async () => {
    setLockStore(new MapLockStore())
    const lacks = /MapLockStore does not support read-write locks: it has no acquireRead, acquireWrite, releaseHold, extendHold, holdRemaining, holders, readersWait, withdrawWriter/
    await assert.rejects(writeLock('k').acquire(), (e) => e instanceof TypeError && lacks.test(e.message))
    await assert.rejects(readLock('k').run(() => assert.fail('must not run')), TypeError)
    const partial = new MapReadWriteStore()
    Object.assign(partial, { holders: undefined, withdrawWriter: 'no' })
    setLockStore(partial)
    await assert.rejects(readLock('k').acquire(), (e) => e instanceof TypeError && /it has no holders, withdrawWriter \(/.test(e.message))
    setLockStore({ ...new MapLockStore(), acquire: () => true, release: () => true, extend: () => true, isLocked: () => false, remainingTime: () => null })
    await assert.rejects(readLock('k').acquire(), (e) => e instanceof TypeError && /^This LockStore does not support read-write locks/.test(e.message))
  })

  test('a wrong answer is a TypeError naming the method; a throw is a rejection, and the token and mark go back', async () => {
    const store = setLockStore(new MapReadWriteStore())
    store.acquireRead = () => 'OK'
    await assert.rejects(readLock('k').acquire(), (e) => e instanceof TypeError && /LockStore\.acquireRead\(\) must return a boolean/.test(e.message))
    store.holders = () => -1
    await assert.rejects(writeLock('k').holders(), (e) => e instanceof TypeError && /LockStore\.holders\(\) must return a non-negative integer/.test(e.message))
    await assert.rejects(writeLock('k').isLocked(), /LockStore\.holders\(\)/)
    const boom = new Error('connection lost')
    store.acquireWrite = async () => {
      throw boom
    }
    store.calls.length = 0
    await assert.rejects(writeLock('k').acquire(), (e) => e === boom)
    await sleep(10)
    const gaveBack = store.calls.filter(([m]) => m === 'releaseHold')
    assert.equal(gaveBack.length, 1, 'the failed acquire gave its token back')
    assert.equal(store.calls.filter(([m]) => m === 'withdrawWriter').length, 1, 'and the mark it may have left')
  })

  test('a withdrawWriter that never answers holds no writer past its timeout', async () => {
    const store = setLockStore(new MapReadWriteStore())
    store.withdrawWriter = () => new Promise(() => {})
    const reader = readLock('k')
    await reader.acquire()
    let started = performance.now()
    assert.equal(await writeLock('k').acquire({ timeout: 200, retryDelay: 20 }), false)
    const gaveUp = performance.now() - started
    assert.ok(gaveUp < 1_000, `gave up after ${gaveUp} ms`)
    started = performance.now()
    assert.equal(await writeLock('k').acquireImmediately(), false)
    const refused = performance.now() - started
    assert.ok(refused < 1_000, `answered after ${refused} ms`)
  })

  test('the store gets exactly its arguments, TTLs in whole ms rounded up', async () => {
    const store = setLockStore(new MapReadWriteStore())
    const reader = readLock('k', 1_000.5)
    await reader.acquire()
    await reader.extend(2_000.2)
    await reader.getRemainingTime()
    await reader.release()
    const [acquired, extended, remaining, released] = store.calls
    assert.equal(acquired[0], 'acquireRead')
    assert.equal(acquired[3], 1_001)
    assert.equal(acquired.length, 4)
    assert.deepEqual(extended, ['extendHold', 'k', acquired[2], 2_001])
    assert.deepEqual(remaining, ['holdRemaining', 'k', acquired[2]])
    assert.deepEqual(released, ['releaseHold', 'k', acquired[2]])
  })
})
