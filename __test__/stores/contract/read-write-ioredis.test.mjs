// The docs' ioredis store with the eight read-write methods a store written
// in JS opts into (examples/read-write-store.mjs) keeps to the whole store
// contract (../contract.mjs), read-write locks across processes included.
// Like the docs' store it gives no fencing tokens; its releases of read-write
// holds are announced on RedisLockStore's channel, which only RedisLockStore
// hears, so waiters here find them by polling.
import { storeContract } from '../contract.mjs'
import { redisForTests } from '../../../support/servers.mjs'
import { openStore } from '../../helpers/stores.mjs'

storeContract("the docs' ioredis store with the read-write methods", {
  async open() {
    const redis = await redisForTests()
    const opened = await openStore({ KEEL_TEST_STORE: 'ioredis-read-write', KEEL_TEST_REDIS: redis.url }).catch(async (error) => {
      await redis.close()
      throw error
    })
    return {
      ...opened,
      async close() {
        await opened.close()
        await redis.close()
      },
    }
  },
  processes: true,
  anyKey: true,
  readWrite: true,
})
