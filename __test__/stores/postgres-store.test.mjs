// PostgresLockStore beyond the store contract (contract/postgres.test.mjs),
// against PostgreSQL clusters this file starts: options, the table it makes,
// interop with the docs' database store, one atomic acquire, fencing across
// processes and a server restart, expired rows swept, and faults (a server
// stopped and restarted, a wrong password, a statement stuck behind a lock).

import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import pg from 'pg'
import { lock, setLockStore, getLockStore, PostgresLockStore } from '@shaferllc/keel/core'
import { uniqueKey } from '../../support/servers.mjs'
import { startPostgres } from '../../support/postgres.mjs'
import { eventually } from '../helpers/eventually.mjs'
import { runChild } from '../helpers/processes.mjs'

let server
let inspect
const stores = []
const store = (options = {}) => {
  const s = new PostgresLockStore({ url: server.url, ...options })
  stores.push(s)
  return s
}

/** A plain `pg` client to look at the tables with (again after a restart). */
async function connectInspector() {
  inspect = new pg.Client(server.url)
  inspect.on('error', () => {}) // a restart ends it; the next query says so
  await inspect.connect()
}

before(async () => {
  // Commits wait for their WAL, as by default: a crash loses nothing committed.
  server = await startPostgres({ durable: true })
  await connectInspector()
})

after(async () => {
  for (const s of stores) await s.close()
  await inspect.end()
  await server.close()
})

const rows = async (sql, params = []) => (await inspect.query(sql, params)).rows

test('options: a URL or { url, table, poolSize, connectTimeout, commandTimeout, sweepInterval, listenUrl, tls }; bad ones name the option', () => {
  assert.ok(new PostgresLockStore() instanceof PostgresLockStore)
  assert.ok(new PostgresLockStore('postgres://app:secret@db.internal:5432/orders'))
  assert.ok(new PostgresLockStore({ url: 'postgresql://app@h/db', table: 'app.locks', poolSize: 1, sweepInterval: 10 }))
  assert.ok(new PostgresLockStore({ url: 'postgres://app@bouncer:6432/db', listenUrl: 'postgres://app@db:5432/db' }))
  const cases = [
    [42, TypeError, /new PostgresLockStore: expected a postgres:\/\/ URL or an options object/],
    [null, TypeError, /expected a postgres:\/\/ URL/],
    [['postgres://h'], TypeError, /expected a postgres:\/\/ URL/],
    [{ url: 5432 }, TypeError, /options\.url must be a string, got 5432/],
    [{ host: 'x' }, TypeError, /unknown option host \(known: url, table, poolSize, connectTimeout, commandTimeout, sweepInterval, listenUrl, tls\)/],
    [{ listenUrl: 5432 }, TypeError, /options\.listenUrl must be a string \(a postgres:\/\/ URL\), got 5432/],
    [{ listenUrl: 'redis://app:hunter2@h' }, TypeError, /listenUrl "redis:\/\/app:\*\*\*@h" is not a postgres:\/\/ URL/],
    [{ listenUrl: 'postgres://h/db?nonsense=1' }, TypeError, /listenUrl ".*" is not a PostgreSQL URL this store can use/],
    [{ table: 'Locks' }, TypeError, /options\.table must be a lower-case SQL name/],
    [{ table: 'locks; DROP TABLE x' }, TypeError, /options\.table/],
    [{ table: 'a'.repeat(56) }, TypeError, /options\.table .*at most 55 characters/],
    [{ poolSize: 0 }, RangeError, /options\.poolSize must be an integer from 1 to 100, got 0/],
    [{ poolSize: 1.5 }, RangeError, /options\.poolSize/],
    [{ poolSize: '4' }, RangeError, /options\.poolSize/],
    [{ commandTimeout: '1s' }, TypeError, /options\.commandTimeout must be a number of milliseconds/],
    [{ connectTimeout: 0 }, RangeError, /options\.connectTimeout must be a finite number > 0/],
    [{ sweepInterval: -1 }, RangeError, /options\.sweepInterval/],
    [{ tls: { ca: 1 } }, TypeError, /new PostgresLockStore: options\.tls\.ca must be PEM text/],
    [{ tls: { ca: 'not pem' } }, TypeError, /new PostgresLockStore: options\.tls\.ca/],
    ['redis://localhost', TypeError, /url "redis:\/\/localhost" is not a postgres:\/\/ URL/],
    ['postgres://h/db?nonsense=1', TypeError, /is not a PostgreSQL URL this store can use/],
  ]
  for (const [input, type, message] of cases) {
    assert.throws(() => new PostgresLockStore(input), (e) => e instanceof type && message.test(e.message), JSON.stringify(input))
  }
})

