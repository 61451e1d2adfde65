'use strict'
/**
 * One acquisition: its owner token and what is known about it. Every Lock
 * handle that speaks for an acquisition (the handle that took it, and the
 * one run() gives its callback) shares its Acquisition, so an extension through
 * either moves both, and a later acquisition through the same handle never
 * changes it. What only some holds need (the lost-lock signal, autoExtend's
 * timer, a hold length other than the TTL) is made on first need, so a
 * plain run() pays for none of it.
 */

const { inspect } = require('node:util')
const { describe, isThenable, noop } = require('../core/check.js')
const { LockNotHeldError } = require('../core/errors.js')
const { realTimer, cancel, realNow } = require('../core/timers.js')
const { wake, giveBack } = require('../wait/waiting.js')
const { holding } = require('../wait/handed.js')
const { answeredBeforeClose } = require('../core/store-events.js')
const { queueRelease } = require('../core/queued-releases.js')
const { inLine } = require('../core/protocol.js')
const { releaseChannel, extendChannel, lostChannel, traceRelease, traceRenewal, publishLost } = require('../core/tracing.js')

/**
 * What a lock is on, shared by a handle, the handles run() makes from it and
 * their holds: made once per lock() call.
 *
 * @typedef {object} Target
 * @property {string} key
 * @property {number} ttlMs
 * @property {import('../../index').LockStore} store
 * @property {object} handle the store's native handle
 * @property {Readonly<import('../core/protocol.js').Capabilities>} capabilities what its store can do
 * @property {import('../core/protocol.js').StoreOps} ops what to do with `handle` (for this kind of hold)
 * @property {string} lane the queue its waiters wait in: the key for a plain lock
 * @property {boolean} [shared] more than one may hold it at once (a permit, a reader)
 * @property {boolean} [together] any number may (a reader): queued readers try together
 * @property {import('./kinds.js').Kind} [holdKind] a semaphore's or read-write hold's kind (for serialize())
 */

/**
 * @typedef {object} Extra
 * @property {number | undefined} heldFor a hold length other than the TTL (Infinity: restored, start unknown)
 * @property {AbortController | undefined} controller the signal's (it costs µs: made when first read)
 * @property {import('../core/timers.js').Timer | undefined} expiry aborts the signal when the time is up
 * @property {import('../core/timers.js').Timer | undefined} renewal autoExtend's next extension
 * @property {AbortController | undefined} ended the aborted one a released hold's handle gives out
 * @property {boolean} watched its expiry is watched (for its signal, or a listener of lost holds)
 */

class Acquisition {
  /**
   * @param {Target} target
   * @param {string} owner
   * @param {number} since
   * @param {number | bigint | null | undefined} token
   */
  constructor(target, owner, since, token) {
    this.target = target
    this.owner = owner
    /** True while it is ours by what we know; false once released or lost. */
    this.held = true
    /** We held it and know we lost it (a release is not a loss). */
    this.lost = false
    // Unless the store says at once when it lapses (memory), a hold
    // lasts heldFor (default: the TTL) from `since`: the real clock's time
    // (realNow, as the store counts the TTL in real time, whatever a test
    // fakes) when its acquire or last extension was sent, never later than
    // the store's start.
    this.since = since
    /** The fencing token the store handed over with the acquisition, if it did. */
    this.token = token
    /** @type {Extra | undefined} */
    this.extra = undefined
    /** realNow() when it was taken, for a traced release's heldMs; 0 when nobody listened then. */
    this.takenAt = releaseChannel.hasSubscribers ? realNow() : 0
    // (In a store's line, a hand-over of a lock held here is this lock come back: lib/wait/waiting.js.)
    if (inLine(target)) holding(target.handle, owner, since + target.ttlMs)
  }

  /** A hold restored from serialize(): it started elsewhere, at a time unknown here. @param {Target} target @param {string} owner */
  static restored(target, owner) {
    const hold = new Acquisition(target, owner, 0, undefined)
    // Until an extension dates it, its signal aborts only on a loss the store reports.
    hold.extras().heldFor = Infinity
    hold.takenAt = 0
    return hold.watchIfListened()
  }

