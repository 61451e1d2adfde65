#!/usr/bin/env node
'use strict'
// The tables of docs/performance.md, made from what the benchmarks last wrote:
// bench/results.json (`npm run bench`), bench/kinds-results.json
// (bench/kinds.mjs), bench/features.json (`npm run bench:features`) and
// bench/features-against.json (`npm run bench:features -- --against <commit>`) and
// bench/slices.json (`npm run bench:slices`). Each
// table sits between `<!-- perf-table:NAME -->` and `<!-- /perf-table:NAME -->`.
//   node scripts/perf-table.js           rewrites the tables in the page
//   node scripts/perf-table.js --check   exits 1 if the page differs from the files
// __test__/package/docs.test.mjs checks the page, so it cannot disagree with the last run.

const { readFileSync, writeFileSync } = require('node:fs')
const { join } = require('node:path')

const root = join(__dirname, '..')
const page = join(root, 'docs', 'performance.md')
const read = (/** @type {string} */ file) => JSON.parse(readFileSync(join(root, 'bench', file), 'utf8'))

/** The names bench/ gives the implementations, as the page shows them (ours in bold). */
const NAMES = {
  'keel memory': '**keel, `MemoryLockStore`**',
  'plain JS memory': 'plain JS, `Map` (baseline)',
  'verrou memory': '`@verrou/core` memory',
  'async-mutex': '`async-mutex` (no TTL, one process)',
  'keel RedisLockStore': '**keel, `RedisLockStore`**',
  "keel + docs' ioredis store": "**keel + docs' ioredis store**",
  'plain JS + ioredis': 'plain JS + ioredis (baseline)',
  'redis-semaphore': '`redis-semaphore` Mutex',
  redlock: '`@sesamecare-oss/redlock`',
  'verrou redis': '`@verrou/core` redis',
  'bare ioredis SET NX + EVAL': 'bare ioredis `SET NX` + `EVAL` (floor)',
  'keel PostgresLockStore': '**keel, `PostgresLockStore`**',
  "keel + docs' database store": "**keel + docs' database store**",
  'plain JS + docs\' database store': "plain JS + docs' database store (baseline)",
  'keel MySqlLockStore': '**keel, `MySqlLockStore`**',
  'plain JS + mysql2 (baseline)': 'plain JS + mysql2 (baseline)',
  'keel SqliteLockStore': '**keel, `SqliteLockStore`**',
  'plain JS + better-sqlite3 (baseline)': 'plain JS + better-sqlite3 (baseline)',
  'proper-lockfile': '`proper-lockfile` (a folder per key)',
  'keel EtcdLockStore': '**keel, `EtcdLockStore`**',
  'etcd3 lock': '`etcd3` lock (baseline)',
  'keel MemoryLockStore': '**keel, `MemoryLockStore`**',
  'keel + read-write example store': '**keel + the read-write example store** (`examples/`)',
  'redis-semaphore Semaphore': '`redis-semaphore` `Semaphore`',
}
const name = (/** @type {string} */ n) => NAMES[/** @type {keyof NAMES} */ (n)] ?? n

/** @param {number | undefined} n */
const rate = (n) => (n === undefined ? '' : n >= 10_000 ? `${(n / 1000).toFixed(1)}k` : String(Math.round(n)))
/** @param {number | undefined} n */
const ratio = (n) => (n === undefined ? '' : ` (${n.toFixed(2)}x)`)
/** @param {number | undefined} n @param {number} digits */
const fixed = (n, digits) => (n === undefined ? '' : n.toFixed(digits))
/** @param {number | undefined} n */
const count = (n) => (n === undefined ? '' : Math.round(n).toLocaleString('en-US'))
const day = (/** @type {string} */ iso) => `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`
/** @param {string[]} cells */
const row = (cells) => `| ${cells.join(' | ')} |`

/** @param {any} r a row of scenario 5 */
const across = (r) =>
  r
    ? `${Math.round(r.sectionsPerSec)}, ${fixed(r.fairness, 2)}, ${Math.round(r.timeouts)}` +
      `${r.attemptsPerSection === undefined || r.attemptsPerSection === null ? '' : `, ${fixed(r.attemptsPerSection, 2)}`}` +
      `${r.overlaps ? `, **${r.overlaps} overlaps**` : ''}`
    : ''

