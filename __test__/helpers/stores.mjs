// The stores the cross-process tests run against, opened the same way in the
// test process and in its children. Which one, and where its server is, comes
// from the environment, so a child inherits it:
//   KEEL_TEST_STORE     redis | ioredis | sqlite | postgres
//   REDIS_URL           for redis and ioredis
//   KEEL_TEST_DATABASE  sqlite:<file> or a postgres:// URL, for the docs' database store
//   KEEL_TEST_COMMAND_TIMEOUT  RedisLockStore's command and connect timeouts, ms (default 5000)

import { RedisLockStore } from '@shaferllc/keel/core'

export const STORES = {
  redis: 'RedisLockStore',
  ioredis: "the docs' ioredis store",
  sqlite: "the docs' database store on SQLite",
  postgres: "the docs' database store on PostgreSQL",
}

/** `{ store, close() }` for `kind`; `close()` lets the process exit. */
export async function openStore(kind = process.env.KEEL_TEST_STORE) {
  switch (kind) {
    case 'redis': {
      const commandTimeout = Number(process.env.KEEL_TEST_COMMAND_TIMEOUT ?? 5_000)
      const store = new RedisLockStore({ url: process.env.REDIS_URL, commandTimeout, connectTimeout: commandTimeout })
      return { store, close: () => store.close() }
    }
    case 'ioredis': {
      // The docs' module registers its store on import, as the docs show.
      const { redisLockStore } = await import('../fixtures/dist/docs-redis.js')
      const { client } = await import('../fixtures/dist/redis-client.js')
      return { store: redisLockStore(client), close: () => client.quit() }
    }
    case 'sqlite':
    case 'postgres': {
      const { databaseLockStore } = await import('../fixtures/dist/docs-database.js')
      const { createLocksTable, closeConnections } = await import('../fixtures/dist/connection.js')
      await createLocksTable()
      return { store: databaseLockStore(), close: closeConnections }
    }
    default:
      throw new Error(`KEEL_TEST_STORE must be one of ${Object.keys(STORES).join(', ')}, got ${kind}`)
  }
}

/**
 * A JS store (so the lock calls its methods, not the addon's) that passes
 * each call on to `inner`, except the methods given in `overrides`.
 */
export function jsStoreOver(inner, overrides = {}) {
  return {
    acquire: (k, o, t) => inner.acquire(k, o, t),
    release: (k, o) => inner.release(k, o),
    extend: (k, o, t) => inner.extend(k, o, t),
    isLocked: (k) => inner.isLocked(k),
    remainingTime: (k) => inner.remainingTime(k),
    ...overrides,
  }
}
