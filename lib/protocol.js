'use strict'
/**
 * What JS and the addon agree on, in one place: the five LockStore methods
 * (in the order of the addon's `StoreMethod`, which numbers them across the
 * boundary), the kinds of store (`StoreKind`), the limits and defaults
 * (checked against the same numbers in Rust), and the cheap JS-side checks
 * of a JS store's replies (anything else goes to the addon's `checkReply`,
 * which words the TypeError).
 */

const native = require('./native.js')

/** LockStore's methods, in `StoreMethod` order: a method's index is its number for the addon. */
const STORE_METHODS = /** @type {const} */ (['acquire', 'release', 'extend', 'isLocked', 'remainingTime'])

const { StoreMethod, StoreKind } = native
for (const [index, name] of STORE_METHODS.entries()) {
  const variant = name[0].toUpperCase() + name.slice(1)
  if (StoreMethod[/** @type {keyof typeof StoreMethod} */ (variant)] !== index) {
    throw new Error(`the addon numbers the store method ${name} differently: the binary does not match lib/`)
  }
}

const { maxMs: MAX_MS, defaultTtlMs: DEFAULT_TTL_MS, defaultRetryDelayMs: DEFAULT_RETRY_DELAY_MS } = native.limits()

/**
 * A JS store's resolved value when it is well formed, else `undefined` (the
 * addon then says what was wrong). For an acquire made for `owner`, the
 * owner (taken) or null (held).
 *
 * @param {number} method a StoreMethod
 * @param {unknown} value
 * @param {string | undefined} owner
 */
function wellFormedReply(method, value, owner) {
  if (method === StoreMethod.RemainingTime) {
    if (value == null) return null
    if (typeof value === 'number' && Number.isFinite(value)) return value
  } else if (typeof value === 'boolean') {
    return owner === undefined ? value : value ? owner : null
  }
  return undefined
}

module.exports = {
  STORE_METHODS,
  StoreMethod,
  StoreKind,
  MAX_MS,
  DEFAULT_TTL_MS,
  DEFAULT_RETRY_DELAY_MS,
  wellFormedReply,
}
