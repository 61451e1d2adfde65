// One process of a cross-process test: opens the store named by the
// environment (see stores.mjs), does one job, prints its result as a JSON
// line, and exits.
//   count <file> <times> <key>     read-modify-write a counter file under the lock
//   count-unlocked <file> <times> [startAt]  the same without a lock (the control), from startAt (epoch ms)
//   take <key> <ttlMs> [kind]      acquire, print serialize() and the fencing token, exit still holding
//   try <key> <ttlMs>              one acquire attempt, print whether it took the lock
//   hold <key> <ttlMs> [kind]      acquire, print serialize(), stay until killed
//                                  (kind: semaphore:<limit>, read or write; default a plain lock)
//   wait <key> <ttlMs> <kind>      start waiting for a held key (a minute at most), print when, stay until killed
//   crowd <dir> <ms> <key> <kind> [together]  sections under a semaphore:<limit>, read or write hold
//                                  for <ms>, each with a marker file in <dir> while inside: prints how
//                                  many it saw inside at once and any overlap a writer should not have;
//                                  with <together>, starts once that many crowd processes are ready
//   run-exit <key> <ttlMs> <ending> one run(), its callback ending sync, after a timer, or by a
//                                  throw; print whether it ran, then process.exit(0) at once
//   queue <key> <timeoutMs> [<retryDelay>]  one waiter: waits up to <timeoutMs> (polling every
//                                  <retryDelay> ms, 50 if not given), holds 20 ms once it got in,
//                                  releases, then prints {acquired, at}: whether and when it got in
//   burst <dir> <key> <waiters> <startAt>  <waiters> waiters start together at <startAt> (epoch ms) and
//                                  each runs once for 1 ms (retryDelay 50), with an exclusive marker
//                                  file in <dir> while inside; prints {ran, overlaps}
//   restore <serialized> <ttlMs>   restoreLock + extend + release
//   release <serialized>           restoreLock + release
//   ask <calls>                    the store's own methods called in turn, <calls> a JSON list of
//                                  [method, ...arguments]: prints each one's { value } or { code }
//   hammer <file> <ms> <key> <ttl> locked increments for <ms>, riding out store errors,
//                                  with an exclusive "inside" marker file to catch overlaps
// With KEEL_TEST_LEAVE_OPEN set, the store is not closed at the end: the
// process must still exit by itself. With KEEL_TEST_REPORT_HEARD set (a
// store with no server to watch, whose line the contract observes in its
// processes), queue and burst add to what they print what this process
// heard from the others, `heard: { handOvers, announcements }`, and the
// acquire attempts its waiters sent the store for <key> (`attempts`, as
// the tracing channel counts them).

import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import diagnostics from 'node:diagnostics_channel'
import { lock, semaphore, readLock, writeLock, restoreLock, setLockStore, channels } from '@shaferllc/keel/core'
import { countHeard } from '../../lib/core/store-events.js'
import { openStore } from './stores.mjs'

const [command, ...args] = process.argv.slice(2)
const { store, close } = await openStore()
setLockStore(store)
const print = (value) => process.stdout.write(`${JSON.stringify(value)}\n`)

/**
 * Waits until `count` processes have checked in at `dir`: a slow start (a
 * loaded machine, an emulator) must not leave one process crowding alone.
 */
async function allReady(dir, count) {
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, String(process.pid)), '')
  const giveUp = Date.now() + 120_000
  while (readdirSync(dir).length < count) {
    if (Date.now() > giveUp) throw new Error(`only ${readdirSync(dir).length} of ${count} processes ready after 2 minutes`)
    await sleep(10)
  }
}

/**
 * What this process heard and tried for `key` from now on, added to a
 * result by the returned function (nothing without KEEL_TEST_REPORT_HEARD).
 *
 * @param {string} key
 */
function reporting(key) {
  if (!process.env.KEEL_TEST_REPORT_HEARD) return (result) => result
  const heard = countHeard()
  let attempts = 0
  const noop = () => {}
  diagnostics.tracingChannel(channels.acquire).subscribe({
    asyncEnd: (c) => void (c.key === key && (attempts += c.attempts)),
    start: noop,
    end: noop,
    asyncStart: noop,
    error: noop,
  })
  return (result) => ({ ...result, heard: { ...heard }, attempts })
}

/** A handle of the kind named: `semaphore:<limit>`, `read`, `write`, or (undefined) a plain lock. */
function handleOf(key, ttlMs, kind) {
  if (kind === undefined) return lock(key, ttlMs)
  if (kind.startsWith('semaphore:')) return semaphore(key, Number(kind.slice('semaphore:'.length)), ttlMs)
  return kind === 'read' ? readLock(key, ttlMs) : writeLock(key, ttlMs)
}

async function increment(file) {
  const n = Number(readFileSync(file, 'utf8'))
  await sleep(1)
  writeFileSync(file, String(n + 1))
}

