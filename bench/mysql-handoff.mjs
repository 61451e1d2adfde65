// node bench/mysql-handoff.mjs [--samples=20]: how soon a waiter in another
// process gets a MySQL lock once its holder lets it go. On a MariaDB of its
// own at the server's defaults (durable: every commit synced), for each lock
// two processes: A takes a key, B waits for it with
// `acquire({ timeout: 30000, retryDelay })`, and after a pause of 250 ms plus
// a random part of `retryDelay` (so a poll's phase is random) A reads the
// clock and releases; B reads the clock once its acquire resolves. The gap is
// B's reading less A's, on the system's monotonic clock (one clock for every
// process on the machine; performance.timeOrigin is each process's own
// reading of the wall clock). Two uncounted hand-overs first, then
// `samples` for each retryDelay in [50, 1000, 5000]. keel's MySqlLockStore
// (its line: the release hands the lock to B's process and ends the wait of
// its ear) against the plain-JS baseline over mysql2, which polls. Writes
// bench/mysql-handoff.json and prints a table.

import { spawn } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { cpus } from 'node:os'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'

const TTL = 30_000
const RETRY_DELAYS = [50, 1_000, 5_000]
const WARM = 2
const now = () => Number(process.hrtime.bigint()) / 1e6

/** A lock on `key` for one of the two implementations, by name: { acquire(options), release() }. */
async function opener(name, url) {
  if (name === 'keel MySqlLockStore') {
    const { lock, setLockStore, MySqlLockStore } = await import('@shaferllc/keel/core')
    const store = new MySqlLockStore(url)
    setLockStore(store)
    return { lockOn: (key) => lock(key, TTL), close: () => store.close() }
  }
  const { default: mysql } = await import('mysql2/promise')
  const { PlainLock, PlainMySqlStore } = await import('./baseline.mjs')
  const pool = mysql.createPool({ uri: url, connectionLimit: 4 })
  const store = new PlainMySqlStore(pool)
  await store.createTable()
  return { lockOn: (key) => new PlainLock(store, key, TTL), close: () => pool.end() }
}

/**
 * A child: reads `{ op, key, retryDelay }` lines. `hold`: takes the key,
 * answers `{}`. `release`: reads the clock, releases, answers `{ at }`.
 * `wait`: answers `{}` once its acquire is under way, then `{ at, ok }`
 * when it resolves (having released again).
 */
async function child(name) {
  const impl = await opener(name, process.env.MYSQL_URL)
  const say = (o) => process.stdout.write(`${JSON.stringify(o)}\n`)
  let held = null
  say({ ready: true })
  for await (const line of createInterface({ input: process.stdin })) {
    const { op, key, retryDelay } = JSON.parse(line)
    if (op === 'hold') {
      held = impl.lockOn(key)
      if (!(await held.acquire())) throw new Error(`A could not take ${key}`)
      say({})
    } else if (op === 'release') {
      const at = now()
      await held.release()
      held = null
      say({ at })
    } else if (op === 'wait') {
      const l = impl.lockOn(key)
      const acquiring = l.acquire({ timeout: 30_000, retryDelay })
      say({})
      const ok = await acquiring
      const at = now()
      if (ok) await l.release()
      say({ at, ok })
    }
  }
  await impl.close()
}

/** A child process of this file for `name`: `send(o)` writes a line, `next()` reads one. */
function spawnChild(name, url) {
  const proc = spawn(process.execPath, [fileURLToPath(import.meta.url), '--child', name], {
    env: { ...process.env, MYSQL_URL: url },
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  const exited = new Promise((resolve) => proc.once('exit', resolve))
  const lines = createInterface({ input: proc.stdout })[Symbol.asyncIterator]()
  const next = async () => {
    const line = await Promise.race([lines.next(), exited.then((code) => ({ done: true, code }))])
    if (line.done) throw new Error(`${name} child exited ${line.code}`)
    return JSON.parse(line.value)
  }
  return {
    next,
    send: (o) => proc.stdin.write(`${JSON.stringify(o)}\n`),
    end: async () => {
      proc.stdin.end()
      if ((await exited) !== 0) throw new Error(`${name} child failed`)
    },
  }
}

/** One hand-over from A to B: the gap in ms (negative: B had it before A let go). */
async function handOver(a, b, retryDelay) {
  const key = `handoff:${retryDelay}:${Math.random()}`
  a.send({ op: 'hold', key })
  await a.next()
  b.send({ op: 'wait', key, retryDelay })
  await b.next()
  await sleep(250 + Math.random() * retryDelay)
  a.send({ op: 'release' })
  const [{ at: released }, { at: acquired, ok }] = await Promise.all([a.next(), b.next()])
  if (!ok) throw new Error(`B timed out waiting for ${key}`)
  return acquired - released
}

async function measure(name, url, samples) {
  const [a, b] = [spawnChild(name, url), spawnChild(name, url)]
  await Promise.all([a.next(), b.next()])
  const out = {}
  try {
    for (const retryDelay of RETRY_DELAYS) {
      const gaps = []
      for (let i = 0; i < WARM + samples; i++) {
        const gap = await handOver(a, b, retryDelay)
        if (i >= WARM) gaps.push(gap)
      }
      out[retryDelay] = summary(gaps)
      process.stderr.write(`${name}, retryDelay ${retryDelay}: mean ${out[retryDelay].mean.toFixed(2)} ms\n`)
    }
  } finally {
    await Promise.all([a.end(), b.end()])
  }
  return out
}

function summary(gaps) {
  const sorted = [...gaps].sort((x, y) => x - y)
  const at = (p) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]
  const round = (v) => Math.round(v * 1000) / 1000
  return {
    mean: round(gaps.reduce((s, g) => s + g, 0) / gaps.length),
    p50: round(at(50)),
    p99: round(at(99)),
    min: round(sorted[0]),
    max: round(sorted.at(-1)),
    overlaps: gaps.filter((g) => g < 0).length,
    gaps: gaps.map(round),
  }
}

if (process.argv[2] === '--child') {
  await child(process.argv[3])
} else {
  const samples = Number(process.argv.find((a) => a.startsWith('--samples='))?.slice(10) ?? 20)
  const { startMariaDb } = await import('../support/mariadb.mjs')
  const db = await startMariaDb({ durable: true })
  const results = {}
  try {
    for (const name of ['keel MySqlLockStore', 'plain JS + mysql2 (baseline)']) results[name] = await measure(name, db.url, samples)
  } finally {
    await db.close()
  }
  const machine = `${cpus().length} cores (${cpus()[0]?.model?.trim()}), Node ${process.version}`
  const report = { date: new Date().toISOString(), machine, samples, retryDelays: RETRY_DELAYS, results }
  writeFileSync(new URL('./mysql-handoff.json', import.meta.url), `${JSON.stringify(report, null, 2)}\n`)
  console.log(`\n${report.date}  ${machine}  ${samples} hand-overs each; gap ms from A's release to B's acquire`)
  console.log(`${'implementation'.padEnd(30)} ${'retryDelay'.padStart(10)} ${'mean'.padStart(9)} ${'p50'.padStart(9)} ${'p99'.padStart(9)}`)
  for (const [name, byDelay] of Object.entries(results)) {
    for (const [delay, r] of Object.entries(byDelay)) {
      const cells = [r.mean, r.p50, r.p99].map((v) => v.toFixed(2).padStart(9)).join(' ')
      console.log(`${name.padEnd(30)} ${delay.padStart(10)} ${cells}${r.overlaps ? `  OVERLAPS ${r.overlaps}` : ''}`)
    }
  }
}
