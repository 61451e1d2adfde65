// One process of the cross-process burst: opens an implementation, waits for
// the agreed start time, runs its share of waiters, prints their critical
// sections as JSON.
import { setTimeout as sleep } from 'node:timers/promises'
import { IMPLEMENTATIONS } from './implementations.mjs'
import { burst } from './scenarios.mjs'

const [name, key, retryDelay, startAt, waiters] = process.argv.slice(2)
const impl = await IMPLEMENTATIONS[name].open({ redisUrl: process.env.REDIS_URL, postgresUrl: process.env.POSTGRES_URL })
impl.install?.()
// Warm up as a long-lived process would be: one handoff on a key of its own
// (a store that follows releases opens what it follows them with now).
const warm = `${key}:warm:${process.pid}`
let release = () => {}
let holding
const started = new Promise((resolve) => (holding = resolve))
const held = impl.run(warm, () => new Promise((resolve) => ((release = resolve), holding())), { timeout: 5_000 })
await Promise.race([started, held])
const waiter = impl.run(warm, async () => {}, { timeout: 5_000, retryDelay: 5 })
await sleep(50)
release()
await Promise.all([held, waiter])
await sleep(Math.max(0, Number(startAt) - Date.now()))
const sections = await burst(impl, { key, retryDelay: Number(retryDelay), waiters: Number(waiters) })
process.stdout.write(JSON.stringify(sections))
await impl.close()
