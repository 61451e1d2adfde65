// A store written in JS that keeps read-write locks: the docs' ioredis store
// plus the eight read-write methods LockStore lets a store opt into.
// Run it against a Redis server: `node examples/read-write-store.mjs`
// (REDIS_URL, default redis://127.0.0.1:6379).
//
// A read-write key's data is in the layout RedisLockStore uses, so processes
// using this store and processes using RedisLockStore (prefix "") share
// read-write locks, and a release here wakes their waiters:
//   keel:rw:{k:<key>}           sorted set: each reader's owner -> expiry (ms, server clock)
//   keel:rw:{k:<key>}:writer    the writer's owner, with its TTL
//   keel:rw:{k:<key>}:waiting   a refused writer's mark, with its TTL: new readers stay out
// Every script reads the server's clock and first drops lapsed readers.
import { pathToFileURL } from 'node:url'
import { Redis } from 'ioredis'
import { readLock, writeLock, setLockStore, verifyLockStore } from '@shaferllc/keel/core'

// --- The docs' five methods, as the docs write them ---------------------------

const RELEASE = `
  if redis.call("get", KEYS[1]) == ARGV[1] then
    return redis.call("del", KEYS[1])
  end
  return 0
`
const EXTEND = `
  if redis.call("get", KEYS[1]) == ARGV[1] then
    return redis.call("pexpire", KEYS[1], ARGV[2])
  end
  return 0
`

/** @param {Redis} client @returns {import('@shaferllc/keel/core').LockStore} */
export const redisLockStore = (client) => ({
  async acquire(key, owner, ttlMs) {
    return (await client.set(key, owner, 'PX', ttlMs, 'NX')) === 'OK'
  },
  async release(key, owner) {
    return (await client.eval(RELEASE, 1, key, owner)) === 1
  },
  async extend(key, owner, ttlMs) {
    return (await client.eval(EXTEND, 1, key, owner, String(ttlMs))) === 1
  },
  async isLocked(key) {
    return (await client.exists(key)) === 1
  },
  async remainingTime(key) {
    const ms = await client.pttl(key)
    return ms < 0 ? null : ms
  },
})

// --- The read-write methods ---------------------------------------------------

// KEYS: the readers, the writer, the waiting mark. ARGV: the owner, a TTL in ms.
const NOW = `
  local t = redis.call("time")
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call("zremrangebyscore", KEYS[1], "-inf", now)
  local function outlive(ms)
    if redis.call("pttl", KEYS[1]) < ms then redis.call("pexpire", KEYS[1], ms) end
  end
`
const ACQUIRE_READ = `${NOW}
  if redis.call("exists", KEYS[2], KEYS[3]) > 0 then return 0 end
  redis.call("zadd", KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
  outlive(tonumber(ARGV[2]))
  return 1
`
const ACQUIRE_WRITE = `${NOW}
  local writer = redis.call("get", KEYS[2])
  if writer == ARGV[1] or (not writer and redis.call("zcard", KEYS[1]) == 0) then
    redis.call("set", KEYS[2], ARGV[1], "PX", ARGV[2])
    redis.call("del", KEYS[3])
    return 1
  end
  if redis.call("pttl", KEYS[3]) < tonumber(ARGV[2]) then redis.call("set", KEYS[3], ARGV[1], "PX", ARGV[2]) end
  return 0
`
const RELEASE_HOLD = `${NOW}
  local released = 0
  if redis.call("get", KEYS[2]) == ARGV[1] then
    released = redis.call("del", KEYS[2])
  else
    released = redis.call("zrem", KEYS[1], ARGV[1])
  end
  if released == 1 then redis.call("publish", "keel:released:" .. KEYS[1], KEYS[1]) end
  return released
`
const EXTEND_HOLD = `${NOW}
  if redis.call("get", KEYS[2]) == ARGV[1] then return redis.call("pexpire", KEYS[2], ARGV[2]) end
  if not redis.call("zscore", KEYS[1], ARGV[1]) then return 0 end
  redis.call("zadd", KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
  outlive(tonumber(ARGV[2]))
  return 1
`
const HOLD_REMAINING = `${NOW}
  if redis.call("get", KEYS[2]) == ARGV[1] then return redis.call("pttl", KEYS[2]) end
  local expires = redis.call("zscore", KEYS[1], ARGV[1])
  if expires then return tonumber(expires) - now end
  return -1
`
const HOLDERS = `${NOW}
  return redis.call("zcard", KEYS[1]) + redis.call("exists", KEYS[2])
`

/** The three keys of read-write key `key`. @param {string} key */
function rwKeys(key) {
  const readers = `keel:rw:{k:${key}}`
  return [readers, `${readers}:writer`, `${readers}:waiting`]
}

/**
 * @param {Redis} client
 * @returns {Required<Pick<import('@shaferllc/keel/core').ReadWriteLockStore, 'acquireRead' | 'acquireWrite' | 'releaseHold' | 'extendHold' | 'holdRemaining' | 'holders' | 'readersWait' | 'withdrawWriter'>>}
 */
export const readWriteMethods = (client) => {
  const run = (script, key, ...args) => client.eval(script, 3, ...rwKeys(key), ...args)
  return {
    acquireRead: async (key, owner, ttlMs) => (await run(ACQUIRE_READ, key, owner, String(ttlMs))) === 1,
    acquireWrite: async (key, owner, ttlMs) => (await run(ACQUIRE_WRITE, key, owner, String(ttlMs))) === 1,
    releaseHold: async (key, owner) => (await run(RELEASE_HOLD, key, owner)) === 1,
    extendHold: async (key, owner, ttlMs) => (await run(EXTEND_HOLD, key, owner, String(ttlMs))) === 1,
    async holdRemaining(key, owner) {
      const ms = await run(HOLD_REMAINING, key, owner)
      return ms <= 0 ? null : ms
    },
    holders: async (key) => run(HOLDERS, key),
    readersWait: async (key) => (await client.exists(rwKeys(key).slice(1))) > 0,
    withdrawWriter: (key) => client.del(rwKeys(key)[2]),
  }
}

/** @param {Redis} client @returns {import('@shaferllc/keel/core').ReadWriteLockStore} */
export const redisReadWriteStore = (client) => ({ ...redisLockStore(client), ...readWriteMethods(client) })

// --- Run directly: check the store, then a reader, a waiting writer, a reader held back.
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const client = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379')
  const store = setLockStore(redisReadWriteStore(client))
  const report = await verifyLockStore(store)
  console.log(`verifyLockStore: ${report.ok ? 'ok' : 'FAILED'} (${report.checks.length} checks)`)
  for (const check of report.checks.filter((c) => !c.ok)) console.log(`  ${check.name}: ${check.detail}`)

  const reader = readLock('price-list')
  await reader.acquire()
  const writer = writeLock('price-list')
  const rebuilding = writer.acquire({ timeout: 5_000 })
  console.log('a new reader while a writer waits:', await readLock('price-list').acquireImmediately()) // false
  await reader.release()
  console.log('the writer got in:', await rebuilding, '- holders:', await writer.holders()) // true 1
  await writer.release()
  await client.quit()
  if (!report.ok) process.exitCode = 1
}
