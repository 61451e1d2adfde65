// One process of the abort race (race.mjs): workers that take a few keys
// with run(), each wait cancelled by an AbortSignal at a random moment, and
// one worker that takes them through a second store instance's own
// acquire/release, as another service sharing the server would. Every
// critical section is logged as it starts and as it ends, on the clock every
// process of the machine shares (CLOCK_MONOTONIC: process.hrtime), so that
// the parent can lay all of them side by side, even the ones of a process
// it killed mid-section.
//   race-child.mjs <log> <ms> <keys, comma-separated> <workers> [seed]
// With KEEL_RACE_BURSTS=n, n more workers ask 2-4 run()s at once, every few
// ms (the same key at times): on a store that acquires together, the
// attempts of one batch, a quarter of them aborted before it is sent, the
// rest 0-60 ms in.
// Log lines: `S <ns> <key> <id> <fencing token or ->` and `E <ns> <key> <id>`.
// Prints, if it lives to the end: { sections, aborted, abortedAtOnce, timedOut, errors, failures } (the
// first few store errors' codes and messages).

import { openSync, writeSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import { lock, setLockStore } from '@shaferllc/keel/core'
import { openStore } from './stores.mjs'

const [file, ms, keyList, workerCount] = process.argv.slice(2)
const keys = keyList.split(',')
const log = openSync(file, 'a')
const now = () => process.hrtime.bigint()
const pick = (list) => list[Math.floor(Math.random() * list.length)]
const figures = { sections: 0, aborted: 0, abortedAtOnce: 0, timedOut: 0, errors: 0, failures: [] }
/** A store error: counted, and the first few kept to be shown. */
const failed = (error) => {
  figures.errors++
  if (figures.failures.length < 3) figures.failures.push(`${error?.code ?? ''} ${error?.message ?? error}`)
}
const { store, close } = await openStore()
setLockStore(store)
// Another client of the same server, outside lock(): what a second service would use.
const { store: other, close: closeOther } = await openStore()
const end = Date.now() + Number(ms)
let ids = 0

/** A critical section: logged at both ends, 0-2 ms long, sometimes ending in the same turn. */
async function section(key, token) {
  const id = `${process.pid}.${ids++}`
  writeSync(log, `S ${now()} ${key} ${id} ${token ?? '-'}\n`)
  const long = Math.random() * 2
  if (long > 0.3) await sleep(long)
  writeSync(log, `E ${now()} ${key} ${id}\n`)
  figures.sections++
}

/** One run() of a key of `among`, its wait aborted `abortIn` ms in (0: before anything else runs). */
async function attempt(abortIn, among = keys) {
  const controller = new AbortController()
  const timer = abortIn > 0 ? setTimeout(() => controller.abort(), abortIn) : undefined
  try {
    const running = lock(pick(among), 2_000).run((held) => section(held.key, held.fencingToken), { timeout: 3_000, signal: controller.signal })
    if (abortIn === 0) controller.abort()
    const [ran] = await running
    if (!ran) figures.timedOut++
  } catch (error) {
    // (Aborted right as it was asked: before its batch went, or as it
    // queued after a refusal; counted apart from waits aborted partway.)
    if (error?.name !== 'AbortError') failed(error)
    else if (abortIn === 0) figures.abortedAtOnce++
    else figures.aborted++
  } finally {
    clearTimeout(timer)
  }
}

async function worker() {
  while (Date.now() < end) await attempt(Math.random() * 60)
}

/**
 * Bursts of 2-4 run()s asked at once, one every 0-5 ms, at most 8 of them
 * out, on twice the keys (a key with waiters queued in this process takes a
 * newcomer into its queue without asking the store).
 */
async function bursts() {
  const among = keys.flatMap((key) => [key, `${key}:b`])
  const out = new Set()
  while (Date.now() < end) {
    const size = 2 + Math.floor(Math.random() * 3)
    if (out.size + size <= 8) {
      for (let i = 0; i < size; i++) {
        const one = attempt(Math.random() < 0.25 ? 0 : Math.random() * 60, among).finally(() => out.delete(one))
        out.add(one)
      }
    }
    await sleep(Math.random() * 5)
  }
  await Promise.all(out)
}

async function outsider() {
  while (Date.now() < end) {
    const key = pick(keys)
    const owner = `outside-${process.pid}-${ids++}`
    try {
      if (await other.acquire(key, owner, 2_000)) {
        await section(key, undefined)
        await other.release(key, owner)
      } else {
        await sleep(Math.random() * 5)
      }
    } catch (error) {
      failed(error)
    }
  }
}

const burstWorkers = Number(process.env.KEEL_RACE_BURSTS ?? 0)
await Promise.all([...Array.from({ length: Number(workerCount) }, worker), ...Array.from({ length: burstWorkers }, bursts), outsider()])
await closeOther()
await close()
process.stdout.write(`${JSON.stringify(figures)}\n`, () => process.exit(0))