  /**
   * With someone listening for lost holds, a hold whose time runs out
   * unextended is one: its expiry timer (the signal's) is armed now.
   */
  watchIfListened() {
    if (lostChannel.hasSubscribers) this.watchExpiry()
    return this
  }

  /** What a handle that never held anything speaks for. @param {Target} target */
  static nothing(target) {
    const hold = new Acquisition(target, '', 0, undefined)
    hold.ended()
    return hold
  }

  extras() {
    return (this.extra ??= { heldFor: undefined, controller: undefined, expiry: undefined, renewal: undefined, ended: undefined, watched: false })
  }

  /** The fencing token, while held: handed over, or (memory) looked up in the store. */
  fencingToken() {
    if (!this.held) return null
    if (this.token !== undefined) return this.token
    const { handle, key, ops } = this.target
    return ops.fencingToken(handle, key, this.owner)
  }

  /**
   * Aborts, with a LockNotHeldError as its reason, as soon as this hold is
   * known to be lost. A hold that is not held gives an aborted signal (a
   * released hold's own signal is left as it was: release is not a loss).
   */
  signal() {
    const extra = this.extras()
    if (this.held) {
      if (extra.controller === undefined) {
        extra.controller = new AbortController()
        this.watchExpiry()
      } else if (!extra.controller.signal.aborted && this.left() <= 0) {
        this.markLost('expired')
      }
      return extra.controller.signal
    }
    if (this.lost && extra.controller !== undefined) return extra.controller.signal
    if (extra.ended === undefined) {
      extra.ended = new AbortController()
      extra.ended.abort(new LockNotHeldError(this.target.key))
    }
    return extra.ended.signal
  }

  /** ms this hold has left by what we know; <= 0 once it lapsed (or was found gone). */
  left() {
    const { capabilities, handle, key, ttlMs, ops } = this.target
    if (capabilities.saysWhenLapsed) {
      if (!ops.holds(handle, key, this.owner)) return 0
      return /** @type {number | null} */ (ops.remainingTime(handle, key, this.owner)) ?? 0
    }
    // (A restored hold's length is Infinity: its start is unknown until an extension dates it.)
    return this.since + (this.extra?.heldFor ?? ttlMs) - realNow()
  }

  /**
   * The store extended it, by `ttl` from `sent`.
   *
   * @param {number} sent
   * @param {number} ttl
   */
  extended(sent, ttl) {
    if (!this.held) return
    this.since = sent
    // Still held here, to a later time (kept at the back, among the later
    // lapses): a hand-over of it, however late, is this lock come back.
    if (inLine(this.target)) {
      holding(this.target.handle, this.owner)
      holding(this.target.handle, this.owner, sent + ttl)
    }
    const extra = this.extra
    if (ttl !== this.target.ttlMs || extra?.heldFor !== undefined) this.extras().heldFor = ttl
    if (extra?.watched === true) this.watchExpiry()
  }

  /** Abort the signal when the hold's time is up (re-armed by each extension). */
  watchExpiry() {
    const extra = this.extras()
    extra.watched = true
    cancel(extra.expiry)
    const left = this.left()
    if (left <= 0) return this.markLost('expired')
    if (left === Infinity) return
    // A store that says when a hold lapses counts whole ms: a timer a hair early looks again.
    extra.expiry = realTimer(() => this.held && this.watchExpiry(), Math.max(1, Math.ceil(left)))
  }

  /**
   * autoExtend: extend every third of the TTL while held; a failure aborts
   * the signal. (On real timers: fake timers that are not advanced must not
   * let a hold lapse.)
   */
  renewLater() {
    if (!this.held) return
    const extra = this.extras()
    cancel(extra.renewal)
    extra.renewal = realTimer(() => this.renew(), Math.max(1, Math.floor(this.target.ttlMs / 3)))
  }

