'use strict'
/**
 * A caller waiting for a hold, from its first attempt to its answer: first
 * one whose attempt is in flight and which has not queued yet, then,
 * refused with time left, one in its lane's queue (lib/wait/waiting.js) that
 * tries again when woken or polled, until it gets in, its timeout passes or
 * its AbortSignal aborts (then it rejects with the signal's reason). The
 * timeout counts the first attempt too, even if the store never answers it;
 * a grant that arrives after the caller gave up goes back at once; a store
 * that cannot be reached is "not yet" while time is left. A lock handed over
 * from a store's line is taken once, however it arrives. lib/lock/acquire.js
 * makes them.
 */

const { DEFAULT_RETRY_DELAY_MS, WAIT, LINE_CLAIM_MS, inLine } = require('../core/protocol.js')
const { isThenable, noop } = require('../core/check.js')
const { isUnreachable } = require('../core/errors.js')
const { timer, cancel, realNow } = require('../core/timers.js')
const { withdraw } = require('./marks.js')
const { answeredBeforeClose } = require('../core/store-events.js')
const { cancelWith, endWith } = require('../core/abort.js')
const { firstTryInFlight, firstTriesOut, enqueue, pollLater, giveBack, NEXT, leave, leaveUnwanted } = require('./waiting.js')
const { takenOnce } = require('./handed.js')

/** @typedef {import('./waiting.js').Grant} Grant */
/** @typedef {import('../lock/acquisition.js').Target} Target */
/** @typedef {import('../lock/acquisition.js').Acquisition} Acquisition */

/** The method of what an acquire is for (a Lock) that turns a grant into its Acquisition. */
const kTook = Symbol('Lock.took')

/**
 * What an acquire is for: a Lock, which makes the store's grant an Acquisition (given
 * `since`, when the attempt that took it was sent) and keeps it as its latest.
 *
 * @typedef {{ [kTook](grant: NonNullable<Grant>, since: number): Acquisition | Promise<Acquisition> }} Taker
 */

/**
 * What a traced acquire counts (lib/core/tracing.js): its store round trips.
 *
 * @typedef {{ attempts: number }} Trace
 */

/**
 * An attempt was refused and no wait follows: a writer stops holding new
 * readers back for it (and answers once it has).
 *
 * @param {Target} target
 * @returns {null | Promise<null>}
 */
function refused(target) {
  const withdrawn = withdraw(target, DEFAULT_RETRY_DELAY_MS)
  return withdrawn === undefined ? null : withdrawn.then(() => null)
}

/** @typedef {import('./waiting.js').Waiter} QueuedWaiter */

/** @implements {QueuedWaiter} */
class Waiter {
  /**
   * @param {Taker} taker
   * @param {Target} want
   * @param {number} ticket when acquire was called, for arrival order
   * @param {number} timeout ms from now (0: its first attempt only, which it sent)
   * @param {number} retryDelay
   * @param {AbortSignal | undefined} signal ends the wait when it aborts
   * @param {Trace | undefined} trace
   */
  constructor(taker, want, ticket, timeout, retryDelay, signal, trace) {
    this.taker = taker
    this.want = want
    this.ticket = ticket
    this.retryDelay = retryDelay
    /** performance.now() when its time is up */
    this.until = performance.now() + timeout
    /** realNow() when the attempt that may take the lock was sent: its TTL runs from no later */
    this.since = 0
    this.trying = false
    this.again = false
    /** it gave up while an attempt was in flight */
    this.gaveUp = false
    this.gone = false
    this.crossed = false
    /** @type {unknown} the error of the last attempt, if the store could not be reached */
    this.failed = undefined
    /** @type {string | undefined} the owner of a lock handed to it from its store's line, once it took one */
    this.handedOwner = undefined
    /** @type {import('./waiting.js').Waiter[] | undefined} */
    this.queue = undefined
    /** @type {import('../core/timers.js').Timer | undefined} */
    this.poll = undefined
    /** @type {(hold: Acquisition | null | Promise<Acquisition | null>) => void} */
    this.resolve = noop
    /** @type {(error: unknown) => void} */
    this.reject = noop
    /** @type {Promise<Acquisition | null>} */
    this.settled = new Promise((resolve, reject) => {
      this.resolve = resolve
      this.reject = reject
    })
    this.deadline = timeout === 0 ? undefined : timer(() => this.giveUp(), timeout)
    this.signal = signal
    this.trace = trace
    // (A JS store's acquire, called before this, may have aborted it already.)
    if (signal?.aborted) queueMicrotask(() => this.aborted(signal.reason))
    else if (signal !== undefined) cancelWith(signal, this)
  }

