// Which keys are contended: per key, how many acquires, how many were
// refused, and how long callers waited in all, from the lock's acquire
// channel. The keys where callers wait longest come first.
//
//   const hotKeys = watchHotKeys()
//   ...
//   console.table(hotKeys.report(10))
//   hotKeys.stop()
import diagnostics from 'node:diagnostics_channel'
import { channels } from '@shaferllc/keel/core'

/**
 * @param {{ maxKeys?: number }} [options] keys kept at most (the least waited-on go first)
 */
export function watchHotKeys({ maxKeys = 10_000 } = {}) {
  /** @type {Map<string, { acquires: number, refused: number, waitedMs: number, longestMs: number }>} */
  const keys = new Map()
  const channel = diagnostics.tracingChannel(channels.acquire)
  const handlers = {
    asyncEnd({ key, result, waitedMs }) {
      let entry = keys.get(key)
      if (entry === undefined) {
        if (keys.size >= maxKeys) forgetColdest()
        keys.set(key, (entry = { acquires: 0, refused: 0, waitedMs: 0, longestMs: 0 }))
      }
      entry.acquires++
      if (result !== true) entry.refused++
      entry.waitedMs += waitedMs
      entry.longestMs = Math.max(entry.longestMs, waitedMs)
    },
  }
  const forgetColdest = () => {
    let coldest
    for (const [key, entry] of keys) if (coldest === undefined || entry.waitedMs < keys.get(coldest).waitedMs) coldest = key
    keys.delete(coldest)
  }
  channel.subscribe(handlers)
  return {
    /** The `top` keys callers waited on longest, in all. */
    report(top = 10) {
      return [...keys]
        .map(([key, e]) => ({ key, acquires: e.acquires, refused: e.refused, waitedMs: Math.round(e.waitedMs), longestMs: Math.round(e.longestMs) }))
        .sort((a, b) => b.waitedMs - a.waitedMs)
        .slice(0, top)
    },
    stop: () => channel.unsubscribe(handlers),
  }
}
