// A server that answers "not now" (Redis busy with another client's script,
// out of client slots or loading its data; PostgreSQL out of connection
// slots or starting up) is a store that is not ready, not a broken one: the
// error's code is ERR_LOCK_STORE_UNAVAILABLE, and a waiter with time left
// tries again at its retryDelay until the server is ready, like after a
// refused connection.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Redis } from 'ioredis'
import pg from 'pg'
import { lock, setLockStore, RedisLockStore, PostgresLockStore } from '@shaferllc/keel/core'
import { startRedis, uniqueKey } from '../../support/servers.mjs'
import { startPostgres } from '../../support/postgres.mjs'
import { eventually } from '../helpers/eventually.mjs'
import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync } from 'node:fs'
import { join } from 'node:path'

let redis
let postgres
const cleanups = []
before(async () => {
  ;[redis, postgres] = await Promise.all([startRedis({
      // DEBUG RELOAD for the LOADING test, answering other clients while it loads.
      args: ['--busy-reply-threshold', '100', '--enable-debug-command', 'yes', '--loading-process-events-interval-bytes', '1024'],
    }), startPostgres()])
})
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup()
  await redis?.close()
  await postgres?.close()
})

const redisStore = (options = {}) => {
  const store = new RedisLockStore({ url: redis.url, commandTimeout: 5_000, ...options })
  cleanups.push(() => store.close())
  return store
}
const ioredis = () => {
  const client = new Redis(redis.url, { maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true })
  client.on('error', () => {})
  cleanups.push(() => client.disconnect())
  return client
}

test('Redis BUSY (another client\'s script runs long): ERR_LOCK_STORE_UNAVAILABLE, and a waiter gets the lock once it ends', async () => {
  const store = redisStore()
  setLockStore(store)
  const key = uniqueKey('busy')
  assert.equal(await store.isLocked(key), false)
  const runner = ioredis()
  const killer = ioredis()
  await Promise.all([runner.connect(), killer.connect()])
  // A script that spins until killed: past busy-reply-threshold, every other command is answered BUSY.
  runner.eval('while true do end', 0).catch(() => {})
  await new Promise((resolve) => setTimeout(resolve, 300))
  await assert.rejects(store.isLocked(key), (e) => {
    assert.equal(e.code, 'ERR_LOCK_STORE_UNAVAILABLE', e.message)
    assert.match(e.message, /^RedisLockStore\.isLocked: was not ready at redis:\/\/127\.0\.0\.1:\d+: BUSY /)
    return true
  })
  const waiting = lock(key, 10_000).acquire({ timeout: 15_000, retryDelay: 100 })
  await new Promise((resolve) => setTimeout(resolve, 500))
  await killer.call('SCRIPT', 'KILL')
  assert.equal(await waiting, true, 'the waiter tried again until the server was ready')
})

test('Redis LOADING (a restart reading its data back): ERR_LOCK_STORE_UNAVAILABLE, and a waiter gets the lock once it is loaded', async () => {
  const store = redisStore()
  setLockStore(store)
  const key = uniqueKey('loading')
  assert.equal(await store.isLocked(key), false)
  const admin = ioredis()
  await admin.connect()
  // 2,000 keys read back 1 ms apart: the server says LOADING for about 2 s.
  await admin.call('DEBUG', 'POPULATE', '2000', uniqueKey('filler'))
  await admin.config('SET', 'key-load-delay', '1000')
  cleanups.push(() => admin.config('SET', 'key-load-delay', '0').catch(() => {}))
  const reloaded = admin.call('DEBUG', 'RELOAD')
  await new Promise((resolve) => setTimeout(resolve, 300))
  await assert.rejects(store.isLocked(key), (e) => {
    assert.equal(e.code, 'ERR_LOCK_STORE_UNAVAILABLE', e.message)
    assert.match(e.message, /^RedisLockStore\.isLocked: was not ready at redis:\/\/127\.0\.0\.1:\d+: LOADING Redis is loading/)
    return true
  })
  const waiting = lock(key, 10_000).acquire({ timeout: 15_000, retryDelay: 100 })
  assert.equal(await reloaded, 'OK')
  assert.equal(await waiting, true, 'the waiter tried again until the data was loaded')
  await admin.config('SET', 'key-load-delay', '0')
})