  /**
   * Its first attempt, sent before it queued: while it is in flight, a release
   * of the same lane may land after the store looked, so it is marked to look
   * again (lib/wait/waiting.js's wake).
   *
   * @param {Promise<Grant>} answer
   * @param {number} sent
   */
  firstTry(answer, sent) {
    this.trying = true
    this.since = sent
    // (One that will not wait is no first attempt others keep a place in line for.)
    if (this.deadline !== undefined) firstTryInFlight(this, true)
    answer.then(
      (grant) => this.answered(grant),
      (error) => this.failedTry(error),
    )
    return this.settled
  }

  /** One attempt, for the head of its queue or a reader in the run of readers at the head. */
  attempt() {
    // (One whose signal aborted is about to leave: its signal's listener is on its way.)
    if (this.gone || this.signal?.aborted === true) return
    // A wake during an attempt in flight must not be lost: that attempt may
    // have been answered "held" just before the release.
    if (this.trying) {
      this.again = true
      return
    }
    cancel(this.poll)
    this.trying = true
    this.again = false
    this.crossed = false
    this.since = realNow()
    const { want } = this
    const { ops, handle, key, ttlMs } = want
    if (this.trace !== undefined) this.trace.attempts++
    let grant
    try {
      // In a store's line: with more of this thread behind it, the process keeps a place once it gets in.
      grant = inLine(want)
        ? ops.acquire(handle, key, ttlMs, /** @type {Waiter[]} */ (this.queue).length > 1 ? WAIT.inLineWithMore : WAIT.inLine, this.since)
        : ops.acquire(handle, key, ttlMs)
    } catch (error) {
      return this.failedTry(error)
    }
    if (isThenable(grant)) {
      /** @type {Promise<Grant>} */ (grant).then(
        (g) => this.answered(g),
        (error) => this.failedTry(error),
      )
    } else {
      this.answered(/** @type {Grant} */ (grant))
    }
  }

  /** @param {Grant} grant */
  answered(grant) {
    this.trying = false
    // It took a lock handed over meanwhile: this attempt, if it got anything, got that same one.
    if (this.handedOwner !== undefined) {
      if (grant !== null && ownerOf(grant) !== this.handedOwner) giveBack(this.want, grant)
      return
    }
    // A lock handed over can come twice (by message, and in this reply): taken
    // once, by whoever it reached first (even one that gave up, which gives
    // it back: never one another waiter here already holds). A fresh grant
    // names a handed owner only when its attempt was sent again after a lost
    // connection, its first sending having left that owner as the process's
    // place: a lock already taken here by its hand-over is not taken again
    // (and, the other way round, a hand-over of a lock held here is ignored).
    if (grant !== null && inLine(this.want) && !takenOnce(this.want.handle, grant)) grant = null
    const first = this.queue === undefined
    if (first) firstTryInFlight(this, false)
    // It gave up while this attempt was in flight: whatever it took goes back.
    // (A writer's refused attempt marked the key again: that mark goes too;
    // a first attempt refused in a store's line took a place there: it goes.)
    if (this.gaveUp) {
      if (grant !== null) return giveBack(this.want, grant)
      this.placeNotWanted()
      return void withdraw(this.want)
    }
    this.failed = undefined
    if (first) {
      if (grant !== null) return this.leaveBeforeQueueing(() => this.took(grant))
      // Refused: it queues with the time it has left (having crossed any
      // queue formed meanwhile), and looks again at once if a release came.
      if (this.timeLeft() > 0) return enqueue(this, { lookNow: this.again, crossed: true })
      this.placeNotWanted()
      return this.leaveBeforeQueueing(() => this.resolve(refused(this.want)))
    }
    // Taken: the next waiter polls later, as the lock has just been taken again
    // (unless more may hold it at once: then it tries now, and readers together).
    if (grant !== null) {
      const next = this.want.together === true ? NEXT.readers : this.want.shared === true ? NEXT.now : NEXT.later
      return leave(this, () => this.took(grant), next)
    }
    // A reader that tried with the one ahead of it waits for its turn at the head.
    if (this.queue?.[0] !== this) return
    if (this.again) return this.attempt()
    pollLater(this)
  }

  /**
   * The attempt failed. A store that could not be reached is "not yet": the
   * waiter tries again after retryDelay until its timeout (then rejects with
   * this error). Any other failure rejects it now.
   *
   * @param {unknown} error
   */
  failedTry(error) {
    this.trying = false
    if (this.handedOwner !== undefined) return
    if (this.gaveUp) return this.placeNotWanted()
    if (this.queue === undefined) {
      firstTryInFlight(this, false)
      if (this.timeLeft() <= 0 || !isUnreachable(error)) return this.leaveBeforeQueueing(() => this.reject(error))
      this.failed = error
      return enqueue(this, {})
    }
    if (!isUnreachable(error)) return leave(this, () => this.reject(error), NEXT.now)
    this.failed = error
    // (A release that came meanwhile, such as its own failed attempt's give-back, is looked at now.)
    if (this.queue[0] === this) pollLater(this, this.again ? 0 : this.retryDelay)
  }

