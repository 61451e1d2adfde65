'use strict'
/**
 * Waits a caller cancels with an AbortSignal (the `signal` option). One
 * signal is often given to many waits (an HTTP request's, to every lock its
 * handler takes), and to a million over a long-lived one: each signal gets
 * one listener, however many of its waits are pending (EventTarget warns of
 * a leak past ten), and it is removed when the last of them ends.
 */

/** A wait that a signal can end: told the signal's reason when it aborts. @typedef {{ aborted(reason: unknown): void }} Cancellable */

/** @type {WeakMap<AbortSignal, Set<Cancellable>>} the waits each signal ends */
const pending = new WeakMap()

/** @param {Event} event */
function abortWaits(event) {
  const signal = /** @type {AbortSignal} */ (event.target)
  const waits = pending.get(signal)
  if (waits === undefined) return
  pending.delete(signal)
  for (const wait of waits) wait.aborted(signal.reason)
}

/**
 * `signal` ends `wait` if it aborts before endWith(signal, wait).
 *
 * @param {AbortSignal} signal not aborted yet
 * @param {Cancellable} wait
 */
function cancelWith(signal, wait) {
  let waits = pending.get(signal)
  if (waits === undefined) {
    pending.set(signal, (waits = new Set()))
    signal.addEventListener('abort', abortWaits, { once: true })
  }
  waits.add(wait)
}

/**
 * `wait` ended: its signal no longer ends it (and, with no other wait on
 * it, the signal loses its listener).
 *
 * @param {AbortSignal} signal
 * @param {Cancellable} wait
 */
function endWith(signal, wait) {
  const waits = pending.get(signal)
  if (waits === undefined || !waits.delete(wait) || waits.size > 0) return
  pending.delete(signal)
  signal.removeEventListener('abort', abortWaits)
}

module.exports = { cancelWith, endWith }
