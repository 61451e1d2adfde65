// RedisLockStore keeps to the whole store contract (../contract.mjs), across
// processes too, through a fault proxy (support/fault-proxy.mjs) that passes
// every chunk on 2 ms late each way, as a network between machines would:
// waits, wake-ups, handoffs and timeouts hold when a round trip is not free.
import { redisContract } from '../../helpers/redis-contract.mjs'
import { startRedis } from '../../../support/servers.mjs'
import { startProxy } from '../../../support/fault-proxy.mjs'

redisContract('RedisLockStore through 2 ms of latency each way', async () => {
  const redis = await startRedis()
  const proxy = await startProxy(redis.port)
  proxy.latencyMs = 2
  return {
    url: proxy.url,
    inspectUrl: redis.url,
    async close() {
      await proxy.close()
      await redis.close()
    },
  }
})
