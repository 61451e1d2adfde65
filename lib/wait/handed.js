'use strict'
/**
 * Locks handed over from a store's line, taken once. The same hand-over can
 * reach this thread twice (told by message, and in the reply of an attempt
 * that ran after it), and an attempt sent again after a lost connection can
 * be granted, fresh, the lock its first sending's place was handed: each is
 * one lock, taken by whichever way reached a waiter first.
 */

const { realNow } = require('../core/timers.js')

/**
 * Owner tokens of locks handed to this thread, per store handle, once one
 * of its waiters took it: the same hand-over can arrive twice (told by
 * message, and in the reply of an attempt that ran after it), and is taken
 * once. Kept a minute, oldest first (so the old ones go from the front, a
 * few at a time). Fresh grants are not kept: only the holds of them still
 * held (below), as a fresh grant's owner can be a hand-over's only when its
 * attempt was sent again after a lost connection.
 *
 * @type {WeakMap<object, Map<string, number>>}
 */
const handedTaken = new WeakMap()
const HANDED_KEPT_MS = 60_000

/**
 * Owner tokens of this thread's holds in a store's line still held, per
 * store handle, with when their TTL passes unless extended: a hand-over of
 * one of them is its own lock come back (a re-sent attempt took it fresh
 * before the hand-over's message came), never a second lock. Holds never
 * released are forgotten once their TTL has passed, looked for only when
 * many are kept (oldest first, from the front), so a hold that is released
 * costs an insert and a delete.
 *
 * @type {WeakMap<object, Map<string, number>>}
 */
const heldHere = new WeakMap()

const HELD_KEPT_BEFORE_PRUNING = 256

/**
 * A hold of `owner` in a store's line begins, held until `until` (realNow)
 * unless extended, or (with `until` undefined) ends.
 *
 * @param {object} handle
 * @param {string} owner
 * @param {number} [until]
 */
function holding(handle, owner, until) {
  let held = heldHere.get(handle)
  if (until === undefined) return void held?.delete(owner)
  if (held === undefined) heldHere.set(handle, (held = new Map()))
  if (held.size >= HELD_KEPT_BEFORE_PRUNING) {
    const now = realNow()
    for (const [old, lapses] of held) {
      if (lapses > now) break
      held.delete(old)
    }
  }
  held.set(owner, until)
}

/**
 * Whether `owner`, handed to this thread, is taken for the first time now
 * (then it is marked taken).
 *
 * @param {object} handle
 * @param {string} owner
 */
function firstTake(handle, owner) {
  let taken = handedTaken.get(handle)
  if (taken === undefined) handedTaken.set(handle, (taken = new Map()))
  if (taken.has(owner) || heldHere.get(handle)?.has(owner) === true) return false
  const now = realNow()
  for (const [old, at] of taken) {
    if (now - at <= HANDED_KEPT_MS) break
    taken.delete(old)
  }
  taken.set(owner, now)
  return true
}

/**
 * Whether `owner`, handed to this thread, was taken already.
 *
 * @param {object} handle
 * @param {string} owner
 */
const wasTaken = (handle, owner) => handedTaken.get(handle)?.has(owner) === true

/**
 * A hand-over that was marked taken is not, after all (its lane's first
 * waiter asks the store instead: lib/wait/waiting.js).
 *
 * @param {object} handle
 * @param {string} owner
 */
const forget = (handle, owner) => void handedTaken.get(handle)?.delete(owner)

/**
 * Whether a grant from a store's line is this thread's to take: a hand-over
 * the first time it arrives (then marked taken); a fresh grant unless its
 * owner was handed here and taken already.
 *
 * @param {object} handle
 * @param {string | [string, number] | [string, number, true]} grant
 */
const takenOnce = (handle, grant) =>
  typeof grant !== 'string' && grant.length === 3 ? firstTake(handle, grant[0]) : !wasTaken(handle, typeof grant === 'string' ? grant : grant[0])

module.exports = { firstTake, wasTaken, takenOnce, holding, forget }
