'use strict'
/**
 * Waiting for a held lock, on the JS thread: waiters queue per store handle
 * and lane (a plain lock's lane is its key; a semaphore and a read-write key
 * each have one of their own) in arrival order, and only the head asks the
 * store; when a permit or a reader at the head gets in, the next tries at
 * once, and a writer at the head holds back the readers behind it. A release
 * through the same store wakes the head at once (MemoryLockStore hands the
 * lock straight over); so does one another process announces (RedisLockStore,
 * PostgresLockStore). Polling every retryDelay is only the fallback, for
 * releases nobody announced and locks that lapse at their TTL. A newcomer
 * never jumps the queue, so a worker looping back to the lock it released
 * queues behind the others instead of starving them. A store that cannot be
 * reached is "not yet".
 *
 * Waiting is timers, promises and wake-ups, which JS has for nanoseconds and
 * napi does not have at all: a hop to Rust per wait step would cost more than
 * the step.
 */

const native = require('./native.js')
const { StoreKind, opsOf, kindOf, laneOf } = require('./protocol.js')
const { isThenable, noop } = require('./check.js')
const { isUnreachable } = require('./errors.js')
const { onAnnouncedRelease, onClosed } = require('./stores.js')
const { timer, cancel, realNow } = require('./timers.js')
const { releasedDuringAttempts } = require('./attempts.js')
const { withdraw, dropCrossedMarks } = require('./marks.js')

/**
 * An acquisition attempt's answer: the owner token, `[owner, fencing token]`
 * (RedisLockStore, PostgresLockStore), or null when the lock is held.
 *
 * @typedef {string | [string, number] | null} Grant
 */

/**
 * Whether releases through this store in other processes are announced and
 * heard (the waiters of a key then follow them while they wait).
 *
 * @param {object} handle
 */
const hearsReleases = (handle) => {
  const kind = kindOf(handle)
  return kind === StoreKind.Redis || kind === StoreKind.Postgres
}

/**
 * What a waiter waits for: a Target (lib/hold.js), of which waiting needs this.
 *
 * @typedef {object} Want
 * @property {object} handle
 * @property {string} key the store's key
 * @property {string} lane the queue it waits in
 * @property {number} ttlMs
 * @property {import('./protocol.js').StoreOps} ops
 * @property {boolean} [shared] more may hold it at once: the next waiter tries when this one gets in
 * @property {boolean} [together] any number may hold it (a reader): when one gets in, every one
 *   right behind it tries at once, together, not one round trip after another
 */

/**
 * @typedef {object} Waiter
 * @property {Want} want
 * @property {number} ticket when acquire was called, for arrival order
 * @property {{ since: number }} attempt realNow() when the attempt that took the lock was sent
 * @property {number} retryDelay
 * @property {(grant: Grant) => void} resolve
 * @property {(error: unknown) => void} reject
 * @property {boolean} trying an attempt is in flight
 * @property {boolean} again a release came while it was: look again at once
 * @property {boolean} late it gave up while an attempt was in flight
 * @property {boolean} gone it left the queue (settled)
 * @property {import('./timers.js').Timer | undefined} poll
 * @property {import('./timers.js').Timer | undefined} deadline
 * @property {unknown} failed the error of the last attempt, if the store could not be reached
 * @property {boolean} crossed a writer whose refused first attempt (which marked the key) was
 *   sent before this thread's queue formed, and which has not tried since
 */

/** @type {WeakMap<object, Map<string, Waiter[]>>} store handle -> lane -> waiters */
const queues = new WeakMap()

/**
 * @param {object} handle
 * @param {string} lane
 */
function waitersOf(handle, lane) {
  return queues.get(handle)?.get(lane)
}

/**
 * Follow (or stop following) releases of `want` announced elsewhere, on the
 * stores that hear them.
 *
 * @param {Want} want
 * @param {boolean} on
 */
const follow = (want, on) => hearsReleases(want.handle) && want.ops.watchReleases?.(want.handle, want.key, on)

/** Arrival order: taken when acquire is called, before any store round trip. */
let tickets = 0
const takeTicket = () => tickets++

/**
 * Wait in the queue of `want`'s lane. Resolves to the grant, or null at the
 * timeout (rejects with the last error if the store could not be reached by then).
 *
 * @param {Want} want
 * @param {number} timeout
 * @param {number} retryDelay
 * @param {number} ticket
 * @param {boolean} tryNow a release came while the first attempt was out
 * @param {{ since: number }} attempt
 * @param {unknown} failed the first attempt's error, if the store could not be reached
 * @param {boolean} crossed the first attempt was sent before this thread's queue formed, and refused
 * @returns {Promise<Grant>}
 */
