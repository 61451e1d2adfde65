// The docs' Redis store (fixtures/docs-redis.ts, ioredis), run as the docs
// write it against a redis-server of the file's own, keeps to the whole store
// contract (../contract.mjs), across processes too. It gives no fencing
// tokens and announces nothing: a waiter elsewhere finds a release by polling.
import { Redis } from 'ioredis'
import { storeContract } from '../contract.mjs'
import { redisForTests } from '../../../support/servers.mjs'
import { openStore } from '../../helpers/stores.mjs'

storeContract("the docs' ioredis store", {
  async open() {
    const redis = await redisForTests()
    const opened = await openStore({ KEEL_TEST_STORE: 'ioredis', KEEL_TEST_REDIS: redis.url })
    const inspect = new Redis(redis.url)
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
  processes: true,
  anyKey: true,
})
