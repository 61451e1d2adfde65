// Opening the stores that reach beyond one process, the same way in a test
// file and in the child processes it starts (child.mjs). Which store, and
// where its server is, is named by environment variables, so a child opens
// the same store by inheriting them:
//   KEEL_TEST_STORE     redis | redis-cluster | ioredis | ioredis-read-write | sqlite | postgres | postgres-store | mysql-store | sqlite-store | etcd-store
//   KEEL_TEST_REDIS     a redis:// or rediss:// URL, for redis, ioredis and ioredis-read-write
//   KEEL_TEST_REDIS_CLUSTER  for redis-cluster: the node URLs, separated by spaces
//   KEEL_TEST_DATABASE  sqlite:<file> or a postgres:// URL, for the docs' database store
//                       (sqlite, postgres) and PostgresLockStore (postgres-store)
//   KEEL_TEST_MYSQL     a mysql:// URL, for MySqlLockStore (mysql-store)
//   KEEL_TEST_SQLITE    a file's path, for SqliteLockStore (sqlite-store)
//   KEEL_TEST_ETCD      the members' URLs, comma-separated, for EtcdLockStore (etcd-store)
//   KEEL_TEST_ETCD_PREFIX  EtcdLockStore's prefix (etcd-store), when set
//   KEEL_TEST_LISTEN_URL  PostgresLockStore's listenUrl (postgres-store), when set
//   KEEL_TEST_COMMAND_TIMEOUT  the native stores' command and connect timeouts, ms (default 5000)
//   KEEL_TEST_TLS_CA    a PEM file: the native stores trust this CA (rediss://, PostgreSQL over TLS)
// None of them is REDIS_URL or DATABASE_URL: those may name a developer's own
// servers, which the tests never touch.

import { readFileSync } from 'node:fs'
import { RedisLockStore, PostgresLockStore, MySqlLockStore, SqliteLockStore, EtcdLockStore, getLockStore, setLockStore } from '@shaferllc/keel/core'

/**
 * Opens the store `env` names; resolves to `{ store, close(), env }`, where
 * `close()` lets the process exit and `env` is what a child process needs to
 * open the same store. `env` is also set on this process: the docs' stores
 * (fixtures/) read their targets from the environment.
 */
export async function openStore(env = process.env) {
  const named = pick(env)
  Object.assign(process.env, named)
  return { ...(await open(named.KEEL_TEST_STORE, named)), env: named }
}

async function open(kind, env) {
  const commandTimeout = Number(env.KEEL_TEST_COMMAND_TIMEOUT ?? 5_000)
  const tls = env.KEEL_TEST_TLS_CA === undefined ? {} : { tls: { ca: readFileSync(env.KEEL_TEST_TLS_CA) } }
  switch (kind) {
    case 'redis': {
      const store = new RedisLockStore({ url: env.KEEL_TEST_REDIS, commandTimeout, connectTimeout: commandTimeout, ...tls })
      return { store, close: () => store.close() }
    }
    case 'redis-cluster': {
      const cluster = env.KEEL_TEST_REDIS_CLUSTER.split(' ')
      const store = new RedisLockStore({ cluster, commandTimeout, connectTimeout: commandTimeout })
      return { store, close: () => store.close() }
    }
    case 'ioredis': {
      docsClientTo(env.KEEL_TEST_REDIS)
      // The docs' module registers its store on import, as the docs show.
      const { redisLockStore } = await import('../fixtures/dist/docs-redis.js')
      const { client } = await import('../fixtures/dist/redis-client.js')
      return { store: redisLockStore(client), close: () => client.quit() }
    }
    case 'ioredis-read-write': {
      // The docs' store with the read-write methods (examples/read-write-store.mjs).
      docsClientTo(env.KEEL_TEST_REDIS)
      const { redisReadWriteStore } = await import('../../examples/read-write-store.mjs')
      const { client } = await import('../fixtures/dist/redis-client.js')
      return { store: redisReadWriteStore(client), close: () => client.quit() }
    }
    case 'postgres-store': {
      const listenUrl = env.KEEL_TEST_LISTEN_URL || undefined
      const store = new PostgresLockStore({ url: env.KEEL_TEST_DATABASE, listenUrl, commandTimeout, connectTimeout: commandTimeout, ...tls })
      return { store, close: () => store.close() }
    }
    case 'mysql-store': {
      const store = new MySqlLockStore({ url: env.KEEL_TEST_MYSQL, commandTimeout, connectTimeout: commandTimeout, ...tls })
      return { store, close: () => store.close() }
    }
    case 'sqlite-store': {
      const store = new SqliteLockStore({ path: env.KEEL_TEST_SQLITE, commandTimeout })
      return { store, close: () => store.close() }
    }
    case 'etcd-store': {
      const prefix = env.KEEL_TEST_ETCD_PREFIX || undefined
      const store = new EtcdLockStore({ endpoints: env.KEEL_TEST_ETCD, prefix, commandTimeout, connectTimeout: commandTimeout })
      return { store, close: () => store.close() }
    }
    case 'sqlite':
    case 'postgres': {
      const { databaseLockStore } = await import('../fixtures/dist/docs-database.js')
      const { createLocksTable, closeConnections } = await import('../fixtures/dist/connection.js')
      await createLocksTable()
      return { store: databaseLockStore(), close: closeConnections }
    }
    default:
      throw new Error(`KEEL_TEST_STORE must be redis, redis-cluster, ioredis, ioredis-read-write, sqlite, postgres, postgres-store, mysql-store, sqlite-store or etcd-store, got ${kind}`)
  }
}

/** The docs' ioredis client (fixtures/redis-client.ts) connects to KEEL_TEST_REDIS, read when it loads: the test's server. */
function docsClientTo(url) {
  if (!url) throw new Error('KEEL_TEST_REDIS must name the Redis server for the ioredis stores')
  process.env.KEEL_TEST_REDIS = url
}

const VARIABLES = ['KEEL_TEST_STORE', 'KEEL_TEST_REDIS', 'KEEL_TEST_REDIS_CLUSTER', 'KEEL_TEST_DATABASE', 'KEEL_TEST_MYSQL', 'KEEL_TEST_SQLITE', 'KEEL_TEST_ETCD', 'KEEL_TEST_ETCD_PREFIX', 'KEEL_TEST_LISTEN_URL', 'KEEL_TEST_COMMAND_TIMEOUT', 'KEEL_TEST_TLS_CA']

/** The variables of `env` that name a store. */
function pick(env) {
  return Object.fromEntries(VARIABLES.filter((name) => env[name] !== undefined).map((name) => [name, env[name]]))
}

/** Runs `fn` with `store` as the registered store, then registers the one before again. */
export async function withStore(store, fn) {
  const previous = getLockStore()
  setLockStore(store)
  try {
    return await fn()
  } finally {
    setLockStore(previous)
  }
}
