'use strict'
/**
 * An acquire's first attempt, sent before its caller queues: while it is in
 * flight, a release of the same lane may land after the store looked, so the
 * attempt is marked to look again (lib/lock.js and lib/waiting.js read it).
 */

/**
 * First attempts still in flight, per handle and lane: a release that lands
 * while one is out may come after the store looked, so it must try again.
 *
 * @type {WeakMap<object, Map<string, Set<{ again: boolean }>>>}
 */
const attempts = new WeakMap()

/**
 * @param {object} handle
 * @param {string} lane
 */
function attemptStarted(handle, lane) {
  let byKey = attempts.get(handle)
  if (byKey === undefined) attempts.set(handle, (byKey = new Map()))
  let set = byKey.get(lane)
  if (set === undefined) byKey.set(lane, (set = new Set()))
  const attempt = { again: false }
  set.add(attempt)
  return attempt
}

/**
 * @param {object} handle
 * @param {string} lane
 * @param {{ again: boolean }} attempt
 */
function attemptEnded(handle, lane, attempt) {
  const byKey = attempts.get(handle)
  const set = byKey?.get(lane)
  if (byKey === undefined || set === undefined) return
  set.delete(attempt)
  if (set.size === 0) byKey.delete(lane)
}

/**
 * A release of `lane` happened: every first attempt in flight looks again.
 *
 * @param {object} handle
 * @param {string} lane
 */
function releasedDuringAttempts(handle, lane) {
  const inFlight = attempts.get(handle)?.get(lane)
  if (inFlight !== undefined) for (const attempt of inFlight) attempt.again = true
}

module.exports = { attemptStarted, attemptEnded, releasedDuringAttempts }
