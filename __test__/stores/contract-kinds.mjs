// The store contract's section for semaphores and read-write locks (see
// contract.mjs, which registers it in every store's suite). What differs by
// store is in the capabilities:
//   semaphores   'native': permits counted by the store (each caller admitted
//                while fewer than its own limit are held); 'slots': permit
//                slots, each a plain lock (stores written in JS)
//   readWrite    the store keeps read-write locks (natively, or a JS store
//                through the eight methods it opts into); else using one
//                rejects with a TypeError that says the store does not support them
//   fencing, processes, announcesReleases, lapsesLate   as in contract.mjs (fencing: write holds have tokens)

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { semaphore, readLock, writeLock, lock, restoreLock, LockNotHeldError } from '@shaferllc/keel/core'
import { uniqueKey } from '../../support/servers.mjs'
import { runChild, startHolder, killHard } from '../helpers/processes.mjs'

/** Processes in the cross-process checks, and how long each runs its sections. */
const PROCESSES = 4
const CROWD_MS = 1_500

/**
 * @param {() => { opened: any, dir: string }} current the suite's opened store and scratch folder
 * @param {{ semaphores: 'native' | 'slots', readWrite: boolean, fencing: boolean, processes: boolean, announcesReleases: boolean, lapsesLate: number }} caps
 */