test('a password in a bad URL is not repeated in the error', () => {
  assert.throws(
    () => new PostgresLockStore('postgres://app:hunter2@host:notaport/db'),
    (e) => e instanceof TypeError && !e.message.includes('hunter2') && e.message.includes('app:***@'),
  )
})

test("the docs' table and a fencing sequence are made if missing, in the schema named", async () => {
  await inspect.query('CREATE SCHEMA app')
  const s = store({ table: 'app.locks' })
  assert.equal(await s.acquire('k', 'owner-1', 5_000), true)
  const columns = await rows(
    `SELECT column_name, data_type, is_nullable FROM information_schema.columns
     WHERE table_schema = 'app' AND table_name = 'locks' ORDER BY ordinal_position`,
  )
  assert.deepEqual(columns, [
    { column_name: 'key', data_type: 'text', is_nullable: 'NO' },
    { column_name: 'owner', data_type: 'text', is_nullable: 'NO' },
    { column_name: 'expires_at', data_type: 'bigint', is_nullable: 'NO' },
  ])
  assert.equal((await rows("SELECT to_regclass('app.locks_fencing') IS NOT NULL AS made"))[0].made, true)
  const [row] = await rows('SELECT key, owner, expires_at FROM app.locks')
  const now = Number((await rows('SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms'))[0].ms)
  assert.equal(row.owner, 'owner-1')
  const left = Number(row.expires_at) - now
  assert.ok(left > 4_000 && left <= 5_000, `expires_at is ${left} ms from the server's now`)
})

test('stores starting together all find one table', async () => {
  const table = `race_${Date.now() % 100_000}`
  const racing = Array.from({ length: 6 }, () => store({ table, poolSize: 1 }))
  const won = await Promise.all(racing.map((s, i) => s.acquire('k', `owner-${i}`, 5_000)))
  assert.equal(won.filter(Boolean).length, 1)
})

test('used directly as a LockStore: the five operations, with argument checks', async () => {
  const s = store()
  const key = uniqueKey('direct')
  assert.equal(await s.acquire(key, 'a', 2_000), true)
  assert.equal(await s.acquire(key, 'b', 2_000), false)
  assert.equal(await s.isLocked(key), true)
  const left = await s.remainingTime(key)
  assert.ok(left > 1_500 && left <= 2_000, String(left))
  assert.equal(await s.extend(key, 'b', 9_000), false)
  assert.equal(await s.extend(key, 'a', 9_000), true)
  assert.ok((await s.remainingTime(key)) > 8_000)
  assert.equal(await s.release(key, 'b'), false)
  assert.equal(await s.release(key, 'a'), true)
  assert.equal(await s.isLocked(key), false)
  assert.equal(await s.remainingTime(key), null)
  await assert.rejects(s.acquire(42, 'a', 1_000), /PostgresLockStore\.acquire: key must be a string, got 42/)
  await assert.rejects(s.acquire(key, 'a', 0), /PostgresLockStore\.acquire: ttlMs must be a finite number > 0/)
  await assert.rejects(s.release(key, 7), /PostgresLockStore\.release: owner must be a string/)
})

test('a key PostgreSQL text cannot hold is refused with the reason, not an encoding error', async () => {
  const s = store()
  await assert.rejects(s.acquire('a\0b', 'owner', 1_000), (e) => e instanceof TypeError && /NUL character/.test(e.message))
  assert.equal(await s.isLocked('a\0b'), false)
  assert.equal(await s.release('a\0b', 'owner'), false)
})