switch (command) {
  case 'count': {
    const [file, times, key] = args
    let timeouts = 0
    for (let i = 0; i < Number(times); i++) {
      const [ran] = await lock(key, 10_000).run(() => increment(file), { timeout: 30_000, retryDelay: 2 })
      if (!ran) timeouts++
    }
    print({ timeouts })
    break
  }
  case 'hammer': {
    const [file, ms, key, ttl] = args
    const marker = `${file}.inside`
    const figures = { sections: 0, errors: 0, overlaps: 0, longestRunMs: 0, rssWarmMb: 0, rssEndMb: 0 }
    const started = Date.now()
    const end = started + Number(ms)
    const rssMb = () => Math.round(process.memoryUsage().rss / 2 ** 20)
    while (Date.now() < end) {
      // Resident memory once warmed up (a sixth of the way in), to compare with the end.
      if (figures.rssWarmMb === 0 && Date.now() - started > Number(ms) / 6) figures.rssWarmMb = rssMb()
      const runStarted = Date.now()
      try {
        await lock(key, Number(ttl)).run(
          async () => {
            try {
              writeFileSync(marker, String(process.pid), { flag: 'wx' })
            } catch {
              figures.overlaps++
            }
            await increment(file)
            rmSync(marker, { force: true })
            figures.sections++
          },
          { timeout: 5_000, retryDelay: 5 },
        )
        figures.longestRunMs = Math.max(figures.longestRunMs, Date.now() - runStarted)
      } catch {
        figures.errors++
        await sleep(10)
      }
    }
    figures.rssEndMb = rssMb()
    print(figures)
    break
  }
  case 'count-unlocked': {
    const [file, times, startAt] = args
    // Together from `startAt` (epoch ms), however long each took to start.
    if (startAt !== undefined) await sleep(Math.max(0, Number(startAt) - Date.now()))
    for (let i = 0; i < Number(times); i++) await increment(file)
    print({ timeouts: 0 })
    break
  }
  case 'crowd': {
    const [dir, ms, key, kind, together] = args
    const figures = { sections: 0, timeouts: 0, most: 0, overlaps: 0 }
    const writing = kind === 'write'
    if (together !== undefined) await allReady(`${dir}.ready`, Number(together))
    const end = Date.now() + Number(ms)
    let n = 0
    while (Date.now() < end) {
      const marker = join(dir, `${writing ? 'w' : 'r'}-${process.pid}-${n++}`)
      const [ran] = await handleOf(key, 10_000, kind).run(
        async () => {
          writeFileSync(marker, '')
          const inside = readdirSync(dir)
          figures.most = Math.max(figures.most, inside.length)
          // A writer is alone; a reader never shares with a writer.
          if (writing ? inside.length > 1 : inside.some((f) => f.startsWith('w-'))) figures.overlaps++
          await sleep(writing ? 2 : 8)
          rmSync(marker)
          figures.sections++
        },
        { timeout: 20_000, retryDelay: 5 },
      )
      if (!ran) figures.timeouts++
      // Writers write now and then, as a cache rebuild would: back to back,
      // two writers alone could keep readers out (writers come first).
      if (writing) await sleep(20)
    }
    print(figures)
    break
  }
  case 'wait': {
    const [key, ttlMs, kind] = args
    handleOf(key, Number(ttlMs), kind).acquire({ timeout: 60_000, retryDelay: 50 })
    await sleep(300)
    print({ at: Date.now() })
    await new Promise(() => setInterval(() => {}, 1_000))
    break
  }
  case 'take':
  case 'hold': {
    const [key, ttlMs, kind] = args
    const l = handleOf(key, Number(ttlMs), kind)
    if (!(await l.acquire())) throw new Error(`${key} was already held`)
    print({ serialized: l.serialize(), fencingToken: l.fencingToken, at: Date.now() })
    if (command === 'hold') await new Promise(() => setInterval(() => {}, 1_000))
    break
  }
  case 'try': {
    const [key, ttlMs] = args
    print({ acquired: await lock(key, Number(ttlMs)).acquire() })
    break
  }
  case 'run-exit': {
    const [key, ttlMs, ending] = args
    const fn = {
      sync: () => 'done',
      timer: () => sleep(5),
      throw: () => {
        throw new Error('callback failed')
      },
    }[ending]
    const [ran] = await lock(key, Number(ttlMs))
      .run(fn, { timeout: 0 })
      .catch(() => [false])
    print({ ran })
    process.exit(0)
  }
  case 'queue': {
    const [key, timeoutMs, retryDelay = '50'] = args
    const report = reporting(key)
    const l = lock(key, 10_000)
    const acquired = await l.acquire({ timeout: Number(timeoutMs), retryDelay: Number(retryDelay) })
    const at = Date.now()
    if (acquired) {
      await sleep(20)
      await l.release()
    }
    // Printed last: what this process heard counts until it is done (a
    // hand-over's message may come after its poll found the lock handed).
    print(report({ acquired, at }))
    break
  }
  case 'burst': {
    const [dir, key, waiters, startAt] = args
    // Warm: the store connected, and following what it follows.
    await lock(`${key}:warm:${process.pid}`).run(() => {})
    const report = reporting(key)
    await sleep(Math.max(0, Number(startAt) - Date.now()))
    const marker = join(dir, 'inside')
    const figures = { ran: 0, overlaps: 0 }
    await Promise.all(
      Array.from({ length: Number(waiters) }, async () => {
        const [ran] = await lock(key, 10_000).run(
          async () => {
            try {
              writeFileSync(marker, String(process.pid), { flag: 'wx' })
            } catch {
              figures.overlaps++
            }
            await sleep(1)
            rmSync(marker, { force: true })
          },
          { timeout: 20_000, retryDelay: 50 },
        )
        if (ran) figures.ran++
      }),
    )
    print(report(figures))
    break
  }
  case 'restore': {
    const [serialized, ttlMs] = args
    const l = restoreLock(serialized)
    await l.extend(Number(ttlMs))
    const remaining = await l.getRemainingTime()
    const released = await l.release()
    print({ remaining, released, lockedAfter: await l.isLocked() })
    break
  }
  case 'release': {
    print({ released: await restoreLock(args[0]).release() })
    break
  }
  case 'ask': {
    const answers = []
    for (const [method, ...callArgs] of JSON.parse(args[0])) {
      try {
        answers.push({ value: await store[method](...callArgs) })
      } catch (error) {
        answers.push({ code: error?.code ?? String(error) })
      }
    }
    print(answers)
    break
  }
  default:
    throw new Error(`unknown command ${command}`)
}
if (!process.env.KEEL_TEST_LEAVE_OPEN) await close()
