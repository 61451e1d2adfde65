'use strict'
/**
 * The bridge to a store written in JS. The addon calls the store's methods
 * directly on the JS thread (a synchronous store settles without a promise);
 * a promise a method returns comes back here, to `settle`, which checks its
 * value on the JS thread and gives back the token an acquire may have left
 * when it failed.
 */

const { types: { isPromise } } = require('node:util')
const native = require('./native.js')
const { STORE_METHODS, wellFormedReply } = require('./protocol.js')
const { describe, isThenable } = require('./check.js')
const { NativeLockStore, handleOf } = require('./stores.js')
const { giveBackUnwanted } = require('./waiting.js')

/**
 * The native handle that runs a store's operations. One of our stores whose
 * methods are its own runs natively; any other object (including a subclass
 * that overrides a method) has its own methods called.
 *
 * @param {import('../index').LockStore} store
 * @returns {object}
 */
function handleFor(store) {
  const handle = handleOf(store)
  if (handle !== undefined && STORE_METHODS.every((m) => store[m] === NativeLockStore.prototype[m])) return handle
  return jsStoreHandle(store)
}

/** @type {WeakMap<object, object>} */
const jsHandles = new WeakMap()

/** @param {import('../index').LockStore} store */
function jsStoreHandle(store) {
  let handle = jsHandles.get(store)
  if (handle !== undefined) return handle
  const methods = /** @type {Record<string, (...args: unknown[]) => unknown>} */ (/** @type {unknown} */ (store))
  // A method is looked up when called (so a store may swap one later) and
  // called with the store as `this`. A plain value goes back as it is (a
  // synchronous store settles without a promise); a thenable that is not a
  // native promise is adopted into one, which is what the addon can hold.
  const adopt = (/** @type {unknown} */ returned) =>
    isThenable(returned) && !isPromise(returned) ? Promise.resolve(returned) : returned
  // A throw, of anything (not only an Error), is the same as a rejection
  // with that value; a method replaced by a non-function is named.
  /**
   * @param {string} m
   * @param {unknown} error
   */
  const failed = (m, error) =>
    Promise.reject(
      typeof methods[m] === 'function'
        ? error
        : new TypeError(`LockStore.${m} must be a function, but the store's ${m} is ${describe(methods[m])}`),
    )
  // One wrapper per arity, so the method gets exactly the interface's arguments.
  /** @param {string} m */
  const bridge = (m) =>
    m === 'release'
      ? (/** @type {string} */ key, /** @type {string} */ owner) => {
          try {
            return adopt(methods[m](key, owner))
          } catch (error) {
            return failed(m, error)
          }
        }
      : m === 'acquire' || m === 'extend'
        ? (/** @type {string} */ key, /** @type {string} */ owner, /** @type {number} */ ttlMs) => {
            try {
              return adopt(methods[m](key, owner, ttlMs))
            } catch (error) {
              return failed(m, error)
            }
          }
        : (/** @type {string} */ key) => {
            try {
              return adopt(methods[m](key))
            } catch (error) {
              return failed(m, error)
            }
          }
  // A promise a method returned is settled here on the JS thread. `key` and
  // `owner` come with an acquire: if it fails, the token it may have left is
  // given back (safe: a release only deletes its own token).
  /**
   * @param {Promise<unknown>} promise
   * @param {number} method
   * @param {string} [key]
   * @param {string} [owner]
   */
  const settle = (promise, method, key, owner) => {
    const giveBack = () => {
      if (key !== undefined && owner !== undefined) giveBackUnwanted(/** @type {object} */ (handle), key, owner)
    }
    return promise.then(
      (value) => {
        const checked = wellFormedReply(method, value, owner)
        if (checked !== undefined) return checked
        // Anything else goes to the addon, which says what was wrong.
        try {
          return native.checkReply(method, value, owner)
        } catch (error) {
          giveBack()
          throw error
        }
      },
      (error) => {
        giveBack()
        throw error
      },
    )
  }
  const [acquire, release, extend, isLocked, remainingTime] = STORE_METHODS.map(bridge)
  handle = native.createJsStore(
    /** @type {any} */ (acquire),
    /** @type {any} */ (release),
    /** @type {any} */ (extend),
    /** @type {any} */ (isLocked),
    /** @type {any} */ (remainingTime),
    settle,
  )
  jsHandles.set(store, handle)
  return handle
}

module.exports = { handleFor }
