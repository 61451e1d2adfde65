'use strict'
/**
 * An acquire, whole: its first attempt goes to the store before it queues
 * (with waiters of its lane already queued in this thread, it queues at
 * once, behind them); a first attempt answered at once (always, on a store
 * that answers in this thread) settles without a waiter being made at all; otherwise the
 * caller is a Waiter (lib/wait/waiter.js) until it gets in, its timeout passes or
 * its AbortSignal aborts. A signal aborted already stops the acquire before
 * the store is asked.
 */

const { WAIT, inLine, NATIVE_LOCK_OPS } = require('../core/protocol.js')
const { joinsBatch, askInBatch } = require('../core/acquires-together.js')
const { isThenable } = require('../core/check.js')
const { realNow } = require('../core/timers.js')
const { waitersOf, takeTicket, firstTriesOut, enqueue } = require('../wait/waiting.js')
const { Waiter, refused, kTook } = require('../wait/waiter.js')
const { takenOnce } = require('../wait/handed.js')

/** @typedef {import('../wait/waiting.js').Grant} Grant */
/** @typedef {import('./acquisition.js').Target} Target */
/** @typedef {import('./acquisition.js').Acquisition} Acquisition */
/** @typedef {import('../wait/waiter.js').Taker} Taker */
/** @typedef {import('../wait/waiter.js').Trace} Trace */

/**
 * Acquire `target` for a fresh owner, for `taker`: its Acquisition, or null if the
 * lock stayed held for `timeout` ms; or a promise of that when the store (or
 * the wait) has to be awaited. Throws (or rejects with) `signal`'s reason
 * once it aborted.
 *
 * @param {Taker} taker
 * @param {Target} target
 * @param {number} timeout
 * @param {number} retryDelay
 * @param {AbortSignal | undefined} signal
 * @param {Trace | undefined} trace
 * @returns {Acquisition | null | Promise<Acquisition | null>}
 */
function acquire(taker, target, timeout, retryDelay, signal, trace) {
  if (signal?.aborted) throw signal.reason
  const { handle, key, lane, ttlMs, ops } = target
  const ticket = takeTicket()
  // With waiters queued in this thread, a newcomer queues behind them.
  if (waitersOf(handle, lane) !== undefined) return timeout === 0 ? null : queued(new Waiter(taker, target, ticket, timeout, retryDelay, signal, trace))
  if (trace !== undefined) trace.attempts++
  // In a store's line, a caller that waits takes its process's place if refused
  // (and, with first attempts of this thread out already, keeps it for them if it
  // gets in), asked for as it is sent.
  const asked = inLine(target) ? realNow() : undefined
  // The hold's time runs on the real clock (the store's TTL does), from no
  // later than the attempt was sent; the timeout on performance.now, which,
  // like setTimeout, follows fake timers when a test installs them.
  const sent = asked ?? (target.capabilities.saysWhenLapsed ? 0 : realNow())
  const wait = asked === undefined ? WAIT.now : lineWait(target, timeout)
  if (target.capabilities.acquiresTogether && ops === NATIVE_LOCK_OPS && joinsBatch()) {
    // Answered in its batch as it would have been at once: a failure as a
    // store's answer that came later (a file busy is "not yet" while time is left).
    /** @type {(grant: Grant, error: unknown) => unknown} */
    const settle = (grant, error) =>
      error === undefined
        ? atOnce(taker, target, ticket, timeout, retryDelay, signal, trace, grant, asked, sent)
        : answeredLater(taker, target, ticket, timeout, retryDelay, signal, trace, Promise.reject(error), sent)
    return askInBatch(handle, key, ttlMs, wait, asked ?? 0, signal, settle)
  }
  const grant = asked !== undefined ? ops.acquire(handle, key, ttlMs, wait, asked) : ops.acquire(handle, key, ttlMs)
  if (!isThenable(grant)) return atOnce(taker, target, ticket, timeout, retryDelay, signal, trace, /** @type {Grant} */ (grant), asked, sent)
  return answeredLater(taker, target, ticket, timeout, retryDelay, signal, trace, /** @type {Promise<Grant>} */ (grant), sent)
}

/**
 * A first attempt whose answer is a promise: sent at `sent` (realNow()).
 *
 * @param {Taker} taker
 * @param {Target} target
 * @param {number} ticket
 * @param {number} timeout
 * @param {number} retryDelay
 * @param {AbortSignal | undefined} signal
 * @param {Trace | undefined} trace
 * @param {Promise<Grant>} answer
 * @param {number} sent
 * @returns {Promise<Acquisition | null>}
 */
function answeredLater(taker, target, ticket, timeout, retryDelay, signal, trace, answer, sent) {
  // (One that does not wait still answers an abort at once, as a Waiter with no deadline.)
  if (timeout === 0 && signal === undefined) return answer.then((g) => (g === null ? refused(target) : taker[kTook](g, sent)))
  return new Waiter(taker, target, ticket, timeout, retryDelay, signal, trace).firstTry(answer, sent)
}

/**
 * A first attempt answered at once (or in its batch, before anything else
 * ran): no waiter is made unless it has to wait. In a store's line, a lock
 * handed over can come twice (by message, and in this answer): taken once,
 * by whichever reached a waiter first.
 *
 * @param {Taker} taker
 * @param {Target} target
 * @param {number} ticket
 * @param {number} timeout
 * @param {number} retryDelay
 * @param {AbortSignal | undefined} signal
 * @param {Trace | undefined} trace
 * @param {Grant} grant
 * @param {number | undefined} asked when it was sent, in a store's line
 * @param {number} sent when it was sent (realNow(); 0 where the store says when a hold lapses)
 */
function atOnce(taker, target, ticket, timeout, retryDelay, signal, trace, grant, asked, sent) {
  const took = grant !== null && (asked === undefined || takenOnce(target.handle, grant))
  if (took) return taker[kTook](grant, sent)
  return timeout === 0 ? refused(target) : queued(new Waiter(taker, target, ticket, timeout, retryDelay, signal, trace))
}

/**
 * How a first attempt waits in its store's line: not at all (`timeout` 0);
 * or, refused, in its process's place, which it keeps for the waiters of
 * this thread whose first attempts are out already should it get in first
 * (they may have been refused, and so be waiting in that place).
 *
 * @param {Target} target
 * @param {number} timeout
 */
function lineWait({ handle, lane }, timeout) {
  if (timeout === 0) return WAIT.now
  return firstTriesOut(handle, lane) ? WAIT.inLineWithMore : WAIT.inLine
}

/**
 * A waiter that queues from the start.
 *
 * @param {Waiter} waiter
 */
function queued(waiter) {
  enqueue(waiter, {})
  return waiter.settled
}

module.exports = { acquire, kTook }