function enqueue(want, timeout, retryDelay, ticket, tryNow, attempt, failed, crossed) {
  const { handle, lane: key } = want
  let byKey = queues.get(handle)
  if (byKey === undefined) queues.set(handle, (byKey = new Map()))
  let queue = byKey.get(key)
  if (queue === undefined) {
    byKey.set(key, (queue = []))
    follow(want, true)
  }
  const waiting = queue
  return new Promise((resolve, reject) => {
    /** @type {Waiter} */
    const waiter = {
      want,
      ticket,
      attempt,
      retryDelay,
      resolve,
      reject,
      trying: false,
      again: false,
      late: false,
      gone: false,
      poll: undefined,
      deadline: undefined,
      failed,
      crossed: crossed && want.ops.withdraw !== undefined,
    }
    waiter.deadline = timer(() => giveUp(handle, key, waiting, waiter), timeout)
    // Callers whose first attempts were answered out of order still queue in
    // the order they called (behind a head that is already trying).
    let at = waiting.length
    while (at > 0 && waiting[at - 1].ticket > ticket && !(at === 1 && waiting[0].trying)) at--
    waiting.splice(at, 0, waiter)
    if (crossed || (want.together === true && at < waiting.length - 1)) dropCrossedMarks(waiting)
    // The attempt just made found the lock held: the first poll can wait.
    if (waiting[0] === waiter) {
      cancel(waiting[1]?.poll)
      // A release came while the first attempt was out: look again now.
      const delay = tryNow ? 0 : pollDelay(waiter)
      waiter.poll = timer(() => tryHead(handle, key, waiting), delay)
    }
  })
}

/**
 * A release of `key` through `handle` happened: its first waiter tries now.
 *
 * @param {object} handle
 * @param {string} key
 */
function wake(handle, key) {
  releasedDuringAttempts(handle, key)
  const queue = waitersOf(handle, key)
  if (queue !== undefined) tryHead(handle, key, queue)
}

// Releases other processes announce through a native server store wake this thread's waiters.
onAnnouncedRelease((handle, tagged) => wake(handle, laneOf(tagged)))

// A store closed: every queue's head tries now, is refused as closed, and
// leaves; the next then tries, and so on, so no waiter sleeps to its next poll.
onClosed((handle) => {
  for (const [lane, queue] of queues.get(handle) ?? []) tryHead(handle, lane, queue)
})

/**
 * @param {object} handle
 * @param {string} key
 * @param {Waiter[]} queue
 */
function tryHead(handle, key, queue) {
  const waiter = queue[0]
  if (waiter !== undefined) tryWaiter(handle, key, queue, waiter)
}

/**
 * One attempt for `waiter`: the head of its queue, or a reader in the run of
 * readers at the head (see Want.together).
 *
 * @param {object} handle
 * @param {string} key
 * @param {Waiter[]} queue
 * @param {Waiter} waiter
 */
function tryWaiter(handle, key, queue, waiter) {
  if (waiter.gone) return
  // A wake during an attempt in flight must not be lost: that attempt may
  // have been answered "held" just before the release.
  if (waiter.trying) {
    waiter.again = true
    return
  }
  cancel(waiter.poll)
  waiter.trying = true
  waiter.again = false
  waiter.crossed = false
  // When the attempt that may take the lock started: its TTL runs from no later.
  waiter.attempt.since = realNow()
  const want = waiter.want
  let grant
  try {
    grant = want.ops.acquire(handle, want.key, want.ttlMs)
  } catch (error) {
    return failedTry(handle, key, queue, waiter, error)
  }
  if (isThenable(grant)) {
    grant.then(
      (g) => afterTry(handle, key, queue, waiter, g),
      (error) => waiter.late || failedTry(handle, key, queue, waiter, error),
    )
  } else {
    afterTry(handle, key, queue, waiter, grant)
  }
}

/**
 * @param {object} handle
 * @param {string} key
 * @param {Waiter[]} queue
 * @param {Waiter} waiter
 * @param {Grant} grant
 */
function afterTry(handle, key, queue, waiter, grant) {
  waiter.trying = false
  // It gave up while this attempt was in flight: whatever it took goes back.
  // (A writer's refused attempt marked the key again: that mark goes too.)
  if (waiter.late) return grant === null ? void withdraw(waiter.want) : giveBackWanted(waiter.want, grant)
  waiter.failed = undefined
  // Taken: the next waiter polls later, as the lock has just been taken again
  // (unless more may hold it at once: then it tries now, and readers together).
  if (grant !== null) {
    const next = waiter.want.together === true ? NEXT.readers : waiter.want.shared === true ? NEXT.now : NEXT.later
    return leave(handle, key, queue, waiter, () => waiter.resolve(grant), next)
  }
  // A reader that tried with the one ahead of it waits for its turn at the head.
  if (queue[0] !== waiter) return
  if (waiter.again) return tryWaiter(handle, key, queue, waiter)
  waiter.poll = timer(() => tryWaiter(handle, key, queue, waiter), pollDelay(waiter))
}

