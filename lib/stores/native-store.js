'use strict'
/**
 * The stores that run natively share this class: each method checks its
 * arguments, so a direct call with bad input fails with the argument's name,
 * then makes one native call; a failure of the store is rethrown from the
 * method as a LockStoreError whose stack runs through the caller
 * (lib/core/errors.js fromStore). `handleOf` finds the native handle of one.
 */

const native = require('../native.js')
const { checkKey, checkMs, isThenable } = require('../core/check.js')
const { fromStore } = require('../core/errors.js')

/** A store used directly speaks of plain locks. */
const LOCK = native.HoldKind.Lock

/** @type {(store: object) => object | undefined} */
let handleOf = () => undefined

class NativeLockStore {
  #handle
  #name

  /**
   * @param {string} name
   * @param {object} handle
   */
  constructor(name, handle) {
    this.#name = name
    this.#handle = handle
  }

  static {
    handleOf = (store) => (#handle in store ? store.#handle : undefined)
  }

  /**
   * @param {string} key
   * @param {string} owner
   * @param {number} ttlMs
   */
  async acquire(key, owner, ttlMs) {
    const where = this.#checkCall('acquire', key, owner)
    checkMs(where, ttlMs, 'ttlMs', false)
    try {
      const acquired = native.storeAcquire(this.#handle, key, LOCK, 0, owner, ttlMs)
      return isThenable(acquired) ? await acquired : acquired
    } catch (error) {
      throw fromStore(error)
    }
  }

  /**
   * @param {string} key
   * @param {string} owner
   */
  async release(key, owner) {
    this.#checkCall('release', key, owner)
    try {
      const released = native.release(this.#handle, key, LOCK, owner)
      return isThenable(released) ? await released : released
    } catch (error) {
      throw fromStore(error)
    }
  }

  /**
   * @param {string} key
   * @param {string} owner
   * @param {number} ttlMs
   */
  async extend(key, owner, ttlMs) {
    const where = this.#checkCall('extend', key, owner)
    checkMs(where, ttlMs, 'ttlMs', false)
    try {
      const extended = native.extend(this.#handle, key, LOCK, owner, ttlMs)
      return isThenable(extended) ? await extended : extended
    } catch (error) {
      throw fromStore(error)
    }
  }

  /** @param {string} key */
  async isLocked(key) {
    checkKey(`${this.#name}.isLocked`, key)
    try {
      const locked = native.wouldWait(this.#handle, key, LOCK, 0)
      return isThenable(locked) ? await locked : locked
    } catch (error) {
      throw fromStore(error)
    }
  }

  /** @param {string} key */
  async remainingTime(key) {
    checkKey(`${this.#name}.remainingTime`, key)
    try {
      const left = native.remainingTime(this.#handle, key, LOCK)
      return isThenable(left) ? await left : left
    } catch (error) {
      throw fromStore(error)
    }
  }

  /**
   * @param {string} method
   * @param {unknown} key
   * @param {unknown} owner
   */
  #checkCall(method, key, owner) {
    const where = `${this.#name}.${method}`
    checkKey(where, key)
    checkKey(where, owner, 'owner')
    if (owner.length === 0) throw new TypeError(`${where}: owner must be a non-empty string`)
    return where
  }
}

module.exports = { NativeLockStore, handleOf }
