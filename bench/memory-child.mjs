// The memory check: a million distinct keys locked and released, then a
// million taken and left to expire, through the default MemoryLockStore.
// Prints resident memory (MB) before, after each million, and after the
// expired ones were swept by use.
import { setTimeout as sleep } from 'node:timers/promises'
import { lock, getLockStore } from '@shaferllc/keel/core'

const rss = () => {
  globalThis.gc?.()
  const m = process.memoryUsage()
  return { rss: Math.round(m.rss / 2 ** 20), heapUsed: Math.round(m.heapUsed / 2 ** 20), heapTotal: Math.round(m.heapTotal / 2 ** 20) }
}
const figures = { start: rss() }
for (let i = 0; i < 1_000_000; i++) await lock(`released:${i}`, 30_000).run(() => {})
figures.afterReleased = rss()
for (let i = 0; i < 1_000_000; i++) await lock(`expiring:${i}`, 50).acquire()
figures.whileExpiring = rss()
await sleep(1_200)
// The store sweeps expired entries as it is used.
for (let i = 0; i < 1_000; i++) await lock(`after:${i}`, 30_000).run(() => {})
figures.afterExpired = rss()
figures.entriesLeft = getLockStore().size
process.stdout.write(JSON.stringify(figures))
