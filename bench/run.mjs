// npm run bench [-- --quick]: every lock side by side, in one run, on a
// redis-server, a PostgreSQL and a MariaDB of its own. Implementations are interleaved in rounds (the
// order rotates each round) so that load on this shared machine hits all of
// them alike; the table reports medians over rounds, and each of ours as the
// median of its per-round ratios to the plain-JS baseline on the same backend.
// Writes bench/results.json.

import { spawn, spawnSync } from 'node:child_process'
import { Redis } from 'ioredis'
import pg from 'pg'
import mysql from 'mysql2/promise'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { cpus, tmpdir, totalmem } from 'node:os'
import { fileURLToPath } from 'node:url'
import { startRedis } from '../support/servers.mjs'
import { startPostgres } from '../support/postgres.mjs'
import { startMariaDb } from '../support/mariadb.mjs'
import { startEtcd } from '../support/etcd.mjs'
import { shaOfShown } from '../support/monitor.mjs'
import { IMPLEMENTATIONS } from './implementations.mjs'
import { sequential, distinctKeys, contended, burst, gaps, percentile, mean, median } from './scenarios.mjs'

const quick = process.argv.includes('--quick')
// --scenarios=1,2: just those scenarios (by their leading number; k: semaphores and read-write locks, m: memory).
const pick = process.argv.find((a) => a.startsWith('--scenarios='))?.slice('--scenarios='.length).split(',')
// --only=a,b: just the implementations whose names contain a or b.
const only = process.argv.find((a) => a.startsWith('--only='))?.slice('--only='.length).split(',')
const settings = quick
  ? { rounds: 1, ms: 300, contendedMs: 1_500, bursts: 1, acrossMs: 1_500 }
  : { rounds: 5, ms: 1_500, contendedMs: 5_000, bursts: 3, acrossMs: 5_000 }

const server = await startRedis()
const postgres = await startPostgres({ durable: true, statements: 'top' })
process.env.REDIS_URL = server.url
process.env.POSTGRES_URL = postgres.url
const names = Object.keys(IMPLEMENTATIONS).filter((n) => !only || only.some((o) => n.includes(o)))
// When a MySQL lock is run: commits written at once, synced about once a
// second (innodb_flush_log_at_trx_commit = 2), as PostgreSQL runs here (fsync
// off), so the disk's sync time is out of the figures; bench/mysql-ceiling.mjs
// measures both settings.
const mariadb = names.some((n) => IMPLEMENTATIONS[n].backend === 'mysql') ? await startMariaDb({ durable: false }) : null
if (mariadb) process.env.MYSQL_URL = mariadb.url
// The SQLite locks' files, in a folder of the run's own (children find it in SQLITE_DIR).
const sqliteDir = mkdtempSync(join(tmpdir(), 'keel-bench-sqlite-'))
process.env.SQLITE_DIR = sqliteDir
// When an etcd lock is run: a cluster of 3 members, each syncing its log to disk on every commit,
// as etcd always does (children find it in ETCD_ENDPOINTS).
const etcd = names.some((n) => IMPLEMENTATIONS[n].backend === 'etcd') ? await startEtcd({ size: 3, timing: [] }) : null
if (etcd) process.env.ETCD_ENDPOINTS = etcd.endpoints
const urls = { redisUrl: server.url, postgresUrl: postgres.url, mysqlUrl: mariadb?.url, sqliteDir, etcdEndpoints: etcd?.endpoints }
const opened = {}
for (const name of names) opened[name] = await IMPLEMENTATIONS[name].open(urls)

const results = {} // scenario -> implementation -> [per-round figure objects]
const record = (scenario, name, figures) => {
  results[scenario] ??= {}
  ;(results[scenario][name] ??= []).push(figures)
}

/**
 * Cycles per second, and the Node process's CPU time (user + system, every
 * thread of it) per cycle, in microseconds.
 */
async function withCpu(measure) {
  const before = process.cpuUsage()
  const figures = await measure()
  const used = process.cpuUsage(before)
  const cycles = (figures.cyclesPerSec * settings.ms) / 1_000
  return { ...figures, cpuUsPerCycle: (used.user + used.system) / cycles }
}

const SCENARIOS = [
  ['1 sequential', (impl) => withCpu(() => sequential(impl, { ms: settings.ms }))],
  ['2 64 distinct keys', (impl) => withCpu(() => distinctKeys(impl, { ms: settings.ms }))],
  [
    '3 16 workers, one key',
    (impl) => contended(impl, { ms: settings.contendedMs, timeout: settings.contendedMs / 2, retryDelay: 50 }),
  ],
  ['4 burst, retryDelay 50', (impl) => burstInProcess(impl, 50)],
  ['4 burst, retryDelay 5', (impl) => burstInProcess(impl, 5)],
]

