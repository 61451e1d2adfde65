// RedisLockStore keeps to the whole store contract (../contract.mjs), across
// processes too, through a fault proxy (support/fault-proxy.mjs) that passes
// every chunk on 2 ms late each way, as a network between machines would:
// waits, wake-ups, handoffs and timeouts hold when a round trip is not free.
import { Redis } from 'ioredis'
import { storeContract } from '../contract.mjs'
import { startRedis } from '../../../support/servers.mjs'
import { startProxy } from '../../../support/fault-proxy.mjs'
import { openStore } from '../../helpers/stores.mjs'

storeContract('RedisLockStore through 2 ms of latency each way', {
  async open() {
    const redis = await startRedis()
    const proxy = await startProxy(redis.port)
    proxy.latencyMs = 2
    const opened = await openStore({ KEEL_TEST_STORE: 'redis', REDIS_URL: proxy.url })
    const inspect = new Redis(redis.url)
    return {
      ...opened,
      deleteKey: (key) => inspect.del(key),
      async close() {
        await opened.close()
        inspect.disconnect()
        await proxy.close()
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
