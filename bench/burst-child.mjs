// One process of the cross-process burst, kept for every burst of a round as
// a long-lived app process would be: opens an implementation, says `ready`,
// then for each line `{ key, startAt, retryDelay }` on stdin waits for the
// agreed start, runs its share of waiters and prints their critical sections
// as one line of JSON. It closes the implementation and exits when stdin ends,
// which is after every process printed its last burst: no process exits while
// another still hands the lock on.
import { createInterface } from 'node:readline'
import { setTimeout as sleep } from 'node:timers/promises'
import { IMPLEMENTATIONS } from './implementations.mjs'
import { burst } from './scenarios.mjs'

const [name, waiters] = process.argv.slice(2)
const impl = await IMPLEMENTATIONS[name].open({
  redisUrl: process.env.REDIS_URL,
  postgresUrl: process.env.POSTGRES_URL,
  mysqlUrl: process.env.MYSQL_URL,
  sqliteDir: process.env.SQLITE_DIR,
  etcdEndpoints: process.env.ETCD_ENDPOINTS,
})
impl.install?.()
process.stdout.write('ready\n')
for await (const line of createInterface({ input: process.stdin })) {
  const { key, startAt, retryDelay } = JSON.parse(line)
  await sleep(Math.max(0, startAt - Date.now()))
  const sections = await burst(impl, { key, retryDelay, waiters: Number(waiters) })
  process.stdout.write(`${JSON.stringify(sections)}\n`)
}
await impl.close()
