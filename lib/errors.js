'use strict'
/**
 * The errors the lock itself raises, and how it reads a store's: which
 * store errors mean "could not be reached" (a waiter with time left tries
 * again after them).
 */

class LockNotHeldError extends Error {
  /** @param {string} [key] */
  constructor(key) {
    const text = key === undefined ? '' : String(key)
    const shown = text.length > 200 ? `${text.slice(0, 200)}…` : text
    const which = key === undefined ? 'The lock' : `Lock "${shown}"`
    super(`${which} is not held by this owner: it expired, was released, or was never acquired`)
    /** The key of the lock that is not held ('' when none was given). */
    this.key = text
  }
}
Object.defineProperty(LockNotHeldError.prototype, 'name', {
  value: 'LockNotHeldError',
  writable: true,
  configurable: true,
})

/**
 * Errors that say the store could not be reached, did not answer in time,
 * or answered that it cannot serve anyone yet (loading its data, busy, full,
 * a cluster re-forming). (Native stores set these codes; a JS store may set
 * them too.)
 *
 * @param {unknown} error
 */
const isUnreachable = (error) => {
  const code = /** @type {{ code?: unknown } | null | undefined} */ (error)?.code
  return code === 'ERR_LOCK_STORE_CONNECTION' || code === 'ERR_LOCK_STORE_TIMEOUT' || code === 'ERR_LOCK_STORE_UNAVAILABLE'
}

module.exports = { LockNotHeldError, isUnreachable }