test("interop: the docs' database store and PostgresLockStore on one table exclude each other, both ways", async () => {
  const env = { KEEL_TEST_STORE: 'postgres', KEEL_TEST_DATABASE: server.url }
  const native = store()
  const previous = getLockStore()
  setLockStore(native)
  try {
    // The docs' store (in another process, through lock()) holds; the native one cannot take it.
    const docsHeld = uniqueKey('docs-held')
    const { serialized } = await runChild(env, 'take', docsHeld, '30000')
    assert.equal(await lock(docsHeld).acquire(), false)
    assert.equal(await native.isLocked(docsHeld), true)
    // The docs' store releases; the native one takes it.
    assert.equal((await runChild(env, 'release', serialized)).released, true)
    assert.equal(await lock(docsHeld).acquire(), true)
    // The native one holds; the docs' store, in another process, cannot take it.
    const nativeHeld = uniqueKey('native-held')
    const held = lock(nativeHeld, 30_000)
    assert.equal(await held.acquire(), true)
    const other = await runChild(env, 'try', nativeHeld, '30000')
    assert.equal(other.acquired, false)
    await held.release()
    assert.equal((await runChild(env, 'try', nativeHeld, '30000')).acquired, true)
  } finally {
    setLockStore(previous)
  }
})

test('acquire is one atomic statement: of 24 racing stores, one takes a free key and one an expired row', async () => {
  const racing = Array.from({ length: 24 }, () => store({ poolSize: 1 }))
  const free = uniqueKey('race-free')
  const won = await Promise.all(racing.map((s, i) => s.acquire(free, `o${i}`, 30_000)))
  assert.equal(won.filter(Boolean).length, 1)
  const expired = uniqueKey('race-expired')
  await inspect.query('INSERT INTO locks (key, owner, expires_at) VALUES ($1, $2, 1)', [expired, 'gone'])
  const took = await Promise.all(racing.map((s, i) => s.acquire(expired, `o${i}`, 30_000)))
  assert.equal(took.filter(Boolean).length, 1)
  const [row] = await rows('SELECT owner FROM locks WHERE key = $1', [expired])
  assert.equal(row.owner, `o${took.indexOf(true)}`)
})

test('fencing tokens keep growing across processes and a crash-restart of the server', async () => {
  const env = { KEEL_TEST_STORE: 'postgres-store', KEEL_TEST_DATABASE: server.url }
  const key = uniqueKey('fenced')
  const tokens = []
  const previous = getLockStore()
  setLockStore(store())
  try {
    for (let i = 0; i < 3; i++) {
      await lock(key).run(async (held) => tokens.push(held.fencingToken))
      const { serialized, fencingToken } = await runChild(env, 'take', key, '30000')
      tokens.push(fencingToken)
      await runChild(env, 'release', serialized)
    }
    server.restart() // immediate mode: crash recovery
    await connectInspector()
    await eventually(() => lock(key).run(async (held) => tokens.push(held.fencingToken)).then(([ran]) => assert.ok(ran)), 15_000)
  } finally {
    setLockStore(previous)
  }
  assert.ok(tokens.every((t) => Number.isSafeInteger(t)), JSON.stringify(tokens))
  assert.ok(tokens.every((t, i) => i === 0 || t > tokens[i - 1]), `not increasing: ${tokens}`)
})

test('expired rows are swept away in bounded batches, live ones kept', async () => {
  const table = 'swept'
  const s = store({ table, sweepInterval: 50 })
  assert.equal(await s.acquire(uniqueKey('first'), 'o', 60_000), true) // makes the table
  await inspect.query(
    `INSERT INTO ${table} (key, owner, expires_at) SELECT 'old:' || i, 'gone', 1 FROM generate_series(1, 1700) AS i`,
  )
  await inspect.query(`INSERT INTO ${table} (key, owner, expires_at) VALUES ('live', 'o', 9000000000000)`)
  await new Promise((resolve) => setTimeout(resolve, 80))
  assert.equal(await s.acquire(uniqueKey('trigger'), 'o', 60_000), true)
  await eventually(async () => {
    const [{ n }] = await rows(`SELECT count(*)::int AS n FROM ${table} WHERE key LIKE 'old:%'`)
    assert.equal(n, 0)
  })
  assert.equal((await rows(`SELECT count(*)::int AS n FROM ${table}`))[0].n, 3)
})