/** @param {any} results bench/results.json */
function lockTable(results) {
  const s = results.scenarios
  const at = (/** @type {string} */ prefix) => Object.entries(s).find(([k]) => k.startsWith(prefix))?.[1] ?? {}
  const [one, two, three, five] = [at('1 '), at('2 '), at('3 '), at('5 ')]
  const burst = (/** @type {string} */ title) => s[title] ?? {}
  const gaps = ['4 burst, retryDelay 50', '4 burst, retryDelay 5', '4 burst, 4 processes, retryDelay 50', '4 burst, 4 processes, retryDelay 5']
  const names = Object.keys(one)
  for (const table of [two, three, ...gaps.map(burst), five]) for (const n of Object.keys(table)) if (!names.includes(n)) names.push(n)
  const lines = [
    `Results of ${day(results.date)}: ${results.machine}; ${results.settings.rounds} rounds. In brackets: the median of per-round ratios to the plain-JS baseline on the same backend.`,
    '',
    row([
      'implementation',
      '(1) sequential, cycles/s',
      '(2) 64 keys, cycles/s',
      'CPU µs per cycle, (1) / (2)',
      '(3) sections/s, fairness, timeouts',
      '(4) gap mean / p99 ms, `retryDelay` 50',
      '`retryDelay` 5',
      '4 processes, `retryDelay` 50',
      '4 processes, `retryDelay` 5',
      '(5) 4 processes: sections/s, fairness, timeouts, attempts per section',
    ]),
    row(Array(10).fill('---')),
  ]
  for (const n of names) {
    const [a, b, c] = [one[n], two[n], three[n]]
    const gap = (/** @type {string} */ title) => {
      const g = burst(title)[n]
      return g ? `${fixed(g.gapMean, 2)} / ${fixed(g.gapP99, 2)}${g.overlaps ? `, **${g.overlaps} overlaps**` : ''}` : ''
    }
    lines.push(
      row([
        name(n),
        a ? `${rate(a.cyclesPerSec)}${ratio(a.vsBaseline)}` : '',
        b ? `${rate(b.cyclesPerSec)}${ratio(b.vsBaseline)}` : '',
        a || b ? `${fixed(a?.cpuUsPerCycle, 1)} / ${fixed(b?.cpuUsPerCycle, 1)}` : '',
        c ? `${Math.round(c.sectionsPerSec)}, ${fixed(c.fairness, 2)}, ${c.timeouts}${c.overlaps ? `, **${c.overlaps} overlaps**` : ''}` : '',
        ...gaps.map(gap),
        across(five[n]),
      ]),
    )
  }
  const { ceiling, memory } = results
  if (ceiling) {
    lines.push(
      '',
      `\`redis-benchmark\`, a lock cycle (\`SET NX PX\`, then the release script): ${rate(ceiling[1])} cycles/s at 1 client ` +
        `and ${rate(ceiling[64])} at 64; pipelined 16 deep, ${rate(ceiling.pipelined[1])} and ${rate(ceiling.pipelined[64])}.`,
    )
  }
  if (memory) {
    lines.push(
      '',
      `Memory: a process that locks and releases a million distinct keys and then leaves a million more to expire goes ` +
        `from ${memory.start.rss} MB to ${memory.afterExpired.rss} MB resident once they expired (+${memory.growthMb} MB; ` +
        `the store ends with ${memory.entriesLeft} entries).`,
    )
  }
  return lines.join('\n')
}

/** @param {any} kinds bench/kinds-results.json */
function kindsTable(kinds) {
  const s = kinds.scenarios
  const at = (/** @type {string} */ prefix) => Object.entries(s).find(([k]) => k.startsWith(prefix))?.[1] ?? {}
  const [a, b, c] = [at('A '), at('B '), at('C ')]
  const names = [...new Set([...Object.keys(a), ...Object.keys(b), ...Object.keys(c)])]
  const peerLast = [...names.filter((n) => n.startsWith('keel')), ...names.filter((n) => !n.startsWith('keel'))]
  const lines = [
    `Results of ${day(kinds.date)}: ${kinds.machine}; ${kinds.settings.rounds} rounds. In brackets: the median of per-round ratios to \`redis-semaphore\`.`,
    '',
    row(['', 'A cycles/s', 'B sections/s', 'B fairness', 'B timeouts', 'C reads/s', 'C writes/s', 'C writer timeouts']),
    row(Array(8).fill('---')),
  ]
  for (const n of peerLast) {
    const [x, y, z] = [a[n], b[n], c[n]]
    const vs = (/** @type {any} */ r) => (r?.vsPeer !== undefined && !n.includes('Memory') ? ratio(r.vsPeer) : '')
    lines.push(
      row([
        name(n),
        x ? `${count(x.cyclesPerSec)}${vs(x)}` : '',
        y ? `${count(y.sectionsPerSec)}${vs(y)}` : '',
        y ? fixed(y.fairness, 3) : '',
        y ? String(y.timeouts) : '',
        z ? count(z.readsPerSec) : '',
        z ? count(z.writesPerSec) : '',
        z ? String(z.writerTimeouts) : '',
      ]),
    )
  }
  return lines.join('\n')
}