async function burstInProcess(impl, retryDelay) {
  const all = []
  let overlaps = 0
  for (let b = 0; b < settings.bursts; b++) {
    const found = gaps(await burst(impl, { retryDelay, key: `burst:${Math.random()}` }))
    all.push(...found.gaps)
    overlaps += found.overlaps
  }
  return { gapMean: mean(all), gapP99: percentile(all, 99), overlaps }
}

/**
 * Scenario 4 with the 16 waiters spread over 4 processes (the locks on a
 * server only). The same 4 processes run a first burst, not counted (as in a
 * long-lived app: connections open, statements prepared, code compiled), then
 * `settings.bursts` bursts, each on a key of its own; they exit only after
 * the last, so no exit overlaps another process's hand-overs.
 */
async function burstAcrossProcesses(name, retryDelay) {
  const children = Array.from({ length: 4 }, () => burstChild(name, 4))
  try {
    await Promise.all(children.map((child) => child.next()))
    const all = []
    let overlaps = 0
    for (let b = 0; b <= settings.bursts; b++) {
      const go = { key: `burst-processes:${Math.random()}`, startAt: Date.now() + 100, retryDelay }
      const sections = (await Promise.all(children.map((child) => child.run(go)))).flat()
      if (b === 0) continue
      const found = gaps(sections)
      all.push(...found.gaps)
      overlaps += found.overlaps
    }
    return { gapMean: mean(all), gapP99: percentile(all, 99), overlaps }
  } finally {
    await Promise.all(children.map((child) => child.end()))
  }
}