test('Redis out of client slots: ERR_LOCK_STORE_UNAVAILABLE, and a waiter gets the lock once a slot frees', async () => {
  const admin = ioredis()
  const spare = ioredis()
  await Promise.all([admin.connect(), spare.connect()])
  const clients = Number((await admin.call('CLIENT', 'LIST')).trim().split('\n').length)
  // Room for the clients connected now and no more.
  await admin.config('SET', 'maxclients', String(clients))
  cleanups.push(async () => {
    const restore = new Redis(redis.url)
    await restore.config('SET', 'maxclients', '10000')
    restore.disconnect()
  })
  const store = redisStore({ connectTimeout: 2_000 })
  const key = uniqueKey('full')
  await assert.rejects(store.isLocked(key), (e) => {
    assert.equal(e.code, 'ERR_LOCK_STORE_UNAVAILABLE', e.message)
    assert.match(e.message, /max number of clients reached/)
    return true
  })
  setLockStore(store)
  const waiting = lock(key, 10_000).acquire({ timeout: 15_000, retryDelay: 100 })
  await new Promise((resolve) => setTimeout(resolve, 500))
  // Two slots: the store's connection, and the one it hears releases on.
  admin.disconnect()
  spare.disconnect()
  assert.equal(await waiting, true, 'the waiter tried again until a slot was free')
})

test('Redis with one client slot: a waiter whose store could not connect gets the slot its holder frees, and the lock', async () => {
  // The waiter's store follows releases on a second connection once it
  // waits; that one must not take the only slot from its operations.
  const server = await startRedis({ args: ['--maxclients', '1'] })
  cleanups.push(() => server.close())
  for (let run = 0; run < 3; run++) {
    const key = uniqueKey(`one-slot-${run}`)
    const holder = new RedisLockStore({ url: server.url, connectTimeout: 2_000 })
    const waiter = new RedisLockStore({ url: server.url, connectTimeout: 2_000 })
    // (The slot may still be the server's start-up check's for a moment.)
    await eventually(async () => assert.equal(await holder.acquire(key, 'holder', 30_000), true))
    setLockStore(waiter)
    const waiting = lock(key, 10_000).acquire({ timeout: 8_000, retryDelay: 100 })
    await new Promise((resolve) => setTimeout(resolve, 500))
    assert.equal(await holder.release(key, 'holder'), true)
    await holder.close()
    const freed = Date.now()
    assert.equal(await waiting, true, 'the waiter got the slot and the lock')
    assert.ok(Date.now() - freed < 3_000, `${Date.now() - freed} ms after the slot was freed`)
    await waiter.close()
  }
})

test('PostgreSQL out of connection slots: ERR_LOCK_STORE_UNAVAILABLE, and a waiter gets the lock once a slot frees', async () => {
  const admin = new pg.Client(postgres.url)
  await admin.connect()
  const { rows } = await admin.query("SELECT current_setting('max_connections')::int AS max")
  // Every slot taken (the superusers' reserved ones too: the store logs in as postgres).
  const fillers = []
  for (;;) {
    const filler = new pg.Client(postgres.url)
    try {
      await filler.connect()
    } catch {
      break
    }
    fillers.push(filler)
    assert.ok(fillers.length <= rows[0].max, 'the server kept taking connections')
  }
  const freeSlots = () => Promise.all(fillers.splice(0).map((f) => f.end().catch(() => {})))
  cleanups.push(freeSlots)
  const store = new PostgresLockStore({ url: postgres.url, poolSize: 1, connectTimeout: 2_000, commandTimeout: 2_000 })
  cleanups.push(() => store.close())
  const key = uniqueKey('pg-full')
  await assert.rejects(store.isLocked(key), (e) => {
    assert.equal(e.code, 'ERR_LOCK_STORE_UNAVAILABLE', e.message)
    assert.match(e.message, /too many clients|connection slots/)
    return true
  })
  setLockStore(store)
  const waiting = lock(key, 10_000).acquire({ timeout: 15_000, retryDelay: 100 })
  await new Promise((resolve) => setTimeout(resolve, 500))
  // Two slots: the store's connection, and the one it listens for releases on.
  await Promise.all([admin.end(), fillers.pop().end()])
  assert.equal(await waiting, true, 'the waiter tried again until a slot was free')
  // The slots back for the tests after this one.
  await freeSlots()
  await store.close()
})

