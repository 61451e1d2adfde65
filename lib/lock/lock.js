'use strict'
/**
 * The lock: "only one of you may do this at a time". Two properties make it
 * correct, and everything here serves them:
 *
 * 1. Ownership. Every acquisition mints a fresh random owner token (in the
 *    addon), and the store releases or extends the lock only while it still
 *    holds that token. So when A's work outruns its TTL, B takes the freed
 *    lock, and A's late release() arrives, A's release is a no-op that
 *    returns false: it cannot delete B's lock and let a third worker in.
 * 2. Expiry. A lock always expires: there is no hold-forever mode, because a
 *    holder that crashes would block everyone forever. The store owns the
 *    clock that decides it.
 *
 * A Lock handle is what lock() and restoreLock() return: what it is on (its
 * Target) and its latest Acquisition. run() gives its callback a
 * handle of its own, bound to that run's acquisition alone. The decisions
 * that make the lock correct (owner tokens, the compare-and-act store
 * operations, expiry) live in the addon and the store; this file keeps what
 * is cheapest in JS: the handle and run()'s try/finally. An acquire is
 * lib/lock/acquire.js's; the handle turns its grant into an Acquisition.
 */

const { describe, checkMs, readOptions, isThenable } = require('../core/check.js')
const { LockNotHeldError, fromStore } = require('../core/errors.js')
const { realNow } = require('../core/timers.js')
const { Acquisition } = require('./acquisition.js')
const { acquire, kTook } = require('./acquire.js')
const { acquireChannel, runChannel, extendChannel, traceAcquire, traceRun, traceExtend } = require('../core/tracing.js')

const kCreate = Symbol('Lock.create')

/** @typedef {import('./acquisition.js').Target} Target */
/** @typedef {import('../wait/waiting.js').Grant} Grant */

class Lock {
  /** @type {Target} */
  #target
  /** The latest acquisition made (or restored) through this handle, held or not; null before any. */
  #hold

  /**
   * @param {symbol} token
   * @param {Target} target
   * @param {Acquisition | null} hold
   */
  constructor(token, target, hold) {
    if (token !== kCreate) {
      throw new TypeError('Lock cannot be constructed directly: use lock(key, ttlMs) or restoreLock(serialized)')
    }
    this.#target = target
    this.#hold = hold
  }

  /**
   * The current hold's fencing token: a number that only grows, per key,
   * across every process using the store (every store that fences, JS stores
   * that implement `fencingToken(key, owner)` among them); null when this
   * handle holds nothing or the store gives none.
   */
  get fencingToken() {
    return this.#hold === null ? null : this.#hold.fencingToken()
  }