/** How the features bench's variants head their columns. */
const VARIANTS = {
  idle: 'idle',
  'reads fencingToken': 'reads `fencingToken`',
  'reads signal': 'reads `signal`',
  'gives a signal': 'gives a `signal`',
  traced: 'traced',
}

/** @param {any} features bench/features.json, or features-against.json */
function featuresTable(features) {
  const variants = Object.keys(VARIANTS).filter((v) => features.rows.some((/** @type {any} */ r) => r.variant === v))
  /** @type {Map<string, Record<string, number>>} */
  const rows = new Map()
  for (const r of features.rows) {
    const backend = { memory: 'memory', redis: '`RedisLockStore`', postgres: '`PostgresLockStore`' }[/** @type {string} */ (r.backend)] ?? r.backend
    const key = `${backend}, (${r.scenario.slice(0, 1)}) ${r.scenario.startsWith('1') ? 'sequential' : '64 keys'}`
    rows.set(key, { ...rows.get(key), [r.variant]: r.vsReference })
  }
  const lines = [
    `Results of ${day(features.when)}; ${features.settings.rounds} rounds, medians of per-round ratios to commit \`${features.reference}\`.`,
    '',
    row(['backend, scenario', ...variants.map((v) => VARIANTS[/** @type {keyof VARIANTS} */ (v)])]),
    row(Array(variants.length + 1).fill('---')),
  ]
  for (const [key, v] of rows) {
    lines.push(row([key, ...variants.map((variant, i) => (v[variant] === undefined ? '' : i === 0 ? `**${v[variant].toFixed(2)}x**` : `${v[variant].toFixed(2)}x`))]))
  }
  return lines.join('\n')
}

/** @param {any} slices bench/slices.json (`npm run bench:slices`) */
function slicesTable(slices) {
  const { repetitions, ms, sliceMs } = slices.settings
  const lines = [
    `Results of ${day(slices.date)}; ${repetitions} repetitions of ${ms / 1000} s in ${sliceMs} ms slices, medians of the ratios.`,
    '',
    row(['ours, against the baseline', '(2) 64 keys', '(6) sequential, 1,024 keys']),
    row(['---', '---', '---']),
  ]
  for (const { ours, baseline, scenarios } of Object.values(slices.pairs)) {
    const cell = (/** @type {any} */ s) => `**${s.ratio.toFixed(2)}x** (${rate(s.ours)} vs ${rate(s.baseline)} cycles/s)`
    lines.push(row([`${name(ours)} against ${name(baseline)}`, ...Object.values(scenarios).map(cell)]))
  }
  return lines.join('\n')
}

/** Every generated table, by its marker name. */
function tables() {
  return {
    lock: lockTable(read('results.json')),
    kinds: kindsTable(read('kinds-results.json')),
    features: featuresTable(read('features.json')),
    against: featuresTable(read('features-against.json')),
    slices: slicesTable(read('slices.json')),
  }
}

/** The page with every table between its markers replaced by what the files say. */
function render(text = readFileSync(page, 'utf8')) {
  for (const [marker, table] of Object.entries(tables())) {
    const open = `<!-- perf-table:${marker} -->`
    const close = `<!-- /perf-table:${marker} -->`
    const from = text.indexOf(open)
    const to = text.indexOf(close)
    if (from < 0 || to < from) throw new Error(`docs/performance.md has no ${open} ... ${close}`)
    text = `${text.slice(0, from + open.length)}\n${table}\n${text.slice(to)}`
  }
  return text
}

module.exports = { render, tables }

if (require.main === module) {
  const before = readFileSync(page, 'utf8')
  const after = render(before)
  if (process.argv.includes('--check')) {
    if (after !== before) {
      console.error('docs/performance.md differs from bench/: run node scripts/perf-table.js')
      process.exit(1)
    }
  } else if (after !== before) {
    writeFileSync(page, after)
    console.log('docs/performance.md: tables rewritten from bench/')
  }
}
