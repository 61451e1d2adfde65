// Closing a server store ends the waits on it: an acquire waiting for a held
// lock rejects with ERR_LOCK_STORE_CLOSED at once, not at its next poll.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { lock, semaphore, setLockStore, RedisLockStore, PostgresLockStore } from '@shaferllc/keel/core'
import { startRedis, uniqueKey } from '../../support/servers.mjs'
import { startPostgres } from '../../support/postgres.mjs'

let redis
let postgres
before(async () => {
  ;[redis, postgres] = await Promise.all([startRedis(), startPostgres()])
})
after(async () => {
  await redis?.close()
  await postgres?.close()
})

const STORES = {
  RedisLockStore: () => new RedisLockStore({ url: redis.url }),
  PostgresLockStore: () => new PostgresLockStore({ url: postgres.url }),
}

for (const [name, make] of Object.entries(STORES)) {
  test(`${name}: close() rejects the acquires waiting on it at once`, async () => {
    const store = make()
    const holder = make()
    setLockStore(store)
    const key = uniqueKey('close')
    const permits = uniqueKey('close-permits')
    assert.equal(await holder.acquire(key, 'holder', 30_000), true)
    assert.equal(await semaphore(permits, 1, 30_000).acquire(), true)
    // Two waiters on one key and one on a semaphore, all polling a minute apart.
    const waits = [
      lock(key, 5_000).acquire({ timeout: 60_000, retryDelay: 60_000 }),
      lock(key, 5_000).acquire({ timeout: 60_000, retryDelay: 60_000 }),
      semaphore(permits, 1, 5_000).acquire({ timeout: 60_000, retryDelay: 60_000 }),
    ]
    await new Promise((resolve) => setTimeout(resolve, 300))
    const closed = performance.now()
    await store.close()
    for (const wait of waits) await assert.rejects(wait, (e) => e.code === 'ERR_LOCK_STORE_CLOSED')
    const took = performance.now() - closed
    assert.ok(took < 2_000, `the waiters rejected ${Math.round(took)} ms after close()`)
    await holder.close()
  })
}
