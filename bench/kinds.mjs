// npm run bench, second part [-- --quick]: semaphores and read-write locks,
// side by side in one run on a redis-server and a PostgreSQL of its own, implementations
// interleaved in rounds and reported as medians (as bench/run.mjs does).
//   A  the uncontended cycle: acquire + release of a limit-4 semaphore, one after another
//   B  16 workers on a limit-4 semaphore, 1 ms sections: sections/s, fairness, timeouts
//   C  16 readers and 2 writers on one key, 1 ms sections: sections/s of each, writer timeouts
// Results go to bench/kinds-results.json.

import { writeFileSync } from 'node:fs'
import { cpus, totalmem } from 'node:os'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { Semaphore as RedisSemaphore } from 'redis-semaphore'
import { semaphore, readLock, writeLock, setLockStore, MemoryLockStore, RedisLockStore, PostgresLockStore } from '@shaferllc/keel/core'
import { startRedis } from '../support/servers.mjs'
import { startPostgres } from '../support/postgres.mjs'
import { jain, median } from './scenarios.mjs'
// The docs' ioredis store, compiled from the test fixture (npm run bench compiles it).
import { redisLockStore } from '../__test__/fixtures/dist/docs-redis.js'
import { redisReadWriteStore } from '../examples/read-write-store.mjs'

const quick = process.argv.includes('--quick')
const settings = quick ? { rounds: 1, ms: 300, contendedMs: 1_500 } : { rounds: 3, ms: 1_500, contendedMs: 4_000 }
const TTL = 30_000
const LIMIT = 4

const server = await startRedis()
const postgres = await startPostgres({ durable: true })

/** Our semaphore and read-write lock on `store`. */
function keel(store) {
  return {
    install: () => setLockStore(store),
    permit: (key, fn, options) => semaphore(key, LIMIT, TTL).run(fn, options).then(([ran]) => ran),
    read: (key, fn, options) => readLock(key, TTL).run(fn, options).then(([ran]) => ran),
    write: (key, fn, options) => writeLock(key, TTL).run(fn, options).then(([ran]) => ran),
  }
}

const IMPLEMENTATIONS = {
  'keel MemoryLockStore': async () => ({ ...keel(new MemoryLockStore()), close() {} }),
  'keel RedisLockStore': async () => {
    const store = new RedisLockStore(server.url)
    return { ...keel(store), close: () => store.close() }
  },
  'keel PostgresLockStore': async () => {
    const store = new PostgresLockStore(postgres.url)
    return { ...keel(store), close: () => store.close() }
  },
  "keel + docs' ioredis store": async () => {
    const client = new Redis(server.url)
    return { ...keel(redisLockStore(client)), close: () => client.quit(), read: undefined, write: undefined }
  },
  // The docs' store with the read-write methods of examples/read-write-store.mjs (its permits
  // are the docs' store's permit slots above).
  'keel + read-write example store': async () => {
    const client = new Redis(server.url)
    return { ...keel(redisReadWriteStore(client)), close: () => client.quit(), permit: undefined }
  },
  // Used as its README shows; its retryInterval stays at its default (10 ms).
  'redis-semaphore Semaphore': async () => {
    const client = new Redis(server.url)
    return {
      async permit(key, fn, { timeout }) {
        // One attempt is what timeout 0 means (an acquireTimeout of 0 would not try at all).
        const waiting = timeout === 0 ? { acquireAttemptsLimit: 1 } : { acquireTimeout: timeout }
        const s = new RedisSemaphore(client, key, LIMIT, { lockTimeout: TTL, refreshInterval: 0, ...waiting })
        if (!(await s.tryAcquire())) return false
        try {
          await fn()
        } finally {
          await s.release()
        }
        return true
      },
      close: () => client.quit(),
    }
  },
}

/** A: uncontended cycles per second, and this process's CPU per cycle. */
async function uncontended(impl) {
  const key = `kinds-seq:${Math.random()}`
  const noop = async () => {}
  let cycles = 0
  const cpu = process.cpuUsage()
  const end = performance.now() + settings.ms
  while (performance.now() < end) {
    for (let i = 0; i < 32; i++) if (!(await impl.permit(key, noop, { timeout: 0 }))) throw new Error('an uncontended permit was refused')
    cycles += 32
  }
  const used = process.cpuUsage(cpu)
  return { cyclesPerSec: (cycles / settings.ms) * 1000, cpuUsPerCycle: (used.user + used.system) / cycles }
}

/** B: 16 workers on a limit-4 semaphore, 1 ms sections. */
async function crowded(impl) {
  const key = `kinds-crowd:${Math.random()}`
  const counts = new Array(16).fill(0)
  let timeouts = 0
  let inside = 0
  let most = 0
  const section = async () => {
    most = Math.max(most, ++inside)
    await sleep(1)
    inside--
  }
  const started = performance.now()
  const end = started + settings.contendedMs
  const timeout = settings.contendedMs / 2
  await Promise.all(
    counts.map(async (_, w) => {
      while (performance.now() < end) {
        if (await impl.permit(key, section, { timeout, retryDelay: 50 })) counts[w]++
        else timeouts++
      }
    }),
  )
  const total = counts.reduce((a, b) => a + b, 0)
  if (most > LIMIT) throw new Error(`${most} holders of a limit-${LIMIT} semaphore`)
  return { sectionsPerSec: (total / (performance.now() - started)) * 1000, fairness: jain(counts), timeouts, most }
}