test('PostgreSQL read-only (a standby, or default_transaction_read_only): an error that says so, not "cannot execute SELECT"', async () => {
  const admin = new pg.Client(postgres.url)
  await admin.connect()
  await admin.query('CREATE DATABASE readonly')
  await admin.query('ALTER DATABASE readonly SET default_transaction_read_only = on')
  cleanups.push(() => admin.end())
  const url = postgres.url.replace(/\/postgres$/, '/readonly')
  // Every object made by a session that turns read-only off for itself.
  const setup = new pg.Client(url)
  await setup.connect()
  await setup.query('SET default_transaction_read_only = off')
  await setup.query(PostgresLockStore.schema())
  await setup.end()
  const store = new PostgresLockStore({ url, poolSize: 1 })
  cleanups.push(() => store.close())
  await assert.rejects(store.acquire(uniqueKey('ro'), 'owner', 5_000), (e) => {
    assert.equal(e.code, 'ERR_LOCK_STORE_POSTGRES', e.message)
    assert.match(e.message, /cannot write: the database is read-only \(a standby, or default_transaction_read_only\)/)
    return true
  })
})

test('PostgreSQL starting up (a standby not yet promoted): ERR_LOCK_STORE_UNAVAILABLE, and a waiter gets the lock once it is promoted', async () => {
  // A cluster of its own, restarted as a standby with hot_standby off: it
  // runs, and answers every connection "the database system is not accepting
  // connections" (57P03) until `pg_ctl promote`.
  const standby = await startPostgres()
  cleanups.push(() => standby.close())
  const dir = decodeURIComponent(new URL(standby.socketUrl).hostname)
  const data = join(dir, 'data')
  const asPostgres = (file, args) => {
    const [cmd, argv] = process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', file, ...args]] : [file, args]
    const r = spawnSync(cmd, argv, { encoding: 'utf8' })
    assert.equal(r.status, 0, `${file} ${args.join(' ')}: ${r.stdout}${r.stderr}`)
  }
  const admin = new pg.Client(standby.url)
  await admin.connect()
  const { rows } = await admin.query("SELECT setting FROM pg_settings WHERE name = 'data_directory'")
  await admin.query('ALTER SYSTEM SET hot_standby = off')
  await admin.end()
  assert.equal(rows[0].setting, data)
  standby.stop()
  asPostgres('touch', [join(data, 'standby.signal')])
  standby.start()
  const store = new PostgresLockStore({ url: standby.url, poolSize: 1, connectTimeout: 2_000, commandTimeout: 2_000 })
  cleanups.push(() => store.close())
  const key = uniqueKey('pg-starting')
  await assert.rejects(store.isLocked(key), (e) => {
    assert.equal(e.code, 'ERR_LOCK_STORE_UNAVAILABLE', e.message)
    assert.match(e.message, /^PostgresLockStore\.isLocked: .*(not accepting connections|starting up)/)
    return true
  })
  setLockStore(store)
  const waiting = lock(key, 10_000).acquire({ timeout: 20_000, retryDelay: 100 })
  await new Promise((resolve) => setTimeout(resolve, 500))
  asPostgres(pgCtl(), ['-D', data, '-w', 'promote'])
  assert.equal(await waiting, true, 'the waiter tried again until the server was promoted')
  await store.close()
})

/** The pg_ctl of the newest PostgreSQL installed (Debian keeps it off the PATH). */
function pgCtl() {
  const root = '/usr/lib/postgresql'
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : []
  return versions.map((v) => join(root, v, 'bin', 'pg_ctl')).find((file) => existsSync(file)) ?? 'pg_ctl'
}
