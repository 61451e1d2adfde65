// PostgresLockStore's semaphores and read-write locks beyond the contract
// (contract-kinds.mjs), against a PostgreSQL cluster this file starts: what
// it makes beside the lock table, a table name too long for its channel, a
// database whose default isolation is not READ COMMITTED, a function left
// by an earlier version, and expired holds swept away.

import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import pg from 'pg'
import { lock, semaphore, readLock, writeLock, setLockStore, PostgresLockStore } from '@shaferllc/keel/core'
import { uniqueKey } from '../../support/servers.mjs'
import { startPostgres } from '../../support/postgres.mjs'
import { eventually } from '../helpers/eventually.mjs'

let server
let inspect
const stores = []
const store = (options = {}) => {
  const s = new PostgresLockStore({ url: server.url, ...options })
  stores.push(s)
  return s
}

before(async () => {
  server = await startPostgres()
  inspect = new pg.Client(server.url)
  await inspect.connect()
})

after(async () => {
  for (const s of stores) await s.close()
  await inspect.end()
  await server.close()
})

const rows = async (sql, params = []) => (await inspect.query(sql, params)).rows
/** The hold functions of `table` (`<table>_hold_<version>`), by name. */
const holdFunctions = async (table) => {
  const [schema, name] = table.includes('.') ? table.split('.') : ['public', table]
  const found = await rows(
    `SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
     WHERE n.nspname = $1 AND p.proname ~ $2`,
    [schema, `^${name}_hold_[0-9a-f]{8}$`],
  )
  return found.map((row) => (schema === 'public' ? row.proname : `${schema}.${row.proname}`))
}

test('the holds table and its function are made beside the lock table, in the schema named', async () => {
  await inspect.query('CREATE SCHEMA shop')
  setLockStore(store({ table: 'shop.locks' }))
  const permit = semaphore('exports', 2, 5_000)
  assert.equal(await permit.acquire(), true)
  const [row] = await rows('SELECT kind, key, owner FROM shop.locks_holds')
  assert.deepEqual({ ...row, owner: typeof row.owner }, { kind: 's', key: 'exports', owner: 'string' })
  assert.equal((await holdFunctions('shop.locks')).length, 1, 'one hold function, of this version')
  assert.equal(await permit.release(), true)
  assert.equal((await rows('SELECT count(*)::int AS n FROM shop.locks_holds'))[0].n, 0)
})

test('a table name too long for "<table>_holds" as a channel: releases are still announced', async () => {
  const schema = 'a'.repeat(7)
  const table = `${schema}.${'t'.repeat(55)}`
  await inspect.query(`CREATE SCHEMA ${schema}`)
  const holder = store({ table })
  const waiter = store({ table })
  setLockStore(holder)
  const key = uniqueKey('long-table')
  const permit = semaphore(key, 1)
  assert.equal(await permit.acquire(), true)
  setLockStore(waiter)
  // The waiter's store hears releases on its own listening connection; its poll would take a minute.
  const waiting = semaphore(key, 1).acquire({ timeout: 20_000, retryDelay: 60_000 })
  await new Promise((resolve) => setTimeout(resolve, 500))
  const released = Date.now()
  assert.equal(await permit.release(), true)
  assert.equal(await waiting, true)
  assert.ok(Date.now() - released < 5_000, `woken ${Date.now() - released} ms after the release`)
})

test('a database that defaults to REPEATABLE READ: the store keeps to READ COMMITTED, and the limit holds', async () => {
  await inspect.query("ALTER DATABASE postgres SET default_transaction_isolation = 'repeatable read'")
  try {
    const table = 'isolated'
    const racing = Array.from({ length: 8 }, () => store({ table, poolSize: 1 }))
    const key = uniqueKey('isolated')
    const taken = await Promise.all(racing.map((s) => (setLockStore(s), semaphore(key, 3, 30_000)).acquireImmediately()))
    assert.equal(taken.filter(Boolean).length, 3)
    // Called in a REPEATABLE READ transaction, the function refuses to count.
    const direct = new pg.Client(server.url)
    await direct.connect()
    try {
      await assert.rejects(
        direct.query(`SELECT ${(await holdFunctions(table))[0]}('acquire', 'permit', $1, 'intruder', 1000, 3)`, [key]),
        /needs READ COMMITTED, and this transaction is repeatable read/,
      )
    } finally {
      await direct.end()
    }
  } finally {
    await inspect.query('ALTER DATABASE postgres RESET default_transaction_isolation')
  }
})

test('a hold function an earlier version left is not replaced: the store makes its own beside it and calls that', async () => {
  const table = 'upgraded'
  // An earlier version's function, of another body (one that never grants), and its table.
  await inspect.query(
    `CREATE TABLE ${table} (key TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at BIGINT NOT NULL);
     CREATE SEQUENCE ${table}_fencing;
     CREATE TABLE ${table}_holds (kind "char" NOT NULL, key TEXT NOT NULL, owner TEXT NOT NULL,
       expires_at BIGINT NOT NULL, PRIMARY KEY (key, kind, owner));
     CREATE FUNCTION ${table}_hold(op text, mode text, k text, who text, ttl bigint, lim bigint)
       RETURNS bigint LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$`,
  )
  setLockStore(store({ table }))
  const key = uniqueKey('after')
  assert.equal(await writeLock(key).acquire(), true, 'the store calls a function of its own')
  assert.equal(await readLock(key).acquireImmediately(), false)
  const [{ n }] = await rows(`SELECT count(*)::int AS n FROM pg_proc WHERE proname = '${table}_hold'`)
  assert.equal(n, 1, 'the earlier function is still there')
  assert.equal((await holdFunctions(table)).length, 1)
})

test('expired holds are swept with the expired locks', async () => {
  const table = 'holds_swept'
  const s = store({ table, sweepInterval: 50 })
  setLockStore(s)
  assert.equal(await semaphore(uniqueKey('first'), 1).acquire(), true) // makes the tables
  await inspect.query(
    `INSERT INTO ${table}_holds (kind, key, owner, expires_at) SELECT 's', 'old:' || i, 'gone', 1 FROM generate_series(1, 300) AS i`,
  )
  await new Promise((resolve) => setTimeout(resolve, 80))
  assert.equal(await lock(uniqueKey('trigger')).acquire(), true)
  await eventually(async () => {
    const [{ n }] = await rows(`SELECT count(*)::int AS n FROM ${table}_holds WHERE key LIKE 'old:%'`)
    assert.equal(n, 0)
  })
  assert.equal((await rows(`SELECT count(*)::int AS n FROM ${table}_holds`))[0].n, 1, 'the live permit is kept')
})
