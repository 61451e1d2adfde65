// One process of the abort race (race.mjs): workers that take a few keys
// with run(), each wait cancelled by an AbortSignal at a random moment, and
// one worker that takes them through a second store instance's own
// acquire/release, as another service sharing the server would. Every
// critical section is logged as it starts and as it ends, on the clock every
// process of the machine shares (CLOCK_MONOTONIC: process.hrtime), so that
// the parent can lay all of them side by side, even the ones of a process
// it killed mid-section.
//   race-child.mjs <log> <ms> <keys, comma-separated> <workers> [seed]
// Log lines: `S <ns> <key> <id> <fencing token or ->` and `E <ns> <key> <id>`.
// Prints, if it lives to the end: { sections, aborted, timedOut, errors, failures } (the
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
const figures = { sections: 0, aborted: 0, timedOut: 0, errors: 0, failures: [] }
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

async function worker() {
  while (Date.now() < end) {
    const controller = new AbortController()
    const abortIn = Math.random() * 60
    const timer = setTimeout(() => controller.abort(), abortIn)
    try {
      const [ran] = await lock(pick(keys), 2_000).run((held) => section(held.key, held.fencingToken), { timeout: 3_000, signal: controller.signal })
      if (!ran) figures.timedOut++
    } catch (error) {
      if (error?.name === 'AbortError') figures.aborted++
      else failed(error)
    } finally {
      clearTimeout(timer)
    }
  }
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

await Promise.all([...Array.from({ length: Number(workerCount) }, worker), outsider()])
await closeOther()
await close()
process.stdout.write(`${JSON.stringify(figures)}\n`, () => process.exit(0))
