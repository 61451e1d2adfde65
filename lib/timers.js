'use strict'
/**
 * Timers for waiting and for holds. They run on the global setTimeout,
 * looked up at each call: under a test framework's fake timers a waiter's
 * timeout and polls follow the fake clock (a lock's TTL does not: the store
 * keeps real time).
 */

// setTimeout fires at once for delays above 2^31 - 1 ms, so longer waits are chained.
const MAX_TIMER_MS = 2 ** 31 - 1

/**
 * @typedef {{ id: ReturnType<typeof setTimeout> | undefined }} Timer
 */

/**
 * A cancellable timer for any delay; `unref`: it does not keep the process alive.
 *
 * @param {() => void} fn
 * @param {number} ms
 * @returns {Timer}
 */
function timer(fn, ms, unref = false) {
  /** @type {Timer} */
  const t = { id: undefined }
  /** @param {number} left */
  const arm = (left) => {
    t.id = left > MAX_TIMER_MS ? setTimeout(arm, MAX_TIMER_MS, left - MAX_TIMER_MS) : setTimeout(fn, left)
    if (unref) t.id?.unref?.()
  }
  arm(ms)
  return t
}

/** @param {Timer | undefined} t */
const cancel = (t) => {
  if (t !== undefined) clearTimeout(t.id)
}

module.exports = { timer, cancel }
