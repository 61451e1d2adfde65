// npm run bench:features [-- --quick]: what signal, autoExtend's bookkeeping,
// fencing tokens, cancelling a wait and tracing cost the uncontended
// scenarios (1: sequential run(), 2: 64 loops on distinct keys), measured side
// by side in one process against the package as it was before they existed
// (REFERENCE, built once into target/bench-reference/). "idle" is the current
// package with nobody reading signal or fencingToken, giving a signal, or
// subscribed to its channels; the "reads" rows read them inside every run();
// "gives a signal" passes one AbortSignal to every run(); "traced" has a
// subscriber on every channel of the lock, one that only counts. Rounds are
// interleaved; figures are medians of per-round ratios.
//
// `-- --against <commit>` measures against that commit instead (built the
// same way), to check that a change costs nothing it should not, and writes
// bench/features-against.json.

import { execFileSync } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import diagnostics from 'node:diagnostics_channel'
import * as current from '@shaferllc/keel/core'
import { sequential, distinctKeys, median } from './scenarios.mjs'
import { startRedis } from '../support/servers.mjs'
import { startPostgres } from '../support/postgres.mjs'

/** The last commit before Lock.signal, autoExtend and fencing tokens. */
const FEATURES_REFERENCE = '21103d3'
const against = process.argv.indexOf('--against')
const REFERENCE = against === -1 ? FEATURES_REFERENCE : process.argv[against + 1]
if (!REFERENCE) throw new Error('--against needs a commit')
const root = fileURLToPath(new URL('..', import.meta.url))
const quick = process.argv.includes('--quick')
const settings = quick ? { rounds: 2, ms: 300 } : { rounds: 7, ms: 1_000 }

function referencePackage() {
  const dir = join(root, 'target', 'bench-reference', REFERENCE)
  const binary = join(dir, 'keel.linux-x64-gnu.node')
  if (!existsSync(binary)) {
    process.stderr.write(`building the reference package (${REFERENCE}) into ${dir}\n`)
    rmSync(dir, { recursive: true, force: true })
    mkdirSync(dir, { recursive: true })
    const archive = execFileSync('git', ['archive', REFERENCE], { cwd: root, maxBuffer: 1 << 28 })
    execFileSync('tar', ['-x', '-C', dir], { input: archive })
    // Its own target folder: builds of the two versions do not evict each other.
    execFileSync('cargo', ['build', '--release', '--lib'], {
      cwd: dir,
      stdio: ['ignore', 'inherit', 'inherit'],
      env: { ...process.env, CARGO_TARGET_DIR: join(root, 'target', 'bench-reference', 'target') },
    })
    cpSync(join(root, 'target', 'bench-reference', 'target', 'release', 'libkeel_lock.so'), binary)
  }
  return createRequire(join(dir, 'index.js'))('./index.js')
}

const reference = referencePackage()
const server = await startRedis()
const postgres = await startPostgres({ durable: true })
const noop = async () => {}

/** A subscriber on every channel of the lock that only counts what it hears. */
let heard = 0
const count = () => heard++
const counting = { start: count, end: count, asyncStart: count, asyncEnd: count, error: count }
const TRACED = ['acquire', 'run', 'release', 'extend']
function tracing(on) {
  for (const name of TRACED) {
    const channel = diagnostics.tracingChannel(`keel:lock:${name}`)
    if (on) channel.subscribe(counting)
    else channel.unsubscribe(counting)
  }
  if (on) diagnostics.subscribe('keel:lock:lost', count)
  else diagnostics.unsubscribe('keel:lock:lost', count)
}

/**
 * One implementation: a package, its store, what run()'s callback reads, and
 * how it is called (`signal`: with one; `traced`: with the counting
 * subscriber on, which every other variant turns off).
 */
function variant(pkg, store, read, how) {
  const fn = read === 'token' ? (l) => void l.fencingToken : read === 'signal' ? (l) => void l.signal : noop
  const signal = how === 'signal' ? new AbortController().signal : undefined
  return {
    install() {
      pkg.setLockStore(store)
      tracing(how === 'traced')
    },
    run: (key, _fn, options) => pkg.lock(key, 30_000).run(fn, signal === undefined ? options : { ...options, signal }).then(([ran]) => ran),
  }
}

const backends = {
  memory: (pkg) => new pkg.MemoryLockStore(),
  redis: (pkg) => new pkg.RedisLockStore(server.url),
  postgres: (pkg) => new pkg.PostgresLockStore(postgres.url),
}
const rows = []
for (const [backend, make] of Object.entries(backends)) {
  const stores = { reference: make(reference), current: make(current) }
  const variants = {
    reference: variant(reference, stores.reference),
    idle: variant(current, stores.current),
    'reads fencingToken': variant(current, stores.current, 'token'),
    'reads signal': variant(current, stores.current, 'signal'),
    'gives a signal': variant(current, stores.current, undefined, 'signal'),
    traced: variant(current, stores.current, undefined, 'traced'),
  }
  for (const [scenario, measure] of [
    ['1 sequential', (impl) => sequential(impl, { ms: settings.ms })],
    ['2 64 distinct keys', (impl) => distinctKeys(impl, { ms: settings.ms })],
  ]) {
    const figures = Object.fromEntries(Object.keys(variants).map((n) => [n, []]))
    for (let round = 0; round < settings.rounds; round++) {
      // A different order each round, so neither version always runs first.
      const order = Object.keys(variants)
      if (round % 2) order.reverse()
      for (const name of order) {
        variants[name].install()
        figures[name].push((await measure(variants[name])).cyclesPerSec)
      }
    }
    for (const name of Object.keys(variants)) {
      rows.push({
        backend,
        scenario,
        variant: name,
        cyclesPerSec: Math.round(median(figures[name])),
        vsReference: Number(median(figures[name].map((f, i) => f / figures.reference[i])).toFixed(3)),
      })
    }
  }
  for (const s of Object.values(stores)) await s.close?.()
}
tracing(false)
await server.close()
await postgres.close()
if (heard === 0) throw new Error('the traced rows heard nothing: the channel names are wrong')

console.table(rows)
if (!quick) {
  // Against the features' reference: features.json; against another commit: features-against.json.
  writeFileSync(
    new URL(REFERENCE === FEATURES_REFERENCE ? './features.json' : './features-against.json', import.meta.url),
    `${JSON.stringify({ reference: REFERENCE, when: new Date().toISOString(), settings, rows }, null, 2)}\n`,
  )
}