test('a statement stuck behind another session is bounded by commandTimeout, and the store works after', async () => {
  const s = store({ commandTimeout: 400, table: 'stuck' })
  const key = uniqueKey('stuck')
  assert.equal(await s.acquire(key, 'a', 60_000), true)
  const blocker = new pg.Client(server.url)
  await blocker.connect()
  try {
    await blocker.query('BEGIN')
    await blocker.query('LOCK TABLE stuck IN ACCESS EXCLUSIVE MODE')
    const started = performance.now()
    await assert.rejects(s.release(key, 'a'), (e) => e.code === 'ERR_LOCK_STORE_TIMEOUT' && /PostgresLockStore\.release/.test(e.message))
    const took = performance.now() - started
    assert.ok(took < 2_000, `failed after ${took} ms`)
    // The server cancels it too (statement_timeout is the command timeout,
    // counted from when the server got it, a moment after the store's timer
    // started): it no longer waits on the lock, so it will never run.
    await eventually(async () => {
      const { rows } = await blocker.query(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'keel-lock' AND wait_event_type = 'Lock'",
      )
      assert.equal(rows[0].n, 0)
    })
  } finally {
    await blocker.query('ROLLBACK')
    await blocker.end()
  }
  assert.equal(await s.release(key, 'a'), true)
})

test('a wrong password: ERR_LOCK_STORE_AUTH without the password, and no reconnect storm', async () => {
  const guarded = await startPostgres({ password: 'right-horse' })
  try {
    const wrong = guarded.url.replace('right-horse', 'hunter2')
    const s = new PostgresLockStore({ url: wrong, poolSize: 4 })
    const errors = []
    for (let i = 0; i < 60; i++) errors.push(await s.isLocked('k').catch((e) => e))
    await s.close()
    for (const e of errors) {
      assert.equal(e.code, 'ERR_LOCK_STORE_AUTH', e.message)
      assert.ok(!e.message.includes('hunter2'), e.message)
      assert.match(e.message, /PostgresLockStore\.isLocked: was refused by postgres:\/\/postgres@127\.0\.0\.1:\d+\/postgres/)
    }
    const attempts = guarded.log().match(/password authentication failed/g)?.length ?? 0
    assert.ok(attempts >= 1 && attempts <= 3, `${attempts} failed logins for 60 operations`)
    const right = new PostgresLockStore({ url: guarded.url })
    assert.equal(await right.acquire('k', 'o', 1_000), true)
    await right.close()
  } finally {
    await guarded.close()
  }
})

test('the server stopped mid-run: clear errors within the timeouts, fn never runs unlocked; back again, the same store works', async () => {
  const own = await startPostgres({ durable: true })
  const s = new PostgresLockStore({ url: own.url, commandTimeout: 1_000, connectTimeout: 1_000 })
  const previous = getLockStore()
  setLockStore(s)
  try {
    const key = uniqueKey('down')
    assert.equal((await lock(key).run(async () => 'ok'))[0], true)
    // run() ends once its release is sent: the server answers it (behind it
    // on the key's connection) before it is killed, or it is held for its TTL.
    assert.equal(await s.isLocked(key), false)
    own.stop()
    let ranUnlocked = false
    const started = performance.now()
    const outcome = await lock(key)
      .run(async () => (ranUnlocked = true), { timeout: 0 })
      .catch((e) => e)
    assert.equal(ranUnlocked, false)
    assert.ok(['ERR_LOCK_STORE_CONNECTION', 'ERR_LOCK_STORE_TIMEOUT'].includes(outcome.code), String(outcome))
    assert.ok(performance.now() - started < 2_500, 'failed within connectTimeout + commandTimeout')
    own.start()
    await eventually(async () => assert.deepEqual(await lock(key).run(async () => 'back'), [true, 'back']), 10_000)
  } finally {
    setLockStore(previous)
    await s.close()
    await own.close()
  }
})

test('close(): later operations reject with ERR_LOCK_STORE_CLOSED', async () => {
  const s = new PostgresLockStore({ url: server.url })
  assert.equal(await s.acquire(uniqueKey('closing'), 'o', 1_000), true)
  await s.close()
  await assert.rejects(s.isLocked('k'), (e) => e.code === 'ERR_LOCK_STORE_CLOSED' && /PostgresLockStore\.isLocked: the store is closed/.test(e.message))
})

test('a process with an open, idle store exits when its work is done', async () => {
  const env = { KEEL_TEST_STORE: 'postgres-store', KEEL_TEST_DATABASE: server.url, KEEL_TEST_LEAVE_OPEN: '1' }
  const { acquired } = await runChild(env, 'try', uniqueKey('idle'), '1000')
  assert.equal(acquired, true)
})
