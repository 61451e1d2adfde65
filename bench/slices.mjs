// npm run bench:slices [-- --quick] [-- --backends=redis,memory]: each of our
// locks against the plain-JS baseline on its backend, side by side in one
// process, taking turns in 50 ms slices, so whatever else the machine does
// hits both alike. Two scenarios: (2) 64 loops, each on a key of its own, and
// (6) sequential run() over 1,024 keys in turn. Each repetition runs both for
// a few seconds; the figure is the median over repetitions of ours / the
// baseline's cycles. Writes bench/slices.json.

import { writeFileSync } from 'node:fs'
import { cpus } from 'node:os'
import { startRedis } from '../support/servers.mjs'
import { IMPLEMENTATIONS } from './implementations.mjs'
import { median } from './scenarios.mjs'

const quick = process.argv.includes('--quick')
const settings = quick ? { repetitions: 2, ms: 1_500, sliceMs: 50 } : { repetitions: 5, ms: 4_000, sliceMs: 50 }
const PAIRS = {
  redis: ['keel RedisLockStore', 'plain JS + ioredis'],
  memory: ['keel memory', 'plain JS memory'],
}
const backends = process.argv.find((a) => a.startsWith('--backends='))?.slice('--backends='.length).split(',') ?? Object.keys(PAIRS)
const noop = async () => {}

/** (2) 64 loops, each on its own key, for `ms`: the cycles done. */
async function loops64(impl, ms, tag) {
  const end = performance.now() + ms
  let cycles = 0
  await Promise.all(
    Array.from({ length: 64 }, async (_, i) => {
      const key = `slices:64:${tag}:${i}`
      while (performance.now() < end) {
        if (!(await impl.run(key, noop))) throw new Error('an uncontended run() did not run')
        cycles++
      }
    }),
  )
  return cycles
}

/** (6) One loop over 1,024 keys in turn, for `ms`: the cycles done. */
async function keys1024(impl, ms, tag, state) {
  const end = performance.now() + ms
  let cycles = 0
  while (performance.now() < end) {
    if (!(await impl.run(`slices:1024:${tag}:${state.next++ % 1_024}`, noop))) throw new Error('an uncontended run() did not run')
    cycles++
  }
  return cycles
}

const SCENARIOS = { '2 64 distinct keys': loops64, '6 sequential over 1,024 keys': keys1024 }

const server = backends.includes('redis') ? await startRedis() : null
const report = { date: new Date().toISOString(), machine: `${cpus().length} x ${cpus()[0]?.model}`, settings, pairs: {} }
for (const backend of backends) {
  const [ours, baseline] = PAIRS[backend]
  const opened = [await IMPLEMENTATIONS[ours].open({ redisUrl: server?.url }), await IMPLEMENTATIONS[baseline].open({ redisUrl: server?.url })]
  const rows = {}
  for (const [scenario, measure] of Object.entries(SCENARIOS)) {
    const ratios = []
    const perSec = [[], []]
    for (let r = 0; r < settings.repetitions; r++) {
      const cycles = [0, 0]
      const states = [{ next: 0 }, { next: 0 }]
      const until = performance.now() + settings.ms
      // Who goes first alternates by repetition.
      const order = r % 2 === 0 ? [0, 1] : [1, 0]
      while (performance.now() < until) {
        for (const i of order) {
          opened[i].install?.()
          cycles[i] += await measure(opened[i], settings.sliceMs, `${r}:${i}`, states[i])
        }
      }
      ratios.push(cycles[0] / cycles[1])
      for (const i of [0, 1]) perSec[i].push((cycles[i] / settings.ms) * 2 * 1_000)
    }
    rows[scenario] = { ours: median(perSec[0]), baseline: median(perSec[1]), ratio: median(ratios), ratios }
    process.stderr.write(`${backend}, ${scenario}: ${ours} ${median(ratios).toFixed(2)}x ${baseline} (${ratios.map((x) => x.toFixed(2)).join(', ')})\n`)
  }
  report.pairs[backend] = { ours, baseline, scenarios: rows }
  for (const impl of opened) await impl.close()
}
await server?.close()

if (!quick) writeFileSync(new URL('./slices.json', import.meta.url), `${JSON.stringify(report, null, 2)}\n`)
console.log('| backend: ours vs baseline | (2) 64 keys | (6) sequential, 1,024 keys |')
console.log('|---|---|---|')
for (const [backend, { ours, baseline, scenarios }] of Object.entries(report.pairs)) {
  const cell = (s) => `${s.ratio.toFixed(2)}x (${Math.round(s.ours)} vs ${Math.round(s.baseline)} cycles/s)`
  console.log(`| ${backend}: ${ours} vs ${baseline} | ${Object.values(scenarios).map(cell).join(' | ')} |`)
}
