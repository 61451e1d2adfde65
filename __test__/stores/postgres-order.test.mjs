// PostgresLockStore runs one key's operations in the order they were made,
// on the event loop's connections (TCP) and on Tokio's (a unix socket): an
// acquire that timed out on a stalled connection is given back after it has
// run, not before (else the late acquire takes the key for an owner nobody
// has, until its TTL), and an extend issued with a release runs first.

import { describe, test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import pg from 'pg'
import { lock, setLockStore, PostgresLockStore } from '@shaferllc/keel/core'
import { uniqueKey } from '../../support/servers.mjs'
import { startPostgres } from '../../support/postgres.mjs'

let server
let inspect
before(async () => {
  server = await startPostgres()
  inspect = new pg.Client(server.url)
  await inspect.connect()
})
after(async () => {
  await inspect?.end()
  await server?.close()
})

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

for (const [path, urlOf] of [
  ['TCP, on the event loop', (s) => s.url],
  ['a unix socket, on Tokio', (s) => s.socketUrl],
]) {
  describe(`PostgresLockStore over ${path}`, () => {
    test('a stalled connection: acquires that timed out leave no lock behind once it runs again', async () => {
      const table = `order_${path.startsWith('TCP') ? 'tcp' : 'unix'}`
      const store = new PostgresLockStore({ url: urlOf(server), table, poolSize: 4, commandTimeout: 300 })
      setLockStore(store)
      try {
        // Every connection of the pool open, each with its own server process.
        await Promise.all(Array.from({ length: 64 }, (_, i) => store.isLocked(`warm-${i}`)))
        const { rows: backends } = await inspect.query(
          "SELECT pid FROM pg_stat_activity WHERE application_name = 'keel-lock' AND backend_type = 'client backend'",
        )
        assert.equal(backends.length, 4, 'four connections open')
        const stalled = backends[0].pid
        process.kill(stalled, 'SIGSTOP')
        let outcomes
        try {
          const keys = Array.from({ length: 200 }, (_, i) => uniqueKey(`stall-${i}`))
          const attempts = Promise.allSettled(keys.map((key) => lock(key, 60_000).acquire()))
          await sleep(1_000)
          outcomes = (await attempts).map((outcome, i) => ({ key: keys[i], ...outcome }))
        } finally {
          process.kill(stalled, 'SIGCONT')
        }
        const failed = outcomes.filter((o) => o.status === 'rejected')
        assert.ok(failed.length > 0, 'some acquires waited on the stalled connection')
        // Timed out, or (on the event loop) still waiting when the first
        // timeout gave the silent connection up: neither is known to have run.
        for (const { reason } of failed) {
          assert.ok(['ERR_LOCK_STORE_TIMEOUT', 'ERR_LOCK_STORE_CONNECTION'].includes(reason.code), reason.message)
        }
        const taken = new Set(outcomes.filter((o) => o.status === 'fulfilled' && o.value === true).map((o) => o.key))
        // The stalled server process runs what waited on it: the acquires,
        // then their give-backs.
        await sleep(1_000)
        await store.isLocked(failed[0].key) // one more round trip on that connection
        const { rows } = await inspect.query(`SELECT key, owner FROM ${table} WHERE key = ANY($1)`, [outcomes.map((o) => o.key)])
        const orphans = rows.filter((row) => !taken.has(row.key))
        assert.deepEqual(orphans, [], `${orphans.length} of ${failed.length} timed-out acquires left a lock held by nobody`)
      } finally {
        await store.close()
      }
    })

    test('extend() and release() made together on one handle run in that order', async () => {
      const store = new PostgresLockStore({ url: urlOf(server), poolSize: 4 })
      setLockStore(store)
      try {
        const refused = []
        for (let i = 0; i < 100; i++) {
          const held = lock(uniqueKey(`extend-release-${i}`), 30_000)
          assert.equal(await held.acquire(), true)
          const [extended, released] = await Promise.allSettled([held.extend(), held.release()])
          if (extended.status === 'rejected') refused.push(extended.reason.message)
          assert.equal(released.status, 'fulfilled', released.reason?.message)
        }
        assert.deepEqual(refused, [], `${refused.length} of 100 extends ran after their release`)
      } finally {
        await store.close()
      }
    })
  })
}
