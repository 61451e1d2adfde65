// Every lock the benchmark compares, behind one shape:
//   open({ redisUrl, postgresUrl, mysqlUrl, sqliteDir, etcdEndpoints }) -> { run(key, fn, { timeout, retryDelay }) -> Promise<boolean>, close() }
// `run` resolves whether fn ran (false: the wait timed out). Each is used the
// way its own documentation shows, with a 30 s TTL.

import { Redis } from 'ioredis'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { lock, setLockStore, MemoryLockStore, RedisLockStore, PostgresLockStore, MySqlLockStore, SqliteLockStore, EtcdLockStore } from '@shaferllc/keel/core'
import { Etcd3, EtcdLockFailedError } from 'etcd3'
import { setTimeout as sleep } from 'node:timers/promises'
import mysql from 'mysql2/promise'
import Database from 'better-sqlite3'
import lockfile from 'proper-lockfile'
import { Mutex as RedisMutex } from 'redis-semaphore'
import { Redlock } from '@sesamecare-oss/redlock'
import { LockFactory } from '@verrou/core'
import { memoryStore as verrouMemory } from '@verrou/core/drivers/memory'
import { redisStore as verrouRedis } from '@verrou/core/drivers/redis'
import { Mutex as AsyncMutex, withTimeout, E_TIMEOUT } from 'async-mutex'
import { PlainLock, PlainMemoryStore, PlainMySqlStore, PlainSqliteStore } from './baseline.mjs'
// The docs' ioredis store, compiled from the test fixture (npm run bench compiles it).
import { redisLockStore } from '../__test__/fixtures/dist/docs-redis.js'
// The docs' database store and the `connection()` it calls (pg, a pool of 4), likewise.
import { databaseLockStore } from '../__test__/fixtures/dist/docs-database.js'
import { createLocksTable, closeConnections } from '../__test__/fixtures/dist/connection.js'

const TTL = 30_000

function keel(store) {
  return {
    run(key, fn, options) {
      return lock(key, TTL)
        .run(fn, options)
        .then(([ran]) => ran)
    },
    install() {
      setLockStore(store)
    },
  }
}

function plain(store) {
  return {
    run: (key, fn, options) => new PlainLock(store, key, TTL).run(fn, options).then(([ran]) => ran),
  }
}

async function withClient(url, make) {
  const client = new Redis(url, { maxRetriesPerRequest: 3 })
  const impl = await make(client)
  return { ...impl, close: async () => client.quit() }
}

/** The docs' database store on `postgresUrl` (the table made first), used through `use`. */
async function docsDatabase(postgresUrl, use) {
  process.env.KEEL_TEST_DATABASE = postgresUrl
  await createLocksTable()
  return { ...use(databaseLockStore()), close: closeConnections }
}

const RELEASE = 'if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) end return 0'

