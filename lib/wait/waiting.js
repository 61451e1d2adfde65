'use strict'
/**
 * Waiting for a held lock, on the JS thread: the queues and the wake-ups.
 * Waiters queue per store handle and lane (a plain lock's lane is its key; a
 * semaphore and a read-write key each have one of their own) in arrival
 * order, and only the head asks the store; when a permit or a reader at the
 * head gets in, the next tries at once, and a writer at the head holds back
 * the readers behind it. A release through the same store wakes the head at
 * once (a store in this thread hands the lock straight over); so does one
 * another process announces (announcesReleases). Polling every
 * retryDelay is only the fallback, for releases nobody announced and locks
 * that lapse at their TTL. A newcomer never jumps the queue, so a worker
 * looping back to the lock it released queues behind the others instead of
 * starving them. What one attempt does and how an acquire ends is
 * lib/wait/waiter.js's.
 *
 * Waiting is timers, promises and wake-ups, which JS has for nanoseconds and
 * napi does not have at all: a hop to Rust per wait step would cost more than
 * the step.
 */

const { laneOf, inLine, opsOf, LINE_RENEW_MS, LINE_CLAIM_MS } = require('../core/protocol.js')
const { realNow } = require('../core/timers.js')
const { isThenable, noop } = require('../core/check.js')
const { onAnnouncedRelease, onClosed, answeredBeforeClose } = require('../core/store-events.js')
const { timer, cancel } = require('../core/timers.js')
const { dropCrossedMarks } = require('./marks.js')
const { firstTake, forget } = require('./handed.js')

/**
 * An acquisition attempt's answer: the owner token, `[owner, fencing token]`
 * (a store that fences as it acquires), `[owner, fencing token, true]` for a
 * lock handed over from a store's line, or null when the lock is held.
 *
 * @typedef {string | [string, number] | [string, number, true] | null} Grant
 */

/**
 * What a waiter waits for: a Target (lib/lock/acquisition.js), of which waiting needs this.
 *
 * @typedef {object} Want
 * @property {object} handle
 * @property {string} key the store's key
 * @property {string} lane the queue it waits in
 * @property {number} ttlMs
 * @property {import('../core/protocol.js').StoreOps} ops
 * @property {Readonly<import('../core/protocol.js').Capabilities>} capabilities what its store can do
 * @property {boolean} [shared] more may hold it at once: the next waiter tries when this one gets in
 * @property {boolean} [together] any number may hold it (a reader): when one gets in, every one
 *   right behind it tries at once, together, not one round trip after another
 */

/**
 * A caller waiting for a hold (lib/wait/waiter.js), as its lane's
 * queue sees it.
 *
 * @typedef {object} Waiter
 * @property {Want} want
 * @property {number} ticket when acquire was called, for arrival order
 * @property {number} retryDelay
 * @property {boolean} trying an attempt is in flight
 * @property {boolean} again a release came while it was: look again at once
 * @property {boolean} gone it left (settled)
 * @property {boolean} crossed a writer whose refused first attempt (which marked the key) was
 *   sent before this thread's queue formed, and which has not tried since
 * @property {Waiter[] | undefined} queue its lane's queue, once it queued
 * @property {import('../core/timers.js').Timer | undefined} poll
 * @property {() => void} ended it left: its timeout (and signal) no longer end it
 * @property {() => void} attempt one attempt now (or, while one is in flight, another right after it)
 * @property {(owner: string, token: number, since: number) => void} handed the lock was handed to
 *   it from its store's line, for `owner`, no earlier than `since` (lib/wait/waiter.js)
 */

/** @type {WeakMap<object, Map<string, Waiter[]>>} store handle -> lane -> waiters */
const queues = new WeakMap()

/**
 * First attempts in flight, per handle and lane, of callers not queued yet: a
 * release that lands meanwhile may come after the store looked, so they look
 * again (lib/wait/waiter.js).
 *
 * @type {WeakMap<object, Map<string, Set<Waiter>>>}
 */
const firstTries = new WeakMap()

/**
 * @param {object} handle
 * @param {string} lane
 */
function waitersOf(handle, lane) {
  return queues.get(handle)?.get(lane)
}

/**
 * A lock handed to this thread from its store's line (`<token> <asked>
 * <owner> <key>`): the first waiter of its lane takes it (with none queued,
 * the first caller whose first attempt is out); with none left, it goes
 * back, and on to the next in line.
 *
 * The message may come late, long after the waiter whose attempt took the
 * place it went to: that waiter may have given up, this thread left the
 * line, another waiter queued and the lock lapsed unclaimed. It is still
 * true to its word: the lock went to the place no earlier than `asked`,
 * when the request that took the place was sent (this thread's clock, told
 * back by the store), and nobody but this thread takes it back within its
 * claim window (leaving the line does not), so the lock is this thread's
 * until at least `asked` plus that window, whoever waits here now. Told
 * with too little of that left for a claim to surely land in it, it is no
 * grant: the first waiter asks instead (its attempt claims the lock if it
 * is still this thread's).
 *
 * @param {object} handle
 * @param {string} text
 */
