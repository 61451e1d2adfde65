// The store contract for RedisLockStore (or another store kept in Redis) on
// a redis-server of the test file's own, reached at the server's `url`
// (plain, TLS with the CA in `tlsCaFile`, or through a proxy), and looked at
// through ioredis at its `inspectUrl` (with `inspectOptions`), else its `url`.
import { Redis } from 'ioredis'
import { storeContract } from '../stores/contract.mjs'
import { openStore } from './stores.mjs'
import { lacking } from './tools.mjs'

/**
 * @param {string} name
 * @param {() => Promise<{ url: string, inspectUrl?: string, inspectOptions?: object, tlsCaFile?: string, close(): Promise<void> }>} server
 * @param {string[]} [tools] the programs (support/tools.mjs) it needs besides redis-server
 * @param {{ store?: string, capabilities?: object }} [as] another store on Redis
 *   (a KEEL_TEST_STORE of helpers/stores.mjs) with what it can do, in place
 *   of RedisLockStore's
 */
export function redisContract(name, server, tools = [], { store = 'redis', capabilities = NATIVE } = {}) {
  if (lacking(tools, name)) return
  storeContract(name, {
    async open() {
      const redis = await server()
      const opened = await openStore({ KEEL_TEST_STORE: store, KEEL_TEST_REDIS: redis.url, KEEL_TEST_TLS_CA: redis.tlsCaFile })
      const inspect = new Redis(redis.inspectUrl ?? redis.url, redis.inspectOptions ?? {})
      return {
        ...opened,
        deleteKey: (key) => inspect.del(key),
        async close() {
          await opened.close()
          inspect.disconnect()
          await redis.close()
        },
      }
    },
    ...capabilities,
  })
}

/** What RedisLockStore does, as the contract names it. */
const NATIVE = {
  pings: true,
  fencing: true,
  processes: true,
  announcesReleases: true,
  anyKey: true,
  semaphores: 'native',
  readWrite: true,
}
