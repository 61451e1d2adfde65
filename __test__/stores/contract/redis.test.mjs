// RedisLockStore on a single redis-server of the file's own keeps to the
// whole store contract (../contract.mjs), across processes too; it gives
// fencing tokens and announces its releases to waiters in other processes.
import { Redis } from 'ioredis'
import { storeContract } from '../contract.mjs'
import { redisForTests } from '../../../support/servers.mjs'
import { openStore } from '../../helpers/stores.mjs'

storeContract('RedisLockStore', {
  async open() {
    const redis = await redisForTests()
    const opened = await openStore({ KEEL_TEST_STORE: 'redis', REDIS_URL: redis.url })
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
  fencing: true,
  processes: true,
  announcesReleases: true,
  anyKey: true,
  semaphores: 'native',
  readWrite: true,
})