export const IMPLEMENTATIONS = {
  'keel memory': { backend: 'memory', ours: true, open: async () => ({ ...keel(new MemoryLockStore()), close() {} }) },
  'plain JS memory': { backend: 'memory', baseline: true, open: async () => ({ ...plain(new PlainMemoryStore()), close() {} }) },
  'verrou memory': {
    backend: 'memory',
    open: async () => verrou(verrouMemory().factory()),
  },
  'async-mutex': {
    backend: 'memory',
    inProcessOnly: true,
    open: async () => {
      const mutexes = new Map()
      return {
        async run(key, fn, { timeout = 0 } = {}) {
          let m = mutexes.get(key)
          if (m === undefined) mutexes.set(key, (m = new AsyncMutex()))
          if (timeout === 0) {
            if (m.isLocked()) return false
            await m.runExclusive(fn)
            return true
          }
          try {
            await withTimeout(m, timeout).runExclusive(fn)
            return true
          } catch (e) {
            if (e === E_TIMEOUT) return false
            throw e
          }
        },
        close() {},
      }
    },
  },
  'keel RedisLockStore': {
    backend: 'redis',
    ours: true,
    open: async ({ redisUrl }) => {
      const store = new RedisLockStore(redisUrl)
      return { ...keel(store), close: () => store.close() }
    },
  },
  "keel + docs' ioredis store": {
    backend: 'redis',
    ours: true,
    open: ({ redisUrl }) => withClient(redisUrl, (client) => keel(redisLockStore(client))),
  },
  'plain JS + ioredis': {
    backend: 'redis',
    baseline: true,
    open: ({ redisUrl }) => withClient(redisUrl, (client) => plain(redisLockStore(client))),
  },
  'redis-semaphore': {
    backend: 'redis',
    open: ({ redisUrl }) =>
      withClient(redisUrl, (client) => ({
        async run(key, fn, { timeout = 0, retryDelay = 50 } = {}) {
          // An acquireTimeout of 0 makes tryAcquire() fail at once; one attempt is what "immediately" means.
          const waiting = timeout === 0 ? { acquireAttemptsLimit: 1 } : { acquireTimeout: timeout, retryInterval: retryDelay }
          const m = new RedisMutex(client, key, { lockTimeout: TTL, refreshInterval: 0, ...waiting })
          if (!(await m.tryAcquire())) return false
          try {
            await fn()
          } finally {
            await m.release()
          }
          return true
        },
      })),
  },
  redlock: {
    backend: 'redis',
    open: ({ redisUrl }) =>
      withClient(redisUrl, (client) => {
        const redlock = new Redlock([client], { retryJitter: 0, automaticExtensionThreshold: 500 })
        return {
          async run(key, fn, { timeout = 0, retryDelay = 50 } = {}) {
            const retryCount = Math.ceil(timeout / Math.max(retryDelay, 1))
            let held
            try {
              held = await redlock.acquire([key], TTL, { retryCount, retryDelay })
            } catch {
              return false
            }
            try {
              await fn()
            } finally {
              await held.release()
            }
            return true
          },
        }
      }),
  },
  'verrou redis': {
    backend: 'redis',
    open: ({ redisUrl }) => withClient(redisUrl, async (client) => verrou(verrouRedis({ connection: client }).factory())),
  },
  'bare ioredis SET NX + EVAL': {
    backend: 'redis',
    floor: true,
    open: ({ redisUrl }) =>
      withClient(redisUrl, (client) => ({
        async run(key, fn, { timeout = 0, retryDelay = 50 } = {}) {
          const owner = crypto.randomUUID()
          const deadline = Date.now() + timeout
          while ((await client.set(key, owner, 'PX', TTL, 'NX')) !== 'OK') {
            if (Date.now() >= deadline) return false
            await new Promise((r) => setTimeout(r, retryDelay))
          }
          try {
            await fn()
          } finally {
            await client.eval(RELEASE, 1, key, owner)
          }
          return true
        },
      })),
  },
  'keel PostgresLockStore': {
    backend: 'postgres',
    ours: true,
    open: async ({ postgresUrl }) => {
      const store = new PostgresLockStore(postgresUrl)
      return { ...keel(store), close: () => store.close() }
    },
  },
  "keel + docs' database store": {
    backend: 'postgres',
    ours: true,
    open: ({ postgresUrl }) => docsDatabase(postgresUrl, keel),
  },
  "plain JS + docs' database store": {
    backend: 'postgres',
    baseline: true,
    open: ({ postgresUrl }) => docsDatabase(postgresUrl, plain),
  },
  'keel MySqlLockStore': {
    backend: 'mysql',
    ours: true,
    open: async ({ mysqlUrl }) => {
      const store = new MySqlLockStore(mysqlUrl)
      return { ...keel(store), close: () => store.close() }
    },
  },
  // The same table design and acquire statement over a mysql2 pool of 4 (keel's poolSize), polling.
  'plain JS + mysql2 (baseline)': {
    backend: 'mysql',
    baseline: true,
    open: async ({ mysqlUrl }) => {
      const pool = mysql.createPool({ uri: mysqlUrl, connectionLimit: 4 })
      const store = new PlainMySqlStore(pool)
      await store.createTable()
      return { ...plain(store), close: () => pool.end() }
    },
  },
  // The processes of one machine, through one file each (in sqliteDir, every process the same).
  'keel SqliteLockStore': {
    backend: 'sqlite',
    ours: true,
    open: async ({ sqliteDir }) => {
      const store = new SqliteLockStore(join(sqliteDir, 'keel.db'))
      return { ...keel(store), close: () => store.close() }
    },
  },
  'plain JS + better-sqlite3 (baseline)': {
    backend: 'sqlite',
    baseline: true,
    open: async ({ sqliteDir }) => {
      const store = new PlainSqliteStore(Database, join(sqliteDir, 'plain.db'))
      return { ...plain(store), close: () => store.close() }
    },
  },
  // A cluster's majority commits each write (an etcd cluster of 3 members on this machine).
  'keel EtcdLockStore': {
    backend: 'etcd',
    ours: true,
    open: async ({ etcdEndpoints }) => {
      const store = new EtcdLockStore(etcdEndpoints)
      return { ...keel(store), close: () => store.close() }
    },
  },
  // The etcd3 package's lock, as its docs show (a lease per lock, granted and revoked with it);
  // it does not wait, so a wait is its acquire tried every retryDelay.
  'etcd3 lock': {
    backend: 'etcd',
    baseline: true,
    open: async ({ etcdEndpoints }) => {
      const client = new Etcd3({ hosts: etcdEndpoints.split(',') })
      return {
        async run(key, fn, { timeout = 0, retryDelay = 50 } = {}) {
          const until = Date.now() + timeout
          for (;;) {
            const held = client.lock(key).ttl(TTL / 1_000)
            try {
              await held.acquire()
            } catch (e) {
              if (!(e instanceof EtcdLockFailedError)) throw e
              if (Date.now() >= until) return false
              await sleep(retryDelay)
              continue
            }
            try {
              await fn()
            } finally {
              await held.release()
            }
            return true
          }
        },
        close: async () => client.close(),
      }
    },
  },
  // A lock folder per key (mkdir), its mtime refreshed while held, stale after 30 s; waiting is its retries.
  'proper-lockfile': {
    backend: 'sqlite',
    open: async ({ sqliteDir }) => {
      const folder = join(sqliteDir, 'lockfiles')
      mkdirSync(folder, { recursive: true })
      return {
        async run(key, fn, { timeout = 0, retryDelay = 50 } = {}) {
          const retries = timeout === 0 ? 0 : { retries: Math.ceil(timeout / Math.max(retryDelay, 1)), factor: 1, minTimeout: retryDelay, maxTimeout: retryDelay }
          let release
          try {
            release = await lockfile.lock(join(folder, encodeURIComponent(key)), { realpath: false, stale: TTL, retries })
          } catch (e) {
            if (e?.code === 'ELOCKED') return false
            throw e
          }
          try {
            await fn()
          } finally {
            await release()
          }
          return true
        },
        close() {},
      }
    },
  },
}

function verrou(store) {
  const factory = new LockFactory(store)
  return {
    async run(key, fn, { timeout = 0, retryDelay = 50 } = {}) {
      const l = factory.createLock(key, TTL)
      const got =
        timeout === 0 ? await l.acquireImmediately() : await l.acquire({ retry: { timeout, delay: retryDelay } }).catch(() => false)
      if (!got) return false
      try {
        await fn()
      } finally {
        // Under contention verrou's memory store can hand one mutex to two
        // owners and then refuse the second release (E_LOCK_NOT_OWNED); the
        // scenario's overlap count shows what that costs, so carry on.
        await l.release().catch((e) => {
          if (e?.code !== 'E_LOCK_NOT_OWNED') throw e
        })
      }
      return true
    },
    close() {},
  }
}
