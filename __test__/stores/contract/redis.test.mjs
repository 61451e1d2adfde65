// RedisLockStore on a single redis-server of the file's own keeps to the
// whole store contract (../contract.mjs), across processes too; it gives
// fencing tokens and announces its releases to waiters in other processes.
import { redisContract } from '../../helpers/redis-contract.mjs'
import { redisForTests } from '../../../support/servers.mjs'

redisContract('RedisLockStore', redisForTests)