/**
 * The attempt failed. A store that could not be reached is "not yet": the
 * waiter tries again after retryDelay until its timeout (then rejects with
 * this error). Any other failure rejects it now.
 *
 * @param {object} handle
 * @param {string} key
 * @param {Waiter[]} queue
 * @param {Waiter} waiter
 * @param {unknown} error
 */
function failedTry(handle, key, queue, waiter, error) {
  waiter.trying = false
  if (!isUnreachable(error)) return leave(handle, key, queue, waiter, () => waiter.reject(error), NEXT.now)
  waiter.failed = error
  // (A release that came meanwhile, such as its own failed attempt's give-back, is looked at now.)
  if (queue[0] === waiter) waiter.poll = timer(() => tryWaiter(handle, key, queue, waiter), waiter.again ? 0 : waiter.retryDelay)
}

/**
 * When to look again: after retryDelay, or as the lock lapses if that is
 * sooner and the store can say so at no cost (a lock that expires frees no
 * one with a release, so nothing else would wake its waiters).
 *
 * @param {Waiter} waiter
 */
function pollDelay({ want, retryDelay }) {
  const { handle, key } = want
  if (kindOf(handle) !== StoreKind.Memory || want.lane !== key) return retryDelay
  const left = /** @type {number | null} */ (native.remainingTime(handle, key, native.HoldKind.Lock))
  return left === null ? 0 : Math.min(retryDelay, Math.ceil(left))
}

/**
 * @param {object} handle
 * @param {string} key
 * @param {Waiter[]} queue
 * @param {Waiter} waiter
 */
function giveUp(handle, key, queue, waiter) {
  // On time even if the store has not answered an attempt in flight (it may
  // never): that attempt's result is dealt with when it comes.
  waiter.late = true
  const settle = waiter.failed === undefined ? () => waiter.resolve(null) : () => waiter.reject(waiter.failed)
  // A writer's acquire answers once readers are let in again (one round
  // trip), unless the store could not be reached: then at once.
  const withdrawn = withdraw(waiter.want, waiter.retryDelay)
  const after = withdrawn === undefined || waiter.failed !== undefined ? settle : () => withdrawn.then(settle)
  leave(handle, key, queue, waiter, after, NEXT.now)
}

/**
 * A token nobody will use (an attempt that answered after its caller gave up,
 * or an acquire that failed midway and may have left it): released at once
 * (only that token is deleted), and the next waiter woken. Errors are dropped.
 *
 * @param {object} handle
 * @param {string} key
 * @param {NonNullable<Grant>} grant
 * @param {string} [lane] whose waiters the release wakes (a semaphore's, for its permit slot)
 */
function giveBackUnwanted(handle, key, grant, lane = key) {
  giveBackWanted({ handle, key, lane, ttlMs: 0, ops: opsOf(handle) }, grant)
}

/**
 * giveBackUnwanted, for a hold of any kind.
 *
 * @param {Want} want
 * @param {NonNullable<Grant>} grant
 */
function giveBackWanted(want, grant) {
  const { handle, key, lane, ops } = want
  const after = (/** @type {boolean} */ released) => released && wake(handle, lane)
  try {
    const released = ops.release(handle, key, typeof grant === 'string' ? grant : grant[0])
    if (isThenable(released)) /** @type {Promise<boolean>} */ (released).then(after, noop)
    else after(/** @type {boolean} */ (released))
  } catch {}
}

/** What the waiter behind one that leaves the head does: try later, now, or (readers) now together. */
const NEXT = /** @type {const} */ ({ later: 0, now: 1, readers: 2 })

/**
 * Take `waiter` out of its queue and settle it; `next`: what the new head does.
 *
 * @param {object} handle
 * @param {string} key
 * @param {Waiter[]} queue
 * @param {Waiter} waiter
 * @param {() => void} settle
 * @param {number} next one of NEXT
 */
function leave(handle, key, queue, waiter, settle, next) {
  waiter.gone = true
  cancel(waiter.poll)
  cancel(waiter.deadline)
  const at = queue.indexOf(waiter)
  if (at !== -1) queue.splice(at, 1)
  settle()
  if (queue.length === 0) {
    queues.get(handle)?.delete(key)
    follow(waiter.want, false)
  } else if (at === 0) {
    const head = queue[0]
    if (next === NEXT.later) {
      cancel(head.poll)
      head.poll = timer(() => tryHead(handle, key, queue), pollDelay(head))
    } else if (next === NEXT.now || head.want.together !== true) {
      tryHead(handle, key, queue)
    } else {
      // A reader got in: the readers right behind it try now, together.
      for (const behind of queue.slice()) {
        if (behind.want.together !== true) break
        tryWaiter(handle, key, queue, behind)
      }
    }
  }
}

module.exports = { waitersOf, takeTicket, enqueue, wake, giveBackUnwanted, giveBackWanted }
