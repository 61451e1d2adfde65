// One process of the cross-process fairness scenario: opens an
// implementation, waits for the agreed start time, loops `workers` workers on
// one key for `ms` (each section 1 ms), prints how many sections each
// worker ran, the timeouts, and every section as [start, end] (epoch ms).
import { setTimeout as sleep } from 'node:timers/promises'
import { IMPLEMENTATIONS } from './implementations.mjs'

const [name, key, startAt, ms, workers] = process.argv.slice(2)
const impl = await IMPLEMENTATIONS[name].open({
  redisUrl: process.env.REDIS_URL,
  postgresUrl: process.env.POSTGRES_URL,
  mysqlUrl: process.env.MYSQL_URL,
  sqliteDir: process.env.SQLITE_DIR,
  etcdEndpoints: process.env.ETCD_ENDPOINTS,
})
impl.install?.()
// Warm up as a long-lived process would be: connected, scripts loaded.
await impl.run(`${key}:warm:${process.pid}`, async () => {}, { timeout: 5_000 })
await sleep(Math.max(0, Number(startAt) - Date.now()))
const now = () => performance.timeOrigin + performance.now()
const end = Date.now() + Number(ms)
const counts = Array(Number(workers)).fill(0)
const sections = []
let timeouts = 0
await Promise.all(
  counts.map(async (_, w) => {
    while (Date.now() < end) {
      const ran = await impl.run(
        key,
        async () => {
          const start = now()
          await sleep(1)
          sections.push([start, now()])
        },
        { timeout: Number(ms) / 2, retryDelay: 50 },
      )
      if (ran) counts[w]++
      else timeouts++
    }
  }),
)
process.stdout.write(JSON.stringify({ counts, timeouts, sections }))
await impl.close()
