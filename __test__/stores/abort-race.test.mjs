// Whatever the moment a wait is cancelled, a lock is never held by two, on
// every store shared across processes: 4 processes of 4 waiters each take 3 keys with run(),
// each wait's AbortSignal aborting 0-60 ms in, beside a client outside
// lock() that takes the same keys with the store's own acquire/release,
// while processes are SIGKILLed at random moments and others start in their
// place (helpers/race.mjs). Every critical section, logged on the shared
// monotonic clock, is alone on its key, and the fencing tokens of a key
// only grow; on SQLite, 2 more waiters a process ask in bursts, whose attempts
// go to the store together (helpers/race-child.mjs); on etcd, a 3-member
// cluster's leader is SIGKILLed mid-run and started again. (The soak runs the same
// for 40 s on each store.) A hand-over
// held in flight to the worst moment, deterministically, is the line
// contract's (stores/contract-line.mjs).

import { test, after } from 'node:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { redisForTests } from '../../support/servers.mjs'
import { postgresForTests } from '../../support/postgres.mjs'
import { mariadbForTests } from '../../support/mariadb.mjs'
import { raceWithAborts, MYSQL_PER_SECOND, ETCD_PER_SECOND } from '../helpers/race.mjs'
import { startEtcd, leaderKilled } from '../../support/etcd.mjs'
import { lacking } from '../helpers/tools.mjs'

const SECONDS = 6
const tell = (t, seen) =>
  t.diagnostic(`${seen.sections} critical sections, ${seen.aborted} waits aborted, ${seen.killed} processes killed: ${seen.overlaps} overlaps, ${seen.backwards} tokens back`)
const redis = await redisForTests()
const postgres = await postgresForTests()
const mariadb = await mariadbForTests()
const sqlite = mkdtempSync(join(tmpdir(), 'keel-race-'))
after(async () => {
  await redis.close()
  await postgres.close()
  await mariadb.close()
  rmSync(sqlite, { recursive: true, force: true })
})

test(`RedisLockStore: waits aborted at random across 4 processes, some killed: never two holders (${SECONDS} s)`, async (t) => {
  tell(t, await raceWithAborts({ KEEL_TEST_STORE: 'redis', KEEL_TEST_REDIS: redis.url }, SECONDS))
})

test(`PostgresLockStore: waits aborted at random across 4 processes, some killed: never two holders (${SECONDS} s)`, async (t) => {
  tell(t, await raceWithAborts({ KEEL_TEST_STORE: 'postgres-store', KEEL_TEST_DATABASE: postgres.url }, SECONDS))
})

test(`MySqlLockStore: waits aborted at random across 4 processes, some killed: never two holders (${SECONDS} s)`, async (t) => {
  tell(t, await raceWithAborts({ KEEL_TEST_STORE: 'mysql-store', KEEL_TEST_MYSQL: mariadb.url }, SECONDS, { perSecond: MYSQL_PER_SECOND }))
})

test(`SqliteLockStore: waits aborted at random across 4 processes, some killed: never two holders (${SECONDS} s)`, async (t) => {
  tell(t, await raceWithAborts({ KEEL_TEST_STORE: 'sqlite-store', KEEL_TEST_SQLITE: join(sqlite, 'locks.db'), KEEL_RACE_BURSTS: '2' }, SECONDS))
})

const ETCD = `EtcdLockStore on 3 members, the leader SIGKILLed mid-run: waits aborted at random across 4 processes, some killed: never two holders (${SECONDS} s)`
if (!lacking(['etcd', 'etcdctl'], ETCD)) {
  test(ETCD, async (t) => {
    const etcd = await startEtcd({ size: 3 })
    try {
      const during = async (seconds) => {
        const leader = await leaderKilled(etcd, seconds * 300, seconds * 300)
        t.diagnostic(`member ${leader} (the leader) killed ${seconds * 300} ms in, started again ${seconds * 300} ms later`)
      }
      tell(t, await raceWithAborts({ KEEL_TEST_STORE: 'etcd-store', KEEL_TEST_ETCD: etcd.endpoints }, SECONDS, { during, perSecond: ETCD_PER_SECOND }))
    } finally {
      await etcd.close()
    }
  })
}