function handedOver(handle, text) {
  const tokenEnd = text.indexOf(' ')
  const askedEnd = text.indexOf(' ', tokenEnd + 1)
  const ownerEnd = text.indexOf(' ', askedEnd + 1)
  const token = Number(text.slice(0, tokenEnd))
  const asked = Number(text.slice(tokenEnd + 1, askedEnd))
  const owner = text.slice(askedEnd + 1, ownerEnd)
  const key = text.slice(ownerEnd + 1)
  if (!firstTake(handle, owner)) return
  // With none queued, the first caller whose first attempt is out takes it
  // (that attempt would only find the lock this thread's).
  const head = waitersOf(handle, key)?.[0] ?? firstTries.get(handle)?.get(key)?.values().next().value
  if (head === undefined || !inLine(head.want)) {
    const capabilities = /** @type {Want['capabilities']} */ ({ waitsInLine: true })
    return giveBack({ handle, key, lane: key, ops: opsOf(handle), capabilities }, owner)
  }
  // (Written so that a time it cannot read is too late too.)
  if (!(realNow() - asked <= LINE_CLAIM_MS / 2)) {
    forget(handle, owner)
    return head.attempt()
  }
  head.handed(owner, token, asked)
}

/** Arrival order: taken when acquire is called, before any store round trip. */
let tickets = 0
const takeTicket = () => tickets++

/**
 * Follow (or stop following) releases of `want` announced elsewhere, on the
 * stores that announce them.
 *
 * @param {Want} want
 * @param {boolean} on
 */
const follow = (want, on) => want.capabilities.announcesReleases && want.ops.watchReleases?.(want.handle, want.key, on)

/**
 * @param {Waiter} waiter its first attempt was sent before it queued
 * @param {boolean} inFlight
 */
function firstTryInFlight(waiter, inFlight) {
  const { handle, lane } = waiter.want
  let byLane = firstTries.get(handle)
  if (byLane === undefined) {
    if (!inFlight) return
    firstTries.set(handle, (byLane = new Map()))
  }
  let set = byLane.get(lane)
  if (inFlight) {
    if (set === undefined) byLane.set(lane, (set = new Set()))
    set.add(waiter)
  } else if (set !== undefined) {
    set.delete(waiter)
    if (set.size === 0) byLane.delete(lane)
  }
}

/**
 * Whether first attempts of this thread on `lane` are out (sent, not yet answered).
 *
 * @param {object} handle
 * @param {string} lane
 */
const firstTriesOut = (handle, lane) => firstTries.get(handle)?.has(lane) === true

/**
 * Queue `waiter` in its lane, in arrival order; at the head, it polls (or,
 * with `lookNow`, tries at once: a release came while its first attempt was out).
 *
 * @param {Waiter} waiter
 * @param {{ lookNow?: boolean, crossed?: boolean }} how `crossed`: its first attempt was
 *   sent before this thread's queue formed, and refused
 */
function enqueue(waiter, { lookNow = false, crossed = false }) {
  const { want, ticket } = waiter
  const { handle, lane } = want
  let byLane = queues.get(handle)
  if (byLane === undefined) queues.set(handle, (byLane = new Map()))
  let queue = byLane.get(lane)
  if (queue === undefined) {
    byLane.set(lane, (queue = []))
    follow(want, true)
  }
  const waiting = queue
  waiter.queue = waiting
  waiter.crossed = crossed && want.ops.withdraw !== undefined
  // Callers whose first attempts were answered out of order still queue in
  // the order they called (behind a head that is already trying).
  let at = waiting.length
  while (at > 0 && waiting[at - 1].ticket > ticket && !(at === 1 && waiting[0].trying)) at--
  waiting.splice(at, 0, waiter)
  if (crossed || (want.together === true && at < waiting.length - 1)) dropCrossedMarks(waiting)
  // The attempt just made found the lock held: the first poll can wait.
  if (waiting[0] === waiter) {
    cancel(waiting[1]?.poll)
    waiter.poll = timer(() => tryHead(waiting), lookNow ? 0 : pollDelay(waiter))
  }
}

/**
 * A release of `lane` through `handle` happened: its first attempts in flight
 * look again, and its first waiter tries now.
 *
 * @param {object} handle
 * @param {string} lane
 */
function wake(handle, lane) {
  const inFlight = firstTries.get(handle)?.get(lane)
  if (inFlight !== undefined) for (const waiter of inFlight) waiter.again = true
  const queue = waitersOf(handle, lane)
  if (queue !== undefined) tryHead(queue)
}

// Releases other processes announce through a native server store wake this
// thread's waiters; a lock handed over from a store's line goes to one.
onAnnouncedRelease((handle, tagged) => (tagged[0] === 'h' ? handedOver(handle, tagged.slice(1)) : wake(handle, laneOf(tagged))))

