// RedisLockStore and the docs' ioredis store speak the same data layout, so a
// fleet mixing processes that use either still excludes itself: a lock taken
// through one is held for the other, both ways.

import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { lock, restoreLock, setLockStore } from '@shaferllc/keel/core'
import { redisForTests, uniqueKey } from '../../support/servers.mjs'
import { openStore } from '../helpers/stores.mjs'
import { runChild } from '../helpers/processes.mjs'

const redis = await redisForTests()
const env = (kind) => ({ KEEL_TEST_STORE: kind, REDIS_URL: redis.url })
const { store: native, close: closeNative } = await openStore(env('redis'))
const { store: docs, close: closeDocs } = await openStore(env('ioredis'))
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
