// npm run bench:features [-- --quick]: what signal, autoExtend's bookkeeping
// and fencing tokens cost the uncontended scenarios (1: sequential run(), 2:
// 64 loops on distinct keys), measured side by side in one process against
// the package as it was before they existed (REFERENCE, built once into
// target/bench-reference/). "idle" is the current package with nobody reading
// signal or fencingToken; the "reads" rows read them inside every run().
// Rounds are interleaved; figures are medians of per-round ratios.
//
// `-- --against <commit>` measures against that commit instead (built the
// same way), to check that a change costs nothing it should not; nothing is
// written then.

import { execFileSync } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import * as current from '@shaferllc/keel/core'
import { sequential, distinctKeys, median } from './scenarios.mjs'
import { startRedis } from '../support/servers.mjs'

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
const noop = async () => {}

/** One implementation: a package, its store, and what run()'s callback reads. */
function variant(pkg, store, read) {
  const fn = read === 'token' ? (l) => void l.fencingToken : read === 'signal' ? (l) => void l.signal : noop
  return {
    install: () => pkg.setLockStore(store),
    run: (key, _fn, options) => pkg.lock(key, 30_000).run(fn, options).then(([ran]) => ran),
  }
}

const backends = {
  memory: (pkg) => new pkg.MemoryLockStore(),
  redis: (pkg) => new pkg.RedisLockStore(server.url),
}
const rows = []
for (const [backend, make] of Object.entries(backends)) {
  const stores = { reference: make(reference), current: make(current) }
  const variants = {
    reference: variant(reference, stores.reference),
    idle: variant(current, stores.current),
    'reads fencingToken': variant(current, stores.current, 'token'),
    'reads signal': variant(current, stores.current, 'signal'),
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
await server.close()

console.table(rows)
if (!quick && REFERENCE === FEATURES_REFERENCE) {
  writeFileSync(
    new URL('./features.json', import.meta.url),
    `${JSON.stringify({ reference: REFERENCE, when: new Date().toISOString(), settings, rows }, null, 2)}\n`,
  )
}
