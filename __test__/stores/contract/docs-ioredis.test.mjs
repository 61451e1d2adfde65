// The docs' Redis store (fixtures/docs-redis.ts, ioredis), run as the docs
// write it against a redis-server of the file's own, keeps to the whole store
// contract (../contract.mjs), across processes too. It gives no fencing
// tokens and announces nothing: a waiter elsewhere finds a release by polling.
import { redisContract } from '../../helpers/redis-contract.mjs'
import { redisForTests } from '../../../support/servers.mjs'

redisContract("the docs' ioredis store", redisForTests, [], {
  store: 'ioredis',
  capabilities: { processes: true, anyKey: true },
})
