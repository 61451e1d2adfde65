// PostgresLockStore behind PgBouncer in transaction pooling mode, beyond the
// store contract (contract/postgres-pgbouncer-*.test.mjs): two stores on two
// tables sharing the bouncer's few server connections exclude as they must
// and write to their own table (a statement prepared by name would run
// another store's statement of that name); and waiters are woken by polling
// (LISTEN hears nothing through such a pooler, and the store says so once)
// or at once when listenUrl names the cluster directly.
// Skipped, saying so, when pgbouncer is not installed.

import { describe, test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import pg from 'pg'
import { lock, setLockStore, PostgresLockStore } from '@shaferllc/keel/core'
import { uniqueKey } from '../../support/servers.mjs'
import { startPostgres } from '../../support/postgres.mjs'
import { startPgBouncer } from '../../support/pgbouncer.mjs'
import { describeWith } from '../helpers/tools.mjs'

describeWith(['pgbouncer'], 'PostgresLockStore through PgBouncer (pool_mode = transaction)', () => {
  let postgres
  let bouncer
  let inspect
  const stores = []
  const store = (options = {}) => {
    const s = new PostgresLockStore({ url: bouncer.url, commandTimeout: 10_000, ...options })
    stores.push(s)
    return s
  }

  before(async () => {
    postgres = await startPostgres()
    // Two server connections for everyone: clients' transactions interleave on them.
    bouncer = await startPgBouncer({ upstream: postgres.url, mode: 'transaction', poolSize: 2 })
    inspect = new pg.Client(postgres.url)
    await inspect.connect()
  })

  after(async () => {
    for (const s of stores) await s.close()
    await inspect?.end()
    await bouncer?.close()
    await postgres?.close()
  })

  test('a bouncer that refuses the options startup parameter: connects without it, on the event loop and on Tokio', async () => {
    // PgBouncer's default: only the parameters it tracks (the store sends
    // statement_timeout and READ COMMITTED in `options`).
    const strict = await startPgBouncer({ upstream: postgres.url, mode: 'transaction', poolSize: 2, ignoreStartupParameters: 'extra_float_digits' })
    try {
      const { port } = strict
      for (const url of [strict.url, `postgres://postgres@127.0.0.1:${port},127.0.0.1:${port}/postgres`]) {
        const s = store({ url, table: 'bouncer_strict' })
        const key = uniqueKey('strict')
        assert.equal(await s.acquire(key, 'me', 30_000), true, url)
        assert.equal(await s.extend(key, 'me', 30_000), true)
        assert.equal(await s.acquire(key, 'other', 30_000), false)
        assert.equal(await s.release(key, 'me'), true)
      }
    } finally {
      await strict.close()
    }
  })

  test('two stores on two tables: each key held once per table, its row in its own table', async () => {
    const a = store({ table: 'bouncer_a', poolSize: 4 })
    const b = store({ table: 'bouncer_b', poolSize: 4 })
    const keys = Array.from({ length: 200 }, (_, i) => uniqueKey(`two-tables-${i}`))
    // Per key, two owners race through each store, all at once.
    const outcomes = await Promise.all(
      keys.map(async (key) => {
        const [a1, a2, b1, b2] = await Promise.all([
          a.acquire(key, `a1-${key}`, 60_000),
          a.acquire(key, `a2-${key}`, 60_000),
          b.acquire(key, `b1-${key}`, 60_000),
          b.acquire(key, `b2-${key}`, 60_000),
        ])
        return { key, a: [a1, a2], b: [b1, b2] }
      }),
    )
    for (const { key, a: inA, b: inB } of outcomes) {
      assert.equal(inA.filter(Boolean).length, 1, `${key}: taken ${inA} through store a`)
      assert.equal(inB.filter(Boolean).length, 1, `${key}: taken ${inB} through store b`)
    }
    for (const [table, prefix] of [
      ['bouncer_a', 'a'],
      ['bouncer_b', 'b'],
    ]) {
      const { rows } = await inspect.query(`SELECT key, owner FROM ${table} WHERE key = ANY($1)`, [keys])
      assert.equal(rows.length, keys.length, `${table} has a row per key`)
      for (const row of rows) {
        const won = outcomes.find((o) => o.key === row.key)[prefix].indexOf(true) + 1
        assert.equal(row.owner, `${prefix}${won}-${row.key}`, `${table}: ${row.key} belongs to its winner`)
      }
    }
    // The statements after an acquire also run against their own table.
    for (const key of keys.slice(0, 20)) {
      assert.equal(await a.isLocked(key), true)
      assert.equal(await a.release(key, `a1-${key}`) || (await a.release(key, `a2-${key}`)), true)
      assert.equal(await a.isLocked(key), false)
      assert.equal(await b.isLocked(key), true, 'b keeps its own hold')
    }
  })

  test('a waiter is woken by polling; the store warns once that notifications do not arrive', async () => {
    const s = store({ table: 'bouncer_poll' })
    setLockStore(s)
    const warnings = []
    const onWarning = (w) => w.name === 'LockStoreWarning' && warnings.push(w)
    process.on('warning', onWarning)
    try {
      const key = uniqueKey('poll')
      // Held and released through another store (as from another process):
      // nothing in this process wakes the waiter but a notification or its poll.
      const other = store({ table: 'bouncer_poll' })
      for (const round of [1, 2]) {
        assert.equal(await other.acquire(key, 'elsewhere', 30_000), true)
        const waiter = lock(key, 30_000)
        const waiting = waiter.acquire({ timeout: 10_000, retryDelay: 300 })
        // The first time, longer than the listener's check (about 1.5 s): the warning is out.
        await new Promise((r) => setTimeout(r, round === 1 ? 2_500 : 500))
        const released = performance.now()
        assert.equal(await other.release(key, 'elsewhere'), true)
        assert.equal(await waiting, true, 'the waiter got the lock')
        const after = performance.now() - released
        assert.ok(after < 1_500, `woken by its poll ${Math.round(after)} ms after the release`)
        await waiter.release()
      }
      await new Promise((r) => setImmediate(r))
      assert.equal(warnings.length, 1, warnings.map((w) => w.message).join('\n'))
      assert.match(warnings[0].message, /did not reach the LISTEN connection.*transaction-pooling bouncer.*listenUrl/s)
      assert.equal(warnings[0].code, 'KEEL_POSTGRES_NOT_NOTIFIED')
    } finally {
      process.off('warning', onWarning)
    }
  })

  test('with listenUrl (the cluster, directly) a waiter is woken at once, and nothing is warned', async () => {
    const s = store({ table: 'bouncer_listen', listenUrl: postgres.url })
    setLockStore(s)
    const warnings = []
    const onWarning = (w) => w.name === 'LockStoreWarning' && warnings.push(w)
    process.on('warning', onWarning)
    try {
      const key = uniqueKey('listen')
      // The releases come from another store (as from another process): only
      // a notification can wake the waiter before its minute-long poll.
      const other = store({ table: 'bouncer_listen' })
      assert.equal(await other.acquire(key, 'elsewhere', 30_000), true)
      const waiter = lock(key, 30_000)
      const waiting = waiter.acquire({ timeout: 10_000, retryDelay: 60_000 })
      await new Promise((r) => setTimeout(r, 2_000))
      const released = performance.now()
      assert.equal(await other.release(key, 'elsewhere'), true)
      assert.equal(await waiting, true)
      const after = performance.now() - released
      assert.ok(after < 1_000, `woken ${Math.round(after)} ms after the release`)
      await waiter.release()
      assert.deepEqual(
        warnings.map((w) => w.message),
        [],
      )
    } finally {
      process.off('warning', onWarning)
    }
  })
})