/** C: 16 readers and 2 writers looping on one key, 1 ms sections. */
async function mixed(impl) {
  const key = `kinds-rw:${Math.random()}`
  let readers = 0
  let writers = 0
  let overlaps = 0
  const done = { read: 0, write: 0 }
  let writerTimeouts = 0
  const section = (writing) => async () => {
    if (writing) {
      if (++writers > 1 || readers > 0) overlaps++
    } else if (++readers > 0 && writers > 0) {
      overlaps++
    }
    await sleep(1)
    if (writing) writers--
    else readers--
  }
  const started = performance.now()
  const end = started + settings.contendedMs
  const timeout = settings.contendedMs / 2
  const loop = async (writing) => {
    while (performance.now() < end) {
      const run = writing ? impl.write : impl.read
      if (await run(key, section(writing), { timeout, retryDelay: 50 })) done[writing ? 'write' : 'read']++
      else if (writing) writerTimeouts++
    }
  }
  await Promise.all([...Array.from({ length: 16 }, () => loop(false)), loop(true), loop(true)])
  const elapsed = performance.now() - started
  if (overlaps > 0) throw new Error(`${overlaps} sections overlapped a writer`)
  return { readsPerSec: (done.read / elapsed) * 1000, writesPerSec: (done.write / elapsed) * 1000, writerTimeouts }
}

const SCENARIOS = [
  ['A uncontended limit-4 semaphore cycle', uncontended, (impl) => impl.permit],
  ['B 16 workers, limit-4 semaphore, 1 ms sections', crowded, (impl) => impl.permit],
  ['C 16 readers + 2 writers, 1 ms sections', mixed, (impl) => impl.read && impl.write],
]

const opened = {}
for (const [name, open] of Object.entries(IMPLEMENTATIONS)) opened[name] = await open()
const names = Object.keys(opened)
const results = {}
for (let round = 0; round < settings.rounds; round++) {
  const order = names.map((_, i) => names[(i + round) % names.length])
  for (const [scenario, measure, applies] of SCENARIOS) {
    for (const name of order.filter((n) => applies(opened[n]))) {
      opened[name].install?.()
      ;((results[scenario] ??= {})[name] ??= []).push(await measure(opened[name]))
    }
  }
  process.stderr.write(`kinds: round ${round + 1}/${settings.rounds} done\n`)
}
for (const impl of Object.values(opened)) await impl.close()
await server.close()
await postgres.close()

const report = {
  date: new Date().toISOString(),
  machine: `${cpus().length} cores (${cpus()[0]?.model?.trim()}), ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}`,
  settings,
  scenarios: {},
}
const peer = 'redis-semaphore Semaphore'
for (const [scenario, byName] of Object.entries(results)) {
  report.scenarios[scenario] = Object.fromEntries(
    Object.entries(byName).map(([name, rounds]) => {
      const row = Object.fromEntries(Object.keys(rounds[0]).map((f) => [f, median(rounds.map((r) => r[f]))]))
      const headline = 'cyclesPerSec' in row ? 'cyclesPerSec' : 'sectionsPerSec' in row ? 'sectionsPerSec' : null
      const theirs = byName[peer]
      if (headline && theirs && name !== peer) row.vsPeer = median(rounds.map((r, i) => r[headline] / theirs[i][headline]))
      return [name, row]
    }),
  )
}
writeFileSync(new URL('./kinds-results.json', import.meta.url), `${JSON.stringify(report, null, 2)}\n`)

const fmt = (v, digits = 0) => (v === undefined ? '' : v.toFixed(digits))
console.log(`\n${report.date}  ${report.machine}  ${quick ? '(quick)' : ''}`)
for (const [scenario, rows] of Object.entries(report.scenarios)) {
  console.log(`\n${scenario}`)
  for (const [name, r] of Object.entries(rows)) {
    const cells =
      'readsPerSec' in r
        ? [`${fmt(r.readsPerSec)} reads/s`, `${fmt(r.writesPerSec)} writes/s`, `writer timeouts ${r.writerTimeouts}`]
        : 'sectionsPerSec' in r
          ? [`${fmt(r.sectionsPerSec)} sections/s`, `fairness ${fmt(r.fairness, 3)}`, `timeouts ${r.timeouts}`, `at most ${r.most} inside`]
          : [`${fmt(r.cyclesPerSec)} cycles/s`, `CPU ${fmt(r.cpuUsPerCycle, 1)} us/cycle`]
    if (r.vsPeer) cells.push(`${fmt(r.vsPeer, 2)}x redis-semaphore`)
    console.log(`  ${name.padEnd(30)} ${cells.join('  ')}`)
  }
}
