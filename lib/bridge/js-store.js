'use strict'
/**
 * The bridge to a store written in JS, all of it in JS: the lock calls the
 * store's methods as plain JS would (no crossing into the addon and back),
 * with an owner token from `crypto.randomUUID()` (122 random bits from
 * Node's CSPRNG, the shape of the addon's own). What a method returns is
 * checked, so a store that answers `"OK"` where a boolean belongs fails with
 * a TypeError naming the method instead of being read as truthy; a throw of
 * anything is a rejection with that value; a plain value settles without a
 * promise; and an acquire that failed gives back the token it may have left
 * (safe: a release only deletes its own token).
 */

const { randomUUID } = require('node:crypto')
const { types: { isPromise } } = require('node:util')
const { STORE_METHODS, kOps, opsOf } = require('../core/protocol.js')
const { describe, isThenable } = require('../core/check.js')
const { NativeLockStore, handleOf } = require('../stores/native-store.js')
const { giveBack } = require('../wait/waiting.js')

/**
 * The handle that runs a store's operations. One of our stores whose methods
 * are its own runs natively; any other object (including a subclass that
 * overrides a method) has its own methods called.
 *
 * @param {import('../../index').LockStore} store
 * @returns {object}
 */
function handleFor(store) {
  const handle = handleOf(store)
  if (handle !== undefined && STORE_METHODS.every((m) => store[m] === NativeLockStore.prototype[m])) return handle
  return jsStoreHandle(store)
}

/**
 * A JS store's handle: the store, and the bridge's operations.
 *
 * @typedef {{ store: Record<string, any>, [kOps]: typeof jsOps }} JsHandle
 */

/** @type {WeakMap<object, JsHandle>} */
const jsHandles = new WeakMap()

/** @param {import('../../index').LockStore} store */
function jsStoreHandle(store) {
  let handle = jsHandles.get(store)
  if (handle === undefined) {
    handle = { store: /** @type {any} */ (store), [kOps]: jsOps }
    jsHandles.set(store, handle)
  }
  return handle
}

/**
 * Call `store[name]` (looked up now, so a store may swap a method, and with
 * the store as `this`) with exactly the interface's arguments. A thenable
 * that is not a native promise is adopted; a throw, of anything, becomes a
 * rejection with that value; a method that is not a function is named.
 *
 * @param {Record<string, any>} store
 * @param {string} name
 * @param {string} key
 * @param {string} [owner]
 * @param {number} [ttlMs]
 * @returns {unknown}
 */
function call(store, name, key, owner, ttlMs) {
  const method = store[name]
  if (typeof method !== 'function') {
    return Promise.reject(new TypeError(`LockStore.${name} must be a function, but the store's ${name} is ${describe(method)}`))
  }
  try {
    const returned =
      ttlMs !== undefined
        ? method.call(store, key, owner, ttlMs)
        : owner !== undefined
          ? method.call(store, key, owner)
          : method.call(store, key)
    return isThenable(returned) && !isPromise(returned) ? Promise.resolve(returned) : returned
  } catch (error) {
    return Promise.reject(error)
  }
}

/** @param {unknown} value how a wrong answer is named in the TypeError */
function shown(value) {
  if (value == null) return 'null or undefined'
  if (typeof value === 'boolean') return String(value)
  if (typeof value === 'number') return `the number ${value}`
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`
}

/**
 * @param {string} name
 * @param {string} expected
 * @param {unknown} value
 */
const wrongAnswer = (name, expected, value) =>
  new TypeError(`LockStore.${name}() must return ${expected} (or a promise of one), but it gave ${shown(value)}`)

/**
 * `returned` (a value, or a promise of one) read by `read`, which throws the
 * TypeError for an answer of the wrong type.
 *
 * @template T
 * @param {unknown} returned
 * @param {(value: unknown) => T} read
 * @returns {T | Promise<T>}
 */
const answer = (returned, read) => (isPromise(returned) ? /** @type {Promise<unknown>} */ (returned).then(read) : read(returned))

/** @param {string} name */
const boolean = (name) => (/** @type {unknown} */ value) => {
  if (typeof value === 'boolean') return value
  throw wrongAnswer(name, 'a boolean', value)
}

/** @param {string} name */
const milliseconds = (name) => (/** @type {unknown} */ value) => {
  if (value == null) return null
  if (typeof value === 'number' && Number.isFinite(value)) return value
  throw wrongAnswer(name, 'a number or null', value)
}

const [released, extended, locked, left] = [boolean('release'), boolean('extend'), boolean('isLocked'), milliseconds('remainingTime')]

/**
 * A new owner token's acquire through `store[method]`: the token when the
 * store answered true, null when false. An acquire that failed may still have
 * taken the hold: `giveBackOwner(owner)` returns the token before the error goes on.
 *
 * @param {Record<string, any>} store
 * @param {string} method
 * @param {string} key
 * @param {number} ttlMs
 * @param {(owner: string) => void} giveBackOwner
 * @returns {string | null | Promise<string | null>}
 */
function acquireThrough(store, method, key, ttlMs, giveBackOwner) {
  const owner = randomUUID()
  const took = (/** @type {unknown} */ value) => {
    if (typeof value === 'boolean') return value ? owner : null
    throw wrongAnswer(method, 'a boolean', value)
  }
  const failed = (/** @type {unknown} */ error) => {
    giveBackOwner(owner)
    throw error
  }
  const returned = call(store, method, key, owner, Math.ceil(ttlMs))
  if (isPromise(returned)) return /** @type {Promise<unknown>} */ (returned).then(took).catch(failed)
  try {
    return took(returned)
  } catch (error) {
    return failed(error)
  }
}

/**
 * The operations of a JS store's handle, by the same names and arguments as
 * the addon's. A store gets whole milliseconds, rounded up, as the native
 * stores count them (a server's expiry in milliseconds may refuse a fraction,
 * and a column of integers may truncate one).
 *
 * @type {import('../core/protocol.js').StoreOps}
 */
const jsOps = {
  acquire: (handle, key, ttlMs, lane = key) =>
    acquireThrough(/** @type {JsHandle} */ (handle).store, 'acquire', key, ttlMs, (owner) =>
      giveBack({ handle, key, lane, ops: opsOf(handle) }, owner),
    ),
  release: (handle, key, owner) => answer(call(/** @type {JsHandle} */ (handle).store, 'release', key, owner), released),
  extend: (handle, key, owner, ttlMs) =>
    answer(call(/** @type {JsHandle} */ (handle).store, 'extend', key, owner, Math.ceil(ttlMs)), extended),
  wouldWait: (handle, key) => answer(call(/** @type {JsHandle} */ (handle).store, 'isLocked', key), locked),
  remainingTime: (handle, key) => answer(call(/** @type {JsHandle} */ (handle).store, 'remainingTime', key), left),
  // A JS store can only say whether anyone holds a key, and gives no token here.
  holds: () => null,
  fencingToken: () => null,
}

module.exports = { handleFor, call, answer, boolean, milliseconds, wrongAnswer, acquireThrough }
