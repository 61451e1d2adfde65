// The four scenarios. Each takes an opened implementation and returns its
// figures; times come from the system's monotonic clock, one clock for every
// process on the machine.

import { setTimeout as sleep } from 'node:timers/promises'

// The system's monotonic clock, in ms: one clock for every process on the
// machine, so sections timed in different processes compare exactly
// (performance.timeOrigin is each process's own reading of the wall clock).
const now = () => Number(process.hrtime.bigint()) / 1e6
const noop = async () => {}

/** (1) Uncontended sequential run() cycles per second. */
export async function sequential(impl, { ms }) {
  const key = `seq:${Math.random()}`
  let cycles = 0
  const end = performance.now() + ms
  while (performance.now() < end) {
    for (let i = 0; i < 64; i++) if (!(await impl.run(key, noop))) throw new Error('an uncontended run() did not run')
    cycles += 64
  }
  return { cyclesPerSec: (cycles / ms) * 1000 }
}

/** (2) 64 concurrent loops, each on its own key. */
export async function distinctKeys(impl, { ms, loops = 64 }) {
  const prefix = `distinct:${Math.random()}:`
  let cycles = 0
  const end = performance.now() + ms
  await Promise.all(
    Array.from({ length: loops }, async (_, i) => {
      const key = prefix + i
      while (performance.now() < end) {
        if (!(await impl.run(key, noop))) throw new Error('an uncontended run() did not run')
        cycles++
      }
    }),
  )
  return { cyclesPerSec: (cycles / ms) * 1000 }
}

/** Jain's fairness index: 1 when every worker got the same share, 1/n when one got all. */
export function jain(counts) {
  const sum = counts.reduce((a, b) => a + b, 0)
  const squares = counts.reduce((a, b) => a + b * b, 0)
  return squares === 0 ? 0 : (sum * sum) / (counts.length * squares)
}

/**
 * (3) 16 workers looping back-to-back on one key; each critical section awaits
 * 1 ms. Counts critical sections per second, fairness, and waits that timed out.
 */
export async function contended(impl, { ms, workers = 16, timeout, retryDelay = 50 }) {
  const key = `contended:${Math.random()}`
  const counts = new Array(workers).fill(0)
  let timeouts = 0
  let inside = 0
  let overlaps = 0
  const section = async () => {
    if (++inside > 1) overlaps++
    await sleep(1)
    inside--
  }
  const started = performance.now()
  const end = started + ms
  await Promise.all(
    counts.map(async (_, w) => {
      while (performance.now() < end) {
        if (await impl.run(key, section, { timeout, retryDelay })) counts[w]++
        else timeouts++
      }
    }),
  )
  const elapsed = performance.now() - started
  const total = counts.reduce((a, b) => a + b, 0)
  return { sectionsPerSec: (total / elapsed) * 1000, fairness: jain(counts), timeouts, overlaps }
}

/**
 * (4) A burst: `waiters` start together on one key and each needs the lock once;
 * each critical section awaits 1 ms. Returns the critical sections as
 * [start, end] pairs, so gaps can be measured across processes too.
 */
export async function burst(impl, { waiters = 16, retryDelay, key }) {
  const sections = []
  await Promise.all(
    Array.from({ length: waiters }, async () => {
      const ran = await impl.run(
        key,
        async () => {
          const start = now()
          await sleep(1)
          sections.push([start, now()])
        },
        { timeout: 30_000, retryDelay },
      )
      if (!ran) throw new Error('a burst waiter timed out')
    }),
  )
  return sections
}

/** Handoff gaps: from one release to the next holder's start, in ms. */
export function gaps(sections) {
  const sorted = [...sections].sort((a, b) => a[0] - b[0])
  const out = []
  let overlaps = 0
  for (let i = 1; i < sorted.length; i++) {
    const gap = sorted[i][0] - sorted[i - 1][1]
    if (gap < 0) overlaps++
    out.push(Math.max(gap, 0))
  }
  return { gaps: out, overlaps }
}

export function percentile(values, p) {
  if (values.length === 0) return NaN
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]
}

export const mean = (values) => values.reduce((a, b) => a + b, 0) / values.length
export const median = (values) => percentile(values, 50)