  giveUp() {
    // On time even if the store has not answered an attempt in flight (it may
    // never): that attempt's result is dealt with when it comes.
    this.gaveUp = true
    if (this.queue === undefined) {
      firstTryInFlight(this, false)
      return this.leaveBeforeQueueing(() => this.resolve(null))
    }
    const failed = this.failed
    const settle = failed === undefined ? () => this.resolve(null) : () => this.reject(failed)
    // A writer's acquire answers once readers are let in again (one round
    // trip), unless the store could not be reached: then at once.
    const withdrawn = withdraw(this.want, this.retryDelay)
    const after = withdrawn === undefined || failed !== undefined ? settle : () => withdrawn.then(settle)
    leave(this, after, NEXT.now)
  }

  /**
   * Its signal aborted: it stops waiting at once and rejects with `reason`
   * (an attempt still in flight gives back whatever it takes; a writer's
   * mark is withdrawn, answered before its store closes).
   *
   * @param {unknown} reason
   */
  aborted(reason) {
    if (this.gone) return
    this.gaveUp = true
    const settle = () => this.reject(reason)
    if (this.queue === undefined) {
      firstTryInFlight(this, false)
      return this.leaveBeforeQueueing(settle)
    }
    const withdrawn = withdraw(this.want)
    if (withdrawn !== undefined) answeredBeforeClose(this.want.handle, withdrawn)
    leave(this, settle, NEXT.now)
  }

  /**
   * An attempt of its, refused, took or kept its process's place in the
   * store's line (one that waits does), and it does not wait after all (it
   * gave up while the attempt was out, or its first attempt came back with
   * no time left): the place goes, unless others of this thread wait for
   * the lane, or have first attempts out, whose place it is.
   */
  placeNotWanted() {
    if (this.deadline !== undefined) leaveUnwanted(this.want)
  }

  /** It left (settled): no timeout or signal ends it any more. */
  ended() {
    cancel(this.deadline)
    if (this.signal !== undefined) endWith(this.signal, this)
  }

  /**
   * The lock was handed to it from its store's line, for `owner`, no earlier
   * than `since` (when the place it went to was asked for), so it is held
   * for the claim window from then at least: it leaves the queue with a
   * hold, and claims the lock for its TTL at once.
   *
   * @param {string} owner
   * @param {number} token
   * @param {number} since
   */
  handed(owner, token, since) {
    this.handedOwner = owner
    if (this.queue !== undefined) return leave(this, () => this.tookHanded(owner, token, since), NEXT.later)
    firstTryInFlight(this, false)
    this.leaveBeforeQueueing(() => this.tookHanded(owner, token, since))
  }

  /**
   * @param {string} owner
   * @param {number} token
   * @param {number} since
   */
  tookHanded(owner, token, since) {
    let hold
    try {
      hold = /** @type {Acquisition} */ (this.taker[kTook]([owner, token], since))
    } catch (error) {
      return this.reject(error)
    }
    const { handle, key, ttlMs, ops } = this.want
    const extra = hold.extras()
    extra.heldFor = Math.min(LINE_CLAIM_MS, ttlMs)
    if (extra.watched) hold.watchExpiry()
    const sent = realNow()
    // A claim the store could not answer leaves the hold to its claim window.
    // With more waiting here (queued, or first attempts still out: their
    // answers will not place them in a line whose place went to this one),
    // the process keeps a place at the back of the line.
    const more = (this.queue?.length ?? 0) > 0 || firstTriesOut(handle, this.want.lane)
    const after = (/** @type {boolean} */ claimed) => (claimed ? hold.extended(sent, ttlMs) : hold.markLost('expired'))
    try {
      const claimed = /** @type {NonNullable<import('../core/protocol.js').StoreOps['claim']>} */ (ops.claim)(handle, key, owner, ttlMs, more, sent)
      if (isThenable(claimed)) /** @type {Promise<boolean>} */ (claimed).then(after, noop)
      else after(/** @type {boolean} */ (claimed))
    } catch {}
    this.resolve(hold)
  }

  /**
   * Settle before it ever queued.
   *
   * @param {() => void} settle
   */
  leaveBeforeQueueing(settle) {
    this.gone = true
    this.ended()
    settle()
  }

  /** ms of its timeout left. */
  timeLeft() {
    return this.until - performance.now()
  }

  /**
   * Settle with the Acquisition the grant is for its taker.
   *
   * @param {NonNullable<Grant>} grant
   */
  took(grant) {
    try {
      this.resolve(this.taker[kTook](grant, this.since))
    } catch (error) {
      this.reject(error)
    }
  }
}

/** @param {NonNullable<Grant>} grant */
const ownerOf = (grant) => (typeof grant === 'string' ? grant : grant[0])

module.exports = { Waiter, refused, kTook }