  /**
   * Aborts, with a LockNotHeldError as its reason, as soon as this hold is
   * known to be lost: extend() or autoExtend found it gone, isExpired() said
   * so, or its TTL passed without an extension (also after an event-loop
   * stall). A handle that holds nothing gives an aborted signal. Release is
   * not a loss: the signal of a hold you released is left as it was.
   */
  get signal() {
    return (this.#hold ??= Acquisition.nothing(this.#target)).signal()
  }

  /** The key this lock guards. */
  get key() {
    return this.#target.key
  }

  /** How long the lock is held once acquired before it expires on its own, in ms. */
  get ttlMs() {
    return this.#target.ttlMs
  }

  /** The store this lock was created with. */
  get store() {
    return this.#target.store
  }

  /**
   * @template T
   * @param {(lock: Lock) => T | PromiseLike<T>} fn
   * @param {import('../../index').AcquireOptions} [options]
   * @returns {Promise<[true, Awaited<T>] | [false, undefined]>}
   */
  run(fn, options) {
    return runChannel.hasSubscribers ? traceRun(this.#target, options, () => this.#run(fn, options)) : this.#run(fn, options)
  }

  /**
   * @template T
   * @param {(lock: Lock) => T | PromiseLike<T>} fn
   * @param {import('../../index').AcquireOptions} [options]
   * @returns {Promise<[true, Awaited<T>] | [false, undefined]>}
   */
  async #run(fn, options) {
    if (typeof fn !== 'function') throw new TypeError(`Lock.run: fn must be a function, got ${describe(fn)}`)
    // The hold this call took is the one it gives back and the one fn's handle
    // speaks for, even if this handle is used by another run() meanwhile.
    // (The store calls are awaited only when they return a promise: the
    // in-memory path pays no extra turns of the microtask queue.)
    let hold = this.#take('Lock.run', options)
    if (isThenable(hold)) {
      try {
        hold = await hold
      } catch (error) {
        throw this.#failed(error)
      }
    }
    if (hold === null) return [false, undefined]
    const held = /** @type {Acquisition} */ (hold)
    if (options?.autoExtend === true) held.renewLater()
    let result
    try {
      result = await fn(new Lock(kCreate, this.#target, held))
    } catch (error) {
      const giving = held.giveBackQuietly(true)
      if (giving !== undefined) await giving
      throw error
    }
    // fn has run: its result is not thrown away because the release failed.
    const giving = held.giveBackQuietly(false)
    if (giving !== undefined) await giving
    return [true, result]
  }

  /**
   * @template T
   * @param {(lock: Lock) => T | PromiseLike<T>} fn
   */
  runImmediately(fn) {
    return this.run(fn, { timeout: 0 })
  }

  /** @param {import('../../index').AcquireOptions} [options] */
  async acquire(options) {
    let hold = this.#take('Lock.acquire', options)
    if (isThenable(hold)) {
      try {
        hold = await hold
      } catch (error) {
        throw this.#failed(error)
      }
    }
    if (hold === null) return false
    if (options?.autoExtend === true) hold.renewLater()
    return true
  }

  acquireImmediately() {
    return this.acquire({ timeout: 0 })
  }

  async release() {
    const hold = this.#hold
    if (hold === null || !hold.held) return false
    try {
      const released = hold.giveBack()
      return isThenable(released) ? await released : released
    } catch (error) {
      throw this.#failed(error)
    }
  }

  /**
   * `await using l = lock(key)`: at the end of the scope the lock is released
   * if this handle holds it, also when the scope is left by a throw.
   */
  async [Symbol.asyncDispose]() {
    if (this.#hold?.held) await this.release()
  }

  /**
   * Traced as a whole, once its argument is checked (as acquire()'s options
   * are): a call that rejects, before the store or after it, publishes the
   * very error it rejects with.
   *
   * @param {number} [ttlMs]
   * @returns {Promise<void>}
   */
  extend(ttlMs) {
    let ttl
    try {
      ttl = ttlMs === undefined ? this.#target.ttlMs : checkMs('Lock.extend', ttlMs, 'ttlMs', false)
    } catch (error) {
      return Promise.reject(error)
    }
    return extendChannel.hasSubscribers ? traceExtend(this.#target, ttl, () => this.#extend(ttl)) : this.#extend(ttl)
  }

  /** @param {number} ttl */
  async #extend(ttl) {
    const { key, capabilities } = this.#target
    const hold = this.#hold
    if (hold === null || !hold.held) throw new LockNotHeldError(key)
    const sent = capabilities.saysWhenLapsed ? 0 : realNow()
    let extended
    try {
      extended = hold.extendInStore(ttl)
      if (isThenable(extended)) extended = await extended
    } catch (error) {
      throw this.#failed(error)
    }
    if (!extended) {
      hold.markLost('extend')
      throw new LockNotHeldError(key)
    }
    hold.extended(sent, ttl)
  }

  async isLocked() {
    try {
      const locked = this.#target.ops.wouldWait(this.#target.handle, this.#target.key)
      return isThenable(locked) ? await locked : locked
    } catch (error) {
      throw this.#failed(error)
    }
  }

  async isExpired() {
    const hold = this.#hold
    if (hold === null) return false
    if (!hold.held) return hold.lost
    const { handle, key, ops } = this.#target
    // Stores that can tell whose lock it is answer exactly; others can only
    // say whether anyone holds the key.
    let held
    try {
      held = ops.holds(handle, key, hold.owner) ?? ops.wouldWait(handle, key)
      if (isThenable(held)) held = await held
    } catch (error) {
      throw this.#failed(error)
    }
    if (held) return false
    hold.markLost('isExpired')
    return true
  }

  /**
   * A plain lock: ms until the key's lock expires, or null when nobody holds
   * it. A semaphore or read-write handle: ms left on this handle's own hold,
   * or null when it holds none.
   */
  async getRemainingTime() {
    const { ops, handle, key, holdKind } = this.#target
    const hold = this.#hold
    if (holdKind !== undefined && !hold?.held) return null
    try {
      const left = holdKind === undefined ? ops.remainingTime(handle, key) : ops.remainingTime(handle, key, hold?.owner)
      return isThenable(left) ? await left : left
    } catch (error) {
      throw this.#failed(error)
    }
  }

  /**
   * How many hold the key now: a semaphore's permits; a read-write key's
   * readers, or 1 for its writer; a plain lock's holder (0 or 1).
   */
  async holders() {
    const { ops, handle, key } = this.#target
    try {
      if (ops.holders !== undefined) return await ops.holders(handle, key)
      return (await ops.wouldWait(handle, key)) ? 1 : 0
    } catch (error) {
      throw this.#failed(error)
    }
  }

  serialize() {
    const hold = this.#hold
    const { key, ttlMs, holdKind } = this.#target
    const owner = hold?.held ? hold.owner : undefined
    if (holdKind === undefined) return JSON.stringify({ key, ttlMs, owner })
    const limit = holdKind.name === 'semaphore' ? holdKind.limit : undefined
    return JSON.stringify({ key, ttlMs, kind: holdKind.name, limit, owner })
  }

  /**
   * What a call through this handle throws when the store failed: a native
   * store's failure made again here, in the awaiting method, as a
   * LockStoreError whose stack runs through the caller's code; a JS store's
   * error as it threw it (its stack is its own).
   *
   * @param {unknown} error
   */
  #failed(error) {
    return this.#target.capabilities.throwsOwnErrors ? error : fromStore(error, this.#failed)
  }

  /**
   * Acquire for a fresh owner: the new Acquisition, or null if the lock stayed held;
   * or a promise of that when the store (or the wait) has to be awaited.
   *
   * @param {string} where
   * @param {unknown} options
   * @returns {Acquisition | null | Promise<Acquisition | null>}
   */
  #take(where, options) {
    const [timeout, retryDelay, signal] = readOptions(where, options)
    if (!acquireChannel.hasSubscribers) return acquire(this, this.#target, timeout, retryDelay, signal, undefined)
    return traceAcquire(this.#target, timeout, (context) => acquire(this, this.#target, timeout, retryDelay, signal, context))
  }

  /**
   * A grant the store gave (the owner token, or [owner, fencing token] from a
   * native server store) made this handle's latest Acquisition (lib/lock/acquire.js calls it).
   *
   * @param {NonNullable<Grant>} grant
   * @param {number} since when the attempt that took it was sent
   * @returns {Acquisition | Promise<Acquisition>}
   */
  [kTook](grant, since) {
    const target = this.#target
    if (typeof grant !== 'string') return (this.#hold = new Acquisition(target, grant[0], since, grant[1]).watchIfListened())
    const hold = new Acquisition(target, grant, since, undefined).watchIfListened()
    this.#hold = hold
    // (A JS store's fencingToken speaks for its plain locks only.)
    const fenced = target.capabilities.fencesAfterAcquire && target.holdKind === undefined
    if (fenced && typeof target.store.fencingToken === 'function') return hold.fetchToken()
    return hold
  }
}

Object.defineProperty(Lock.prototype, Symbol.toStringTag, { value: 'Lock' })

/**
 * @param {Target} target
 * @param {string | null} owner a restored acquisition's owner token
 */
const newLock = (target, owner) => new Lock(kCreate, target, owner === null ? null : Acquisition.restored(target, owner))

module.exports = { Lock, newLock }
