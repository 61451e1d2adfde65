// One process of the cross-process burst: opens an implementation, waits for
// the agreed start time, runs its share of waiters, prints their critical
// sections as JSON.
import { setTimeout as sleep } from 'node:timers/promises'
import { IMPLEMENTATIONS } from './implementations.mjs'
import { burst } from './scenarios.mjs'

const [name, key, retryDelay, startAt, waiters] = process.argv.slice(2)
const impl = await IMPLEMENTATIONS[name].open({ redisUrl: process.env.REDIS_URL })
impl.install?.()
await sleep(Math.max(0, Number(startAt) - Date.now()))
const sections = await burst(impl, { key, retryDelay: Number(retryDelay), waiters: Number(waiters) })
process.stdout.write(JSON.stringify(sections))
await impl.close()
