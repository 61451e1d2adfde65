// RedisLockStore and the docs' ioredis store speak the same data layout, so a
// fleet mixing processes that use either still excludes itself: a lock taken
// through one is held for the other, both ways. The same holds for read-write
// locks between RedisLockStore and the read-write methods of
// examples/read-write-store.mjs, which keep RedisLockStore's layout.

import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { lock, readLock, writeLock, restoreLock, setLockStore } from '@shaferllc/keel/core'
import { redisForTests, uniqueKey } from '../../support/servers.mjs'
import { openStore } from '../helpers/stores.mjs'
import { runChild } from '../helpers/processes.mjs'

const redis = await redisForTests()
const env = (kind) => ({ KEEL_TEST_STORE: kind, KEEL_TEST_REDIS: redis.url })
const { store: native, close: closeNative } = await openStore(env('redis'))
const { store: docs, close: closeDocs } = await openStore(env('ioredis'))
// (Over the same ioredis client as the docs' store: closing that one closes both.)
const { store: example } = await openStore(env('ioredis-read-write'))
const dir = mkdtempSync(join(tmpdir(), 'keel-interop-'))

after(async () => {
  await closeNative()
  await closeDocs()
  await redis.close()
  rmSync(dir, { recursive: true, force: true })
})

const pairs = [
  ['RedisLockStore', native, "the docs' ioredis store", docs],
  ["the docs' ioredis store", docs, 'RedisLockStore', native],
]

for (const [takerName, taker, otherName, other] of pairs) {
  test(`a lock taken through ${takerName} is held for ${otherName}`, async () => {
    const key = uniqueKey('invoice')
    setLockStore(taker)
    const held = lock(key, 8_000)
    assert.equal(await held.acquire(), true)

    setLockStore(other)
    const rival = lock(key, 8_000)
    assert.equal(await rival.isLocked(), true)
    assert.equal(await rival.acquireImmediately(), false, `${otherName} cannot take it`)
    const left = await rival.getRemainingTime()
    assert.ok(left > 7_000 && left <= 8_000, `same TTL seen (${left})`)

    // The same owner token acts through either store.
    const same = restoreLock(held.serialize())
    await same.extend(20_000)
    assert.equal(await same.isExpired(), false)
    setLockStore(taker)
    assert.ok((await held.getRemainingTime()) > 15_000, `extended through ${otherName}`)

    setLockStore(other)
    assert.equal(await same.release(), true, `released through ${otherName}`)
    setLockStore(taker)
    assert.equal(await lock(key).isLocked(), false)
    assert.equal(await held.release(), false, 'already released')
  })
}

test("a fleet mixing RedisLockStore and the docs' ioredis store loses no update", async () => {
  const file = join(dir, 'counter')
  writeFileSync(file, '0')
  const key = uniqueKey('counter')
  const increments = 25
  const kinds = ['redis', 'ioredis', 'redis', 'ioredis']
  const results = await Promise.all(kinds.map((k) => runChild(env(k), 'count', file, String(increments), key)))
  assert.deepEqual(
    results.map((r) => r.timeouts),
    [0, 0, 0, 0],
  )
  assert.equal(Number(readFileSync(file, 'utf8')), kinds.length * increments)
})

const readWritePairs = [
  ['RedisLockStore', native, 'the read-write example store', example],
  ['the read-write example store', example, 'RedisLockStore', native],
]

for (const [takerName, taker, otherName, other] of readWritePairs) {
  test(`a write hold taken through ${takerName} keeps out ${otherName}'s readers and writers`, async () => {
    const key = uniqueKey('price-list')
    setLockStore(taker)
    const writer = writeLock(key, 8_000)
    assert.equal(await writer.acquire(), true)
    setLockStore(other)
    assert.equal(await readLock(key).acquireImmediately(), false)
    assert.equal(await writeLock(key).acquireImmediately(), false)
    assert.equal(await writeLock(key).holders(), 1)
    const same = restoreLock(writer.serialize())
    await same.extend(20_000)
    assert.ok((await same.getRemainingTime()) > 15_000, `extended through ${otherName}`)
    assert.equal(await same.release(), true, `released through ${otherName}`)
    assert.equal(await readLock(key).acquireImmediately(), true)
  })

  test(`a writer waiting through ${takerName} holds back ${otherName}'s new readers, and gets in`, async () => {
    const key = uniqueKey('rebuild')
    setLockStore(other)
    const reader = readLock(key, 8_000)
    assert.equal(await reader.acquire(), true)
    setLockStore(taker)
    const writing = writeLock(key).acquire({ timeout: 10_000, retryDelay: 100 })
    await sleep(50)
    setLockStore(other)
    assert.equal(await readLock(key).acquireImmediately(), false, 'the waiting writer holds new readers back')
    assert.equal(await reader.release(), true)
    assert.equal(await writing, true)
    assert.equal(await readLock(key).isLocked(), true)
  })
}

test('a release of a read hold through the example store wakes a RedisLockStore writer at once', async () => {
  const key = uniqueKey('announced')
  setLockStore(example)
  const reader = readLock(key, 30_000)
  await reader.acquire()
  setLockStore(native)
  const writing = writeLock(key).acquire({ timeout: 20_000, retryDelay: 60_000 })
  await sleep(300)
  const released = Date.now()
  setLockStore(example)
  assert.equal(await reader.release(), true)
  assert.equal(await writing, true)
  const took = Date.now() - released
  assert.ok(took < 5_000, `woken ${took} ms after the release; the poll alone would take 60000`)
})

test('readers and writers across processes mixing both stores: writers alone, readers together', async () => {
  const key = uniqueKey('rw-fleet')
  const crowd = mkdtempSync(join(dir, 'inside-'))
  const roles = [
    ['redis', 'read'],
    ['ioredis-read-write', 'read'],
    ['redis', 'write'],
    ['ioredis-read-write', 'write'],
    ['ioredis-read-write', 'read'],
  ]
  const results = await Promise.all(roles.map(([kind, role]) => runChild(env(kind), 'crowd', crowd, '1500', key, role, String(roles.length))))
  const seen = JSON.stringify(results.map((r, i) => ({ role: roles[i], ...r })))
  assert.deepEqual(results.map((r) => r.overlaps), [0, 0, 0, 0, 0], seen)
  assert.deepEqual(results.map((r) => r.timeouts), [0, 0, 0, 0, 0], seen)
  assert.ok(results.every((r) => r.sections > 0), seen)
})