  renew() {
    if (!this.held) return
    // Woken after the hold ran out (a stalled event loop): it may have been
    // someone else's meanwhile, even if an extension would still succeed.
    if (this.left() <= 0) return this.markLost('expired')
    const { capabilities, ttlMs } = this.target
    const sent = capabilities.saysWhenLapsed ? 0 : realNow()
    const after = (/** @type {boolean} */ extended) => {
      if (!this.held) return
      if (!extended) return this.markLost('autoExtend')
      this.extended(sent, ttlMs)
      this.renewLater()
    }
    // A store that fails is asked again next time; the expiry still counts down.
    const retry = () => this.renewLater()
    let extended
    try {
      extended = extendChannel.hasSubscribers
        ? traceRenewal(this.target, ttlMs, () => this.extendInStore(ttlMs))
        : this.extendInStore(ttlMs)
    } catch {
      return retry()
    }
    if (isThenable(extended)) /** @type {Promise<boolean>} */ (extended).then(after, retry)
    else after(/** @type {boolean} */ (extended))
  }

  /**
   * Ask the store to extend it by `ttl`: whether it did, now or as a
   * promise. Untraced: Lock.extend traces its whole call (one that rejects
   * before reaching the store too), autoExtend each of its store calls.
   *
   * @param {number} ttl
   * @returns {boolean | Promise<boolean>}
   */
  extendInStore(ttl) {
    const { handle, key, ops } = this.target
    return ops.extend(handle, key, this.owner, ttl)
  }

  /**
   * Give it back: whether the store released it, now or as a promise.
   *
   * @returns {boolean | Promise<boolean>}
   */
  giveBack() {
    return releaseChannel.hasSubscribers ? traceRelease(this, () => this.giveBackUntraced()) : this.giveBackUntraced()
  }

  /** @returns {boolean | Promise<boolean>} */
  giveBackUntraced() {
    // Marked before the store call, so a second release() racing this one
    // returns false instead of sending a second delete.
    this.ended()
    const { handle, key, ops } = this.target
    let released
    try {
      released = ops.release(handle, key, this.owner)
    } catch (error) {
      this.stillHeld()
      throw error
    }
    if (!isThenable(released)) return this.released(/** @type {boolean} */ (released), true)
    // A store's line hands the lock on itself (to a waiter here, if this
    // process is first in line, by the release's reply): nobody is woken.
    // A store that answers a connection's commands in the order they were
    // sent (answersInOrder): the next waiter's attempt can go right behind the release
    // instead of a round trip after it.
    const handsOn = inLine(this.target)
    const inOrder = this.target.capabilities.answersInOrder
    if (inOrder && !handsOn) wake(handle, this.target.lane)
    return /** @type {Promise<boolean>} */ (released).then(
      (r) => this.released(r, !inOrder && !handsOn),
      (error) => {
        this.stillHeld()
        throw error
      },
    )
  }

  /**
   * @param {boolean} released
   * @param {boolean} wakeNext whether the next waiter is woken now (else it was already)
   */
  released(released, wakeNext) {
    if (released && wakeNext) wake(this.target.handle, this.target.lane)
    else if (!released && !this.held && !this.lost) {
      this.lost = true
      if (lostChannel.hasSubscribers) publishLost(this.target, 'release')
    }
    return released
  }

  /** The store did not answer a release: we may still hold it, so a retry must be possible. */
  stillHeld() {
    if (this.lost) return
    this.held = true
    if (inLine(this.target)) holding(this.target.handle, this.owner, this.since + (this.extra?.heldFor ?? this.target.ttlMs))
  }

  /** It is not held any more (released, or lost): its timers stop; its signal is left as it was. */
  ended() {
    this.held = false
    this.endTimers()
    if (inLine(this.target)) holding(this.target.handle, this.owner)
  }