/** A burst-child.mjs process: `run(go)` sends it a burst and resolves to its sections. */
function burstChild(name, waiters) {
  const child = spawn(process.execPath, [fileURLToPath(new URL('./burst-child.mjs', import.meta.url)), name, String(waiters)], {
    env: process.env,
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  const exited = new Promise((resolve) => child.once('exit', resolve))
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]()
  const next = async () => {
    const line = await Promise.race([lines.next(), exited.then((code) => ({ done: true, code }))])
    if (line.done) throw new Error(`burst child exited ${line.code ?? (await exited)}`)
    return line.value
  }
  return {
    next,
    run: async (go) => {
      child.stdin.write(`${JSON.stringify(go)}\n`)
      return JSON.parse(await next())
    },
    end: async () => {
      child.stdin.end()
      const code = await exited
      if (code !== 0) throw new Error(`burst child exited ${code}`)
    },
  }
}

/**
 * (5) 16 workers in 4 processes looping on one key for `acrossMs` (sections
 * of 1 ms, `retryDelay` 50): sections/s, Jain's fairness over the 16,
 * timeouts, overlaps, and the lock attempts the server ran per critical
 * section, first attempts included: on Redis seen by MONITOR (a `SET ... NX`
 * on the key, or a script on it that sets it if it is free: with `NX`, or
 * after checking that it does not exist); on PostgreSQL counted by
 * pg_stat_statements (`countAttempts`); on MySQL the INSERTs clients sent,
 * in the server's general log (`countMysqlAttempts`); on a SQLite file not
 * counted.
 */
async function fairAcrossProcesses(name) {
  const key = `across:${Math.random()}`
  const { backend } = IMPLEMENTATIONS[name]
  const watching =
    backend === 'redis'
      ? await monitorAttempts(key)
      : backend === 'mysql'
        ? await countMysqlAttempts()
        : backend === 'postgres'
          ? await countAttempts()
          : { stop: () => undefined }
  const startAt = Date.now() + 2_000
  const children = Array.from({ length: 4 }, () =>
    runChild([name, key, String(startAt), String(settings.acrossMs), '4'], 'fair-child.mjs'),
  )
  const results = await Promise.all(children)
  const attempts = await watching.stop()
  const counts = results.flatMap((r) => r.counts)
  const total = counts.reduce((a, b) => a + b, 0)
  const fairness = total === 0 ? 0 : total ** 2 / (counts.length * counts.reduce((a, b) => a + b * b, 0))
  return {
    sectionsPerSec: (total / settings.acrossMs) * 1000,
    fairness,
    timeouts: results.reduce((a, r) => a + r.timeouts, 0),
    overlaps: gaps(results.flatMap((r) => r.sections)).overlaps,
    ...(attempts === undefined ? {} : { attemptsPerSection: total === 0 ? NaN : attempts / total }),
  }
}

/**
 * Counts the lock attempts PostgreSQL runs until `stop()`, which resolves to
 * them (nothing else runs then): each attempt's first statement, ours the one
 * that inserts into the lock table, the docs' store's the delete of an expired
 * row it starts every attempt with (its failed inserts are errors, which
 * pg_stat_statements does not count).
 */
async function countAttempts() {
  const client = new pg.Client(postgres.url)
  await client.connect()
  await client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements')
  await client.query('SELECT pg_stat_statements_reset()')
  return {
    async stop() {
      const { rows } = await client.query(
        `SELECT coalesce(sum(calls), 0) AS n FROM pg_stat_statements
          WHERE (query ILIKE 'WITH %INSERT INTO locks %') OR (query ILIKE 'DELETE FROM locks WHERE key = $1 AND expires_at <=%')`,
      )
      await client.end()
      return Number(rows[0].n)
    },
  }
}

/**
 * Counts the lock attempts MariaDB runs until `stop()` (nothing else runs
 * then): both MySQL locks start each attempt with one INSERT ... ON
 * DUPLICATE KEY UPDATE, which the server's general log shows as the client
 * sent it, prepared or not (keel's line procedure, sent right behind a
 * refused one, runs statements of its own, which the log leaves out and
 * the Com_insert counter would count). The log is on only meanwhile.
 */
async function countMysqlAttempts() {
  const client = await mysql.createConnection(mariadb.url)
  await client.query("SET GLOBAL log_output = 'TABLE', general_log = 1")
  await client.query('TRUNCATE mysql.general_log')
  return {
    async stop() {
      await client.query('SET GLOBAL general_log = 0')
      const [rows] = await client.query(
        "SELECT COUNT(*) AS n FROM mysql.general_log WHERE command_type IN ('Query', 'Execute') AND argument LIKE 'INSERT INTO %'",
      )
      await client.query('TRUNCATE mysql.general_log')
      await client.end()
      return Number(rows[0].n)
    },
  }
}

/** Counts the lock attempts on `key` the Redis server runs until `stop()`, which returns them. */
async function monitorAttempts(key) {
  const bodies = new Map()
  const takes = (/** @type {string} */ script) =>
    /["']set["']\s*,[^)]*["']NX["']/i.test(script) || (/["']exists["']/i.test(script) && /["']set["']/i.test(script) && !/["']del["']/i.test(script))
  // The lock's key, or a key a lock keeps it under (`mutex:<key>`).
  const onKey = (/** @type {string[]} */ keys) => keys.some((k) => k.endsWith(key))
  let attempts = 0
  const base = new Redis(server.url)
  // Scripts run from now on are sent in full first, so each is seen before its SHA is.
  await base.script('FLUSH')
  const monitor = await base.monitor()
  monitor.on('monitor', (_, args, source) => {
    // What a script runs inside is shown too: the script is the attempt.
    if (source === 'lua') return
    const [command, ...rest] = args.map(String)
    const name = command.toLowerCase()
    if (name === 'set') {
      if (onKey([rest[0]]) && rest.some((a) => a.toUpperCase() === 'NX')) attempts++
    } else if (name === 'eval' || name === 'evalsha') {
      let script = rest[0]
      if (name === 'eval') bodies.set(shaOfShown(script), script)
      else script = bodies.get(script) ?? ''
      if (onKey(rest.slice(2, 2 + Number(rest[1]))) && takes(script)) attempts++
    } else if (name === 'script' && rest[0]?.toLowerCase() === 'load') {
      bodies.set(shaOfShown(rest[1]), rest[1])
    }
  })
  return {
    stop() {
      monitor.disconnect()
      base.disconnect()
      return attempts
    },
  }
}

function runChild(args, file) {
  const child = spawn(process.execPath, [fileURLToPath(new URL(`./${file}`, import.meta.url)), ...args], {
    env: process.env,
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  let out = ''
  child.stdout.on('data', (d) => (out += d))
  return new Promise((resolve, reject) =>
    child.once('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`${file} exited ${code}`)))),
  )
}

const ceiling = redisBenchmarkCeiling()
const started = Date.now()
for (let round = 0; round < settings.rounds; round++) {
  const order = names.map((_, i) => names[(i + round) % names.length])
  for (const [scenario, run] of SCENARIOS.filter(([s]) => !pick || pick.includes(s[0]))) {
    for (const name of order) {
      opened[name].install?.()
      const figures = await run(opened[name]).catch((error) => {
        throw new Error(`${scenario}, ${name}: ${error.message}`, { cause: error })
      })
      record(scenario, name, figures)
    }
  }
  for (const retryDelay of !pick || pick.includes('4') ? [50, 5] : []) {
    for (const name of order.filter((n) => IMPLEMENTATIONS[n].backend !== 'memory')) {
      record(`4 burst, 4 processes, retryDelay ${retryDelay}`, name, await burstAcrossProcesses(name, retryDelay))
    }
  }
  if (!pick || pick.includes('5')) {
    for (const name of order.filter((n) => IMPLEMENTATIONS[n].backend !== 'memory')) {
      record('5 16 workers in 4 processes, one key', name, await fairAcrossProcesses(name))
    }
  }
  process.stderr.write(`round ${round + 1}/${settings.rounds} done (${Math.round((Date.now() - started) / 1000)} s)\n`)
}

const memory = !pick || pick.includes('m') ? memoryCheck() : null

for (const impl of Object.values(opened)) await impl.close()
await server.close()
await postgres.close()
await mariadb?.close()
await etcd?.close()
rmSync(sqliteDir, { recursive: true, force: true })

/* --------------------------------- report ---------------------------------- */

const HEADLINE = {
  '1 sequential': ['cyclesPerSec', 'cycles/s', true],
  '2 64 distinct keys': ['cyclesPerSec', 'cycles/s', true],
  '3 16 workers, one key': ['sectionsPerSec', 'sections/s', true],
}
const baselineFor = (name) =>
  names.find((n) => IMPLEMENTATIONS[n].baseline && IMPLEMENTATIONS[n].backend === IMPLEMENTATIONS[name].backend)

const report = { date: new Date().toISOString(), machine: machine(), settings, ceiling, memory, scenarios: {} }
for (const [scenario, byName] of Object.entries(results)) {
  const rows = {}
  for (const [name, rounds] of Object.entries(byName)) {
    const fields = Object.keys(rounds[0])
    const row = Object.fromEntries(fields.map((f) => [f, median(rounds.map((r) => r[f]))]))
    const headline = HEADLINE[scenario]
    const base = baselineFor(name)
    if (headline && base && base !== name && byName[base]) {
      const [field] = headline
      row.vsBaseline = median(rounds.map((r, i) => r[field] / byName[base][i][field]))
    }
    if (scenario.startsWith('4')) {
      const base4 = base && byName[base]
      if (base4 && base !== name) row.gapVsBaseline = median(rounds.map((r, i) => r.gapMean / base4[i].gapMean))
    }
    rows[name] = row
  }
  report.scenarios[scenario] = rows
}
if (ceiling) {
  for (const [scenario, field, concurrency] of [
    ['1 sequential', 'cyclesPerSec', 1],
    ['2 64 distinct keys', 'cyclesPerSec', 64],
  ]) {
    for (const [name, row] of Object.entries(report.scenarios[scenario] ?? {})) {
      const onRedis = IMPLEMENTATIONS[name].backend === 'redis'
      if (onRedis && row[field] !== undefined) row.vsCeiling = row[field] / ceiling[concurrency]
    }
  }
}
writeFileSync(new URL('./results.json', import.meta.url), `${JSON.stringify(report, null, 2)}\n`)
printTable(report)

// Semaphores and read-write locks (bench/kinds.mjs), in a process of their own: --scenarios=k picks them.
if (!pick || pick.includes('k')) {
  const kinds = spawnSync(process.execPath, [fileURLToPath(new URL('./kinds.mjs', import.meta.url)), ...(quick ? ['--quick'] : [])], {
    stdio: 'inherit',
  })
  if (kinds.status !== 0) process.exitCode = 1
}

function printTable({ scenarios }) {
  const fmt = (v, digits = 0) => (v === undefined || Number.isNaN(v) ? '' : v.toFixed(digits))
  console.log(`\n${report.date}  ${report.machine}  ${quick ? '(quick)' : ''}`)
  if (memory) {
    console.log(
      `memory: RSS ${memory.start.rss} MB at start, ${memory.afterReleased.rss} MB after 1M keys locked and released, ` +
        `${memory.whileExpiring.rss} MB with 1M more left to expire, ${memory.afterExpired.rss} MB once they expired ` +
        `(+${memory.growthMb} MB; ${memory.entriesLeft} entries left)`,
    )
  }
  if (ceiling) {
    console.log(
      `redis-benchmark ceiling (SET NX PX + EVAL): ${fmt(ceiling[1])} cycles/s at 1 client, ${fmt(ceiling[64])} at 64; ` +
        `pipelined 16 deep: ${fmt(ceiling.pipelined[1])} and ${fmt(ceiling.pipelined[64])}`,
    )
  }
  for (const [scenario, rows] of Object.entries(scenarios)) {
    console.log(`\n${scenario}`)
    for (const [name, r] of Object.entries(rows)) {
      const cells = scenario.startsWith('5')
        ? [`${fmt(r.sectionsPerSec)} sections/s`, `fairness ${fmt(r.fairness, 3)}`, `timeouts ${fmt(r.timeouts)}`, r.attemptsPerSection === undefined ? '' : `attempts/section ${fmt(r.attemptsPerSection, 2)}`, r.overlaps ? `OVERLAPS ${r.overlaps}` : '']
        : scenario.startsWith('4')
        ? [`gap mean ${fmt(r.gapMean, 2)} ms`, `p99 ${fmt(r.gapP99, 2)} ms`, r.gapVsBaseline ? `${fmt(r.gapVsBaseline, 3)}x baseline gap` : '', r.overlaps ? `OVERLAPS ${r.overlaps}` : '']
        : scenario.startsWith('3')
          ? [`${fmt(r.sectionsPerSec)} sections/s`, `fairness ${fmt(r.fairness, 3)}`, `timeouts ${r.timeouts}`, r.vsBaseline ? `${fmt(r.vsBaseline, 2)}x baseline` : '', r.overlaps ? `OVERLAPS ${r.overlaps}` : '']
          : [
              `${fmt(r.cyclesPerSec)} cycles/s`,
              r.vsBaseline ? `${fmt(r.vsBaseline, 2)}x baseline` : '',
              r.vsCeiling ? `${fmt(r.vsCeiling * 100)}% of ceiling` : '',
              `CPU ${fmt(r.cpuUsPerCycle, 1)} us/cycle`,
            ]
      console.log(`  ${name.padEnd(30)} ${cells.filter(Boolean).join('  ')}`)
    }
  }
}

/** A million keys locked and released, a million left to expire: resident memory, in a fresh process. */
function memoryCheck() {
  const r = spawnSync(process.execPath, ['--expose-gc', fileURLToPath(new URL('./memory-child.mjs', import.meta.url))], {
    encoding: 'utf8',
  })
  if (r.status !== 0) throw new Error(`memory check failed: ${r.stderr}`)
  const figures = JSON.parse(r.stdout)
  return { ...figures, growthMb: figures.afterExpired.rss - figures.start.rss }
}

function machine() {
  return `${cpus().length} cores (${cpus()[0]?.model?.trim()}), ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}`
}

/**
 * What the server can do for one lock cycle (SET NX PX, then the release
 * script), measured by redis-benchmark: at 1 and 64 clients, one command at
 * a time and pipelined 16 deep. A cycle is the two commands back to back, so
 * its rate is the harmonic combination.
 */
function redisBenchmarkCeiling() {
  const probe = spawnSync('redis-benchmark', ['--version'], { encoding: 'utf8' })
  if (probe.error) {
    process.stderr.write('redis-benchmark not found (Debian package redis-tools): no ceiling column\n')
    return null
  }
  const rate = (clients, command, pipeline = 1) => {
    const n = (quick ? 20_000 : 100_000) * (pipeline > 1 ? 4 : 1)
    const r = spawnSync(
      'redis-benchmark',
      ['-p', String(server.port), '-c', String(clients), '-n', String(n), '-r', '1000000', '-P', String(pipeline), '--csv', ...command],
      { encoding: 'utf8' },
    )
    // CSV: "test","rps","avg_latency_ms","min_latency_ms","p50","p95","p99","max"
    const fields = r.stdout.trim().split('\n').pop().split('","')
    return Number(fields.at(-7))
  }
  const release =
    'if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) end return 0'
  const out = { pipelined: {} }
  for (const clients of [1, 64]) {
    for (const [into, pipeline] of [[out, 1], [out.pipelined, 16]]) {
      const set = rate(clients, ['SET', 'key:__rand_int__', 'owner', 'PX', '30000', 'NX'], pipeline)
      const evalRate = rate(clients, ['EVAL', release, '1', 'key:__rand_int__', 'owner'], pipeline)
      into[clients] = 1 / (1 / set + 1 / evalRate)
    }
  }
  return out
}
