// PostgresLockStore for a user who may not create objects (PostgreSQL 15's
// default for the public schema): plain locks work with only the table and
// its sequence (their waiters then wait on their own, not in a line), semaphores need the holds table and function too, a missing
// object is named in the error with where to get the SQL that makes it, and
// PostgresLockStore.schema() is that SQL, run once by a user who may.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import pg from 'pg'
import { setTimeout as sleep } from 'node:timers/promises'
import { lock, semaphore, setLockStore, PostgresLockStore } from '@shaferllc/keel/core'
import { uniqueKey } from '../../support/servers.mjs'
import { startPostgres } from '../../support/postgres.mjs'

let server
let admin
const stores = []
before(async () => {
  server = await startPostgres()
  admin = new pg.Client(server.url)
  await admin.connect()
  await admin.query("CREATE ROLE locker LOGIN; GRANT USAGE ON SCHEMA public TO locker")
})
after(async () => {
  for (const store of stores) await store.close()
  await admin?.end()
  await server?.close()
})

const asLocker = (table) => {
  const store = new PostgresLockStore({ url: server.url.replace('postgres@', 'locker@'), table, connectTimeout: 2_000, commandTimeout: 2_000 })
  stores.push(store)
  return store
}
const grant = () =>
  admin.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO locker;
               GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO locker;
               GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO locker`)

test('with nothing made and no right to make it: the error names the table and where its SQL is', async () => {
  const store = asLocker('nothing_here')
  await assert.rejects(store.isLocked('k'), (e) => {
    assert.equal(e.code, 'ERR_LOCK_STORE_POSTGRES', e.message)
    assert.match(e.message, /permission denied/)
    assert.match(e.message, /the table nothing_here or its sequence nothing_here_fencing is missing/)
    assert.match(e.message, /PostgresLockStore\.schema\("nothing_here"\)/)
    return true
  })
})

test('with only the table and its sequence: plain locks work; a semaphore fails naming the function it lacks', async () => {
  await admin.query(`CREATE TABLE plain_only (key TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at BIGINT NOT NULL);
                     CREATE SEQUENCE plain_only_fencing`)
  await grant()
  const store = asLocker('plain_only')
  setLockStore(store)
  const key = uniqueKey('plain')
  assert.deepEqual(await lock(key, 5_000).run(async () => 'locked'), [true, 'locked'])
  // Nor the line: its waiters wait on their own, and still get in when the holder lets go.
  const held = lock(key, 5_000)
  assert.equal(await held.acquire(), true)
  const waiting = lock(key, 5_000).acquire({ timeout: 5_000, retryDelay: 50 })
  await sleep(100)
  assert.equal(await held.release(), true)
  assert.equal(await waiting, true)
  assert.equal((await admin.query("SELECT to_regclass('plain_only_line') AS line")).rows[0].line, null)
  await assert.rejects(semaphore(uniqueKey('permits'), 2, 5_000).acquire(), (e) => {
    assert.equal(e.code, 'ERR_LOCK_STORE_POSTGRES', e.message)
    assert.match(e.message, /plain_only_hold_[0-9a-f]{8}\(.*\) does not exist/)
    return true
  })
})

test('PostgresLockStore.schema() run once by a user who may: then everything works for one who may not', async () => {
  await admin.query(PostgresLockStore.schema('made_by_admin'))
  await grant()
  const store = asLocker('made_by_admin')
  setLockStore(store)
  assert.deepEqual(await lock(uniqueKey('plain'), 5_000).run(async () => 'locked'), [true, 'locked'])
  const permits = uniqueKey('permits')
  const first = semaphore(permits, 2, 5_000)
  const second = semaphore(permits, 2, 5_000)
  assert.equal(await first.acquire(), true)
  assert.equal(await second.acquire(), true)
  assert.equal(await semaphore(permits, 2, 5_000).acquireImmediately(), false)
  await first.release()
  await second.release()
  // The SQL names only the table it is given, and it can be run again.
  await admin.query(PostgresLockStore.schema('made_by_admin'))
  assert.doesNotMatch(PostgresLockStore.schema('app.jobs'), /made_by_admin|\blocks\b/)
})

test('schema() checks the table name as the store does', () => {
  assert.match(PostgresLockStore.schema(), /CREATE TABLE IF NOT EXISTS locks \(/)
  for (const bad of ['Locks', 'a b', 42, '']) {
    assert.throws(() => PostgresLockStore.schema(bad), (e) => e instanceof TypeError && /PostgresLockStore\.schema: table must be/.test(e.message))
  }
})