// A store closed: every queue's head tries now, is refused as closed, and
// leaves; the next then tries, and so on, so no waiter sleeps to its next poll.
onClosed((handle) => {
  for (const [, queue] of queues.get(handle) ?? []) tryHead(queue)
})

/** @param {Waiter[]} queue */
function tryHead(queue) {
  const waiter = queue[0]
  if (waiter !== undefined) waiter.attempt()
}

/**
 * Look again after `delay` ms.
 *
 * @param {Waiter} waiter
 * @param {number} [delay]
 */
function pollLater(waiter, delay = pollDelay(waiter)) {
  waiter.poll = timer(() => waiter.attempt(), delay)
}

/**
 * When to look again: after retryDelay, or as the lock lapses if that is
 * sooner and the store can say so at no cost (a lock that expires frees no
 * one with a release, so nothing else would wake its waiters).
 *
 * @param {Waiter} waiter
 */
function pollDelay({ want, retryDelay }) {
  const { handle, key, ops } = want
  // A place in a store's line lapses unless renewed: each attempt renews it.
  if (inLine(want)) return Math.min(retryDelay, LINE_RENEW_MS)
  if (!want.capabilities.saysWhenLapsed || want.lane !== key) return retryDelay
  const left = /** @type {number | null} */ (ops.remainingTime(handle, key))
  return left === null ? 0 : Math.min(retryDelay, Math.ceil(left))
}

/**
 * A grant nobody will use (an attempt answered after its caller gave up, an
 * acquire that failed midway and may have left it, a hold whose fencing token
 * could not be read): released at once (only that token is deleted), and the
 * lane's next waiter woken. Errors are dropped.
 *
 * @param {Pick<Want, 'handle' | 'key' | 'lane' | 'ops'> & { capabilities?: Want['capabilities'] }} want
 * @param {NonNullable<Grant>} grant
 */
function giveBack(want, grant) {
  const { handle, key, lane, ops } = want
  // (A store's line hands it on itself: to this thread, if first, by its reply.)
  const after = want.capabilities !== undefined && inLine(/** @type {Want} */ (want)) ? noop : (/** @type {boolean} */ released) => released && wake(handle, lane)
  try {
    const released = ops.release(handle, key, typeof grant === 'string' ? grant : grant[0])
    if (!isThenable(released)) return after(/** @type {boolean} */ (released))
    const answer = /** @type {Promise<boolean>} */ (released)
    answeredBeforeClose(handle, answer)
    answer.then(after, noop)
  } catch {}
}

/** What the waiter behind one that leaves the head does: try later, now, or (readers) now together. */
const NEXT = /** @type {const} */ ({ later: 0, now: 1, readers: 2 })

/**
 * Take `waiter` out of its queue and settle it; `next`: what the new head does.
 *
 * @param {Waiter} waiter
 * @param {() => void} settle
 * @param {number} next one of NEXT
 */
function leave(waiter, settle, next) {
  waiter.gone = true
  cancel(waiter.poll)
  waiter.ended()
  const queue = /** @type {Waiter[]} */ (waiter.queue)
  const at = queue.indexOf(waiter)
  if (at !== -1) queue.splice(at, 1)
  settle()
  if (queue.length === 0) {
    const { want } = waiter
    queues.get(want.handle)?.delete(want.lane)
    follow(want, false)
    // Left without the lock: this process's place in the store's line goes
    // (unless first attempts of this thread are out: the place is theirs now;
    // or its own attempt is: it may make the place again, so it goes after).
    if (next === NEXT.now && inLine(want) && !firstTriesOut(want.handle, want.lane) && !waiter.trying) leaveLine(want)
  } else if (at === 0) {
    const head = queue[0]
    if (next === NEXT.later) {
      cancel(head.poll)
      head.poll = timer(() => tryHead(queue), pollDelay(head))
    } else if (next === NEXT.now || head.want.together !== true) {
      tryHead(queue)
    } else {
      // A reader got in: the readers right behind it try now, together.
      for (const behind of queue.slice()) {
        if (behind.want.together !== true) break
        behind.attempt()
      }
    }
  }
}

/**
 * This thread's place in the store's line for `want` is nobody's now (a
 * first attempt that took it will not wait after all): it goes, unless
 * waiters of its lane are queued here or first attempts of it are out.
 *
 * @param {Want} want
 */
function leaveUnwanted(want) {
  const { handle, lane } = want
  if (inLine(want) && waitersOf(handle, lane) === undefined && !firstTriesOut(handle, lane)) leaveLine(want)
}

/**
 * Leave the store's line (errors are dropped: the place lapses by itself).
 *
 * @param {Want} want
 */
function leaveLine({ handle, key, ops }) {
  try {
    const left = ops.leaveLine?.(handle, key)
    if (isThenable(left)) answeredBeforeClose(handle, /** @type {Promise<void>} */ (left))
  } catch {}
}

module.exports = { waitersOf, takeTicket, firstTryInFlight, firstTriesOut, enqueue, wake, pollLater, giveBack, NEXT, leave, leaveUnwanted }
