'use strict'
/**
 * The errors the lock itself raises, and how it reads a store's: which
 * store errors mean "could not be reached" (a waiter with time left tries
 * again after them).
 */

/**
 * The codes, from the addon's one list (`Code` in src/error.rs, `ErrorCode`
 * in lib/native.d.ts), so none is spelled here.
 */
const { StoreConnection, StoreTimeout, StoreUnavailable, Internal } = require('../native.js').ErrorCode

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
 * What a store (every store this package ships) fails with when the
 * failure is the store's, not the
 * caller's input (that stays a TypeError or RangeError): `code` says which,
 * one of index.d.ts's LockStoreErrorCode. A store written in JS may throw it
 * too.
 */
class LockStoreError extends Error {
  /**
   * @param {string} message
   * @param {{ code?: string, cause?: unknown }} [options]
   */
  constructor(message, options) {
    const given = typeof options === 'object' && options !== null ? options : undefined
    super(message, given !== undefined && 'cause' in given ? { cause: given.cause } : undefined)
    /** Which failure: ERR_LOCK_STORE_CONNECTION, ERR_LOCK_STORE_TIMEOUT, ... */
    this.code = given?.code ?? Internal
  }
}
Object.defineProperty(LockStoreError.prototype, 'name', {
  value: 'LockStoreError',
  writable: true,
  configurable: true,
})

/**
 * A native store's failure as its caller sees it. The addon makes its errors
 * where no JS runs (a reply arriving on Tokio's threads), so their stack is
 * their message alone. Called in the catch of the async function that
 * awaited the store, this makes a LockStoreError there, whose stack V8 fills
 * with that function and every async function awaiting it: the caller's
 * code. Anything else (bad input, a JS store's own errors, one already made
 * here) is returned as it is. Only failures pay for this.
 *
 * @param {unknown} error
 * @param {Function} [below] the stack starts below this function's frame
 */
function fromStore(error, below = fromStore) {
  if (error instanceof LockStoreError || !isStoreFailure(error)) return error
  const { message, code, cause } = /** @type {Error & { code: string }} */ (error)
  const made = new LockStoreError(message, cause === undefined ? { code } : { code, cause })
  Error.captureStackTrace(made, below)
  return made
}

/** @param {unknown} error */
const isStoreFailure = (error) => {
  const code = /** @type {{ code?: unknown } | null | undefined} */ (error)?.code
  return typeof code === 'string' && code.startsWith('ERR_LOCK_') && !(error instanceof TypeError) && !(error instanceof RangeError)
}

/**
 * Errors that say the store could not be reached, did not answer in time,
 * or answered that it cannot serve anyone yet (loading its data, busy, full,
 * a group of servers re-forming). (Native stores set these codes; a JS store may set
 * them too.)
 *
 * @param {unknown} error
 */
const isUnreachable = (error) => {
  const code = /** @type {{ code?: unknown } | null | undefined} */ (error)?.code
  return code === StoreConnection || code === StoreTimeout || code === StoreUnavailable
}

module.exports = { LockNotHeldError, LockStoreError, fromStore, isUnreachable }