  /**
   * run()'s release: a failure here must not replace the callback's outcome
   * (its error, or its result once it has run), so it becomes a process
   * warning; the lock then lapses at its TTL. Returns undefined, or a promise
   * that never rejects: the answer's, or once the release is written (see below).
   *
   * @param {boolean} fnFailed
   */
  giveBackQuietly(fnFailed) {
    // Released inside fn already: nothing to give back. (A hold found lost is
    // still released: by our clock it lapsed, but the store may still have it.)
    if (!this.held && !this.lost) return undefined
    /** @param {unknown} releaseError */
    const warn = (releaseError) => {
      const outcome = fnFailed ? 'the callback error is the one thrown' : 'its result is returned'
      process.emitWarning(
        `Lock "${this.target.key.slice(0, 200)}": release after run() failed (${inspect(releaseError)}); ` +
          `${outcome}, and the lock stays held until its TTL passes.`,
        { type: 'LockReleaseWarning' },
      )
    }
    // A store that queues releases writes this one with its next operation
    // (lib/core/queued-releases.js); traced, or with a listener for locks
    // found lost, it is written now, for them to have its answer.
    const listened = releaseChannel.hasSubscribers || lostChannel.hasSubscribers
    if (this.target.capabilities.queuesReleases && this.held && !listened) {
      const { handle, key, ops, lane } = this.target
      if (queueRelease(handle, ops, key, this.owner)) {
        this.ended()
        // A waiter here tries now: its attempt writes the release first.
        wake(handle, lane)
        return undefined
      }
    }
    let released
    try {
      released = this.giveBack()
    } catch (releaseError) {
      return warn(releaseError)
    }
    if (!isThenable(released)) return undefined
    const { capabilities, handle, key, ops } = this.target
    if (!capabilities.tellsWhenSent) return /** @type {Promise<boolean>} */ (released).then(noop, warn)
    // The answer changes nothing run() returns: a store that says when the
    // release is written ends run() then (the bytes are in the kernel's send
    // buffer, so they reach the server even if the process exits next, and
    // the key's next operation is behind them), a round trip sooner. Its
    // close() waits for the answer.
    const answer = /** @type {Promise<boolean>} */ (released)
    answeredBeforeClose(handle, answer)
    const answered = answer.then(noop, warn)
    try {
      return /** @type {NonNullable<import('../core/protocol.js').StoreOps['sent']>} */ (ops.sent)(handle, key)
    } catch {
      return answered
    }
  }

  /** @param {import('../core/tracing.js').LostReason} reason how it was found lost (for listeners) */
  markLost(reason) {
    if (!this.held) return
    this.ended()
    this.lost = true
    // The aborted signal stays this hold's.
    this.extra?.controller?.abort(new LockNotHeldError(this.target.key))
    if (lostChannel.hasSubscribers) publishLost(this.target, reason)
  }

  /** Stop the hold's timers (its signal is left as it was). */
  endTimers() {
    const extra = this.extra
    if (extra === undefined) return
    cancel(extra.expiry)
    cancel(extra.renewal)
  }

  /**
   * A JS store's own fencing token for this acquisition (its optional
   * `fencingToken(key, owner)`); if that fails, the acquisition is given back.
   *
   * @returns {Acquisition | Promise<Acquisition>}
   */
  fetchToken() {
    const { store, key } = this.target
    const fail = (/** @type {unknown} */ error) => {
      // Never the caller's, so not a loss anyone is told of.
      this.ended()
      this.lost = true
      giveBack(this.target, this.owner)
      throw error
    }
    const accept = (/** @type {unknown} */ token) => {
      const fits =
        token === null ||
        typeof token === 'bigint' ||
        (typeof token === 'number' && Number.isSafeInteger(token) && token >= 0)
      if (!fits) {
        fail(
          new TypeError(
            `LockStore.fencingToken must return a non-negative integer, a bigint or null, got ${describe(token)}`,
          ),
        )
      }
      this.token = /** @type {number | bigint | null} */ (token)
      return this
    }
    let token
    try {
      token = /** @type {NonNullable<import('../../index').LockStore['fencingToken']>} */ (store.fencingToken).call(store, key, this.owner)
    } catch (error) {
      return fail(error)
    }
    return isThenable(token) ? Promise.resolve(token).then(accept, fail) : accept(token)
  }
}

module.exports = { Acquisition }
