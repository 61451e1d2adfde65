'use strict'
/**
 * Timers and clocks, of two kinds. Waiting (a waiter's timeout, its polls)
 * runs on the global setTimeout and performance.now, looked up at each call:
 * under a test framework's fake timers, waiting follows the fake clock. A
 * hold's own time (when it lapses, autoExtend's renewals, the signal that
 * aborts at the lapse) serves a TTL the store counts in real time, so it
 * runs on the real setTimeout and performance.now, taken from node:timers
 * and node:perf_hooks when this file loads, before any test can fake them.
 */

const { setTimeout: realSetTimeout, clearTimeout: realClearTimeout } = require('node:timers')
const { performance: realPerformance } = require('node:perf_hooks')

// setTimeout fires at once for delays above 2^31 - 1 ms, so longer waits are chained.
const MAX_TIMER_MS = 2 ** 31 - 1

/** The real monotonic clock, in ms (performance.now's, whatever a test fakes later). */
const realNow = realPerformance.now.bind(realPerformance)

/**
 * @typedef {{ id: ReturnType<typeof setTimeout> | undefined, real: boolean }} Timer
 */

/**
 * A cancellable timer for any delay; `unref`: it does not keep the process alive.
 *
 * @param {() => void} fn
 * @param {number} ms
 * @param {boolean} [unref]
 * @param {boolean} [real] on the real clock, not the global (maybe fake) setTimeout
 * @returns {Timer}
 */
function timer(fn, ms, unref = false, real = false) {
  /** @type {Timer} */
  const t = { id: undefined, real }
  const set = real ? realSetTimeout : setTimeout
  /** @param {number} left */
  const arm = (left) => {
    t.id = left > MAX_TIMER_MS ? set(arm, MAX_TIMER_MS, left - MAX_TIMER_MS) : set(fn, left)
    if (unref) t.id?.unref?.()
  }
  arm(ms)
  return t
}

/**
 * A hold's timer: on the real clock, and it does not keep the process alive.
 *
 * @param {() => void} fn
 * @param {number} ms
 */
const realTimer = (fn, ms) => timer(fn, ms, true, true)

/** @param {Timer | undefined} t */
const cancel = (t) => {
  if (t === undefined) return
  if (t.real) realClearTimeout(t.id)
  else clearTimeout(t.id)
}

module.exports = { timer, realTimer, cancel, realNow }