export function kindsContract(current, { semaphores, readWrite, fencing, processes, announcesReleases, lapsesLate }) {
  test('semaphore: admits up to its limit, counts its holders, frees one permit per release', async () => {
    const key = uniqueKey('exports')
    const permits = [semaphore(key, 2), semaphore(key, 2)]
    for (const p of permits) assert.equal(await p.acquire(), true)
    assert.equal(await semaphore(key, 2).acquireImmediately(), false)
    assert.equal(await semaphore(key, 2).isLocked(), true)
    assert.equal(await semaphore(key, 2).holders(), 2)
    assert.equal(await lock(key).isLocked(), false, "a semaphore never touches the plain lock's data")
    assert.equal(await permits[0].release(), true)
    assert.equal(await permits[0].release(), false)
    assert.equal(await semaphore(key, 2).holders(), 1)
    await permits[1].extend(20_000)
    const left = await permits[1].getRemainingTime()
    assert.ok(left !== null && left > 10_000 && left <= 20_000, String(left))
    assert.equal(await permits[1].isExpired(), false)
    assert.equal(await permits[1].release(), true)
    assert.equal(await semaphore(key, 2).holders(), 0)
  })

  test('semaphore: a permit lapses at its own TTL while the others are kept', async () => {
    const key = uniqueKey('lapsing')
    const short = semaphore(key, 2, 200)
    const long = semaphore(key, 2, 30_000)
    await short.acquire()
    await long.acquire()
    await sleep(400)
    assert.equal(await semaphore(key, 2).holders(), 1)
    await assert.rejects(short.extend(), LockNotHeldError)
    assert.equal(await long.isExpired(), false)
    assert.equal(await semaphore(key, 2).acquireImmediately(), true)
  })

  test(
    semaphores === 'native'
      ? 'semaphore: callers with different limits are each admitted while fewer than their own limit are held'
      : 'semaphore: a caller with limit n takes one of the first n permit slots',
    async () => {
      const key = uniqueKey('mixed')
      await semaphore(key, 2).acquire()
      await semaphore(key, 2).acquire()
      assert.equal(await semaphore(key, 3).acquireImmediately(), true)
      assert.equal(await semaphore(key, 3).acquireImmediately(), false)
      assert.equal(await semaphore(key, 2).acquireImmediately(), false)
      assert.equal(await semaphore(key, 4).holders(), 3)
    },
  )

  if (readWrite) {
    test('read-write: readers share, a writer is alone, a waiting writer holds new readers back', async () => {
      const key = uniqueKey('price-list')
      const readers = [readLock(key), readLock(key)]
      for (const r of readers) assert.equal(await r.acquire(), true)
      assert.equal(await writeLock(key).holders(), 2)
      assert.equal(await writeLock(key).isLocked(), true)
      const writer = writeLock(key)
      const waiting = writer.acquire({ timeout: 10_000, retryDelay: 60_000 })
      await sleep(50)
      assert.equal(await readLock(key).isLocked(), true, 'a writer waits')
      assert.equal(await readLock(key).acquireImmediately(), false)
      for (const r of readers) assert.equal(await r.release(), true)
      assert.equal(await waiting, true, 'the last release woke the writer')
      assert.equal(await writeLock(key).holders(), 1)
      assert.equal(await writeLock(key).acquireImmediately(), false)
      assert.equal(await readLock(key).acquireImmediately(), false)
      assert.equal(await lock(key).isLocked(), false, "read-write holds never touch the plain lock's data")
      assert.equal(await semaphore(key, 1).holders(), 0)
      assert.equal(typeof writer.fencingToken, fencing ? 'number' : 'object')
      await writer.extend(20_000)
      assert.equal(await writer.release(), true)
      assert.equal(await readLock(key).acquireImmediately(), true)
    })

    test('read-write: readers and writers started at once in one process all get in, writers alone', async () => {
      const key = uniqueKey('started-together')
      const inside = { readers: 0, writers: 0 }
      const clashes = []
      // Their first attempts cross: writers refused by readers mark the key
      // while readers that asked first wait in the queue ahead of them.
      const outcomes = await Promise.all(
        Array.from({ length: 20 }, (_, i) => {
          const writing = i % 5 === 1
          return (writing ? writeLock(key) : readLock(key)).run(
            async () => {
              inside[writing ? 'writers' : 'readers']++
              if (inside.writers > 1 || (inside.writers === 1 && inside.readers > 0)) clashes.push({ ...inside })
              await sleep(5)
              inside[writing ? 'writers' : 'readers']--
            },
            { timeout: 10_000, retryDelay: 50 },
          )
        }),
      )
      assert.deepEqual(outcomes.map(([ran]) => ran), Array(20).fill(true))
      assert.deepEqual(clashes, [])
    })

    test('read-write: a writer that gives up waiting holds no reader back', async () => {
      const key = uniqueKey('gave-up')
      const reader = readLock(key)
      await reader.acquire()
      assert.equal(await writeLock(key, 30_000).acquire({ timeout: 100 }), false)
      assert.equal(await readLock(key).acquireImmediately(), true)
      await reader.release()
    })

    test('read-write: serialize() carries the mode; a restored write hold extends and releases', async () => {
      const key = uniqueKey('restored')
      const writer = writeLock(key, 5_000)
      await writer.acquire()
      const restored = restoreLock(writer.serialize())
      await restored.extend(20_000)
      const left = await restored.getRemainingTime()
      assert.ok(left !== null && left > 10_000, String(left))
      assert.equal(await restored.release(), true)
      assert.equal(await writeLock(key).isLocked(), false)
    })
  } else {
    test('read-write: a store without them says so when one is used', async () => {
      const says = /does not support read-write locks: it has no acquireRead, acquireWrite, releaseHold, extendHold, holdRemaining, holders, readersWait, withdrawWriter/
      await assert.rejects(readLock(uniqueKey('rw')).acquire(), (e) => e instanceof TypeError && says.test(e.message))
      await assert.rejects(writeLock(uniqueKey('rw')).run(() => assert.fail('must not run')), TypeError)
    })
  }

  if (!processes) return

  /** A fresh folder for the marker files of one crowd. */
  const markers = () => mkdtempSync(join(current().dir, 'inside-'))

  test(`semaphore across ${PROCESSES} processes: never more holders than the limit, and the limit reached`, async () => {
    const key = uniqueKey('crowd')
    const dir = markers()
    const results = await Promise.all(
      Array.from({ length: PROCESSES }, () => runChild(current().opened.env, 'crowd', dir, String(CROWD_MS), key, 'semaphore:3', String(PROCESSES))),
    )
    assert.deepEqual(results.map((r) => r.timeouts), Array(PROCESSES).fill(0))
    const most = Math.max(...results.map((r) => r.most))
    assert.equal(most, 3, `at most ${most} inside at once`)
    assert.ok(results.every((r) => r.sections > 0))
    assert.equal(await semaphore(key, 3).holders(), 0, 'every permit given back')
  })

  test('semaphore: a SIGKILLed holder frees its permit at its TTL, not before', async () => {
    const key = uniqueKey('killed-permit')
    const ttl = 1_200
    const { child, result } = await startHolder(current().opened.env, 'hold', key, String(ttl), 'semaphore:1')
    await killHard(child)
    const permit = semaphore(key, 1, 5_000)
    assert.equal(await permit.acquireImmediately(), false, 'held right after the kill')
    assert.ok(await permit.acquire({ timeout: 10_000, retryDelay: 20 }), 'free once the TTL passed')
    const freedAfter = Date.now() - result.at
    assert.ok(freedAfter >= ttl - 50, `freed after ${freedAfter} ms, before the ${ttl} ms TTL`)
    assert.ok(freedAfter < ttl + 2_000 + lapsesLate, `freed only after ${freedAfter} ms`)
    assert.equal(await permit.release(), true)
  })

  test('semaphore: serialize() in one process, restoreLock() + extend() + release() in another', async () => {
    const key = uniqueKey('permit-moved')
    const { serialized } = await runChild(current().opened.env, 'take', key, '5000', 'semaphore:1')
    assert.equal(JSON.parse(serialized).kind, 'semaphore')
    assert.equal(await semaphore(key, 1).acquireImmediately(), false)
    const { remaining, released, lockedAfter } = await runChild(current().opened.env, 'restore', serialized, '60000')
    assert.ok(remaining > 5_000 && remaining <= 60_000, `extended (remaining ${remaining})`)
    assert.equal(released, true)
    assert.equal(lockedAfter, false)
  })

  if (announcesReleases) {
    test('semaphore: a permit released in another process wakes a waiter here at once', async () => {
      const key = uniqueKey('permit-announced')
      const { serialized } = await runChild(current().opened.env, 'take', key, '30000', 'semaphore:1')
      const waiting = semaphore(key, 1).acquire({ timeout: 20_000, retryDelay: 60_000 })
      await sleep(500)
      const released = Date.now()
      assert.equal((await runChild(current().opened.env, 'release', serialized)).released, true)
      assert.equal(await waiting, true)
      const took = Date.now() - released
      assert.ok(took < 5_000, `woken ${took} ms after the release; the poll alone would take 60000`)
    })
  }

  if (!readWrite) return

  test(`read-write across ${PROCESSES} processes: readers overlap, a writer never overlaps anyone`, async () => {
    const key = uniqueKey('rw-crowd')
    const dir = markers()
    const roles = ['read', 'read', 'read', 'write', 'write']
    const results = await Promise.all(roles.map((role) => runChild(current().opened.env, 'crowd', dir, String(CROWD_MS), key, role, String(roles.length))))
    const seen = JSON.stringify(results.map((r, i) => ({ role: roles[i], ...r })))
    assert.deepEqual(results.map((r) => r.overlaps), Array(roles.length).fill(0), seen)
    assert.deepEqual(results.map((r) => r.timeouts), Array(roles.length).fill(0), seen)
    const readers = results.filter((_, i) => roles[i] === 'read')
    assert.ok(Math.max(...readers.map((r) => r.most)) > 1, `readers in different processes were inside together: ${seen}`)
    assert.ok(results.every((r) => r.sections > 0), `writers got in too: ${seen}`)
  })

  test('read-write: a writer gets in within its timeout against readers streaming from 3 processes', async () => {
    const key = uniqueKey('rw-stream')
    const dir = markers()
    const streams = Array.from({ length: 3 }, () => runChild(current().opened.env, 'crowd', dir, '3000', key, 'read'))
    await sleep(1_000) // the readers are streaming, overlapping each other
    const started = Date.now()
    const [ran] = await writeLock(key).run(async () => assert.equal(await writeLock(key).holders(), 1), { timeout: 1_500 })
    assert.equal(ran, true, `the writer waited ${Date.now() - started} ms and gave up`)
    const results = await Promise.all(streams)
    assert.ok(results.every((r) => r.sections > 0 && r.overlaps === 0))
  })

  test('read-write: a writer killed while waiting holds readers back for no longer than its TTL', async () => {
    const key = uniqueKey('writer-died')
    const reader = readLock(key)
    await reader.acquire()
    const ttl = 1_200
    const { child, result } = await startHolder(current().opened.env, 'wait', key, String(ttl), 'write')
    await killHard(child)
    assert.equal(await readLock(key).acquireImmediately(), false, 'its mark outlives it for a while')
    assert.ok(await readLock(key).acquire({ timeout: 10_000, retryDelay: 20 }), 'readers get in once its TTL passed')
    const after = Date.now() - result.at
    assert.ok(after < ttl + 2_000 + lapsesLate, `readers waited ${after} ms after its last attempt`)
    await reader.release()
  })

  test('read-write: serialize() a write hold in one process, restore + extend + release in another', async () => {
    const key = uniqueKey('write-moved')
    const { serialized } = await runChild(current().opened.env, 'take', key, '5000', 'write')
    assert.equal(await readLock(key).acquireImmediately(), false)
    const { remaining, released } = await runChild(current().opened.env, 'restore', serialized, '60000')
    assert.ok(remaining > 5_000, String(remaining))
    assert.equal(released, true)
    assert.equal(await readLock(key).acquireImmediately(), true)
  })
}
