'use strict'
/**
 * What the lock and its stores agree on, in one place: the five LockStore
 * methods, what a store can do (its Capabilities: a native store declares
 * them, every store written in JS shares one record; the algorithm reads
 * them, never which store it has), the limits and
 * defaults (checked against the same numbers in Rust), and the operations a
 * store handle offers: the addon's functions for a native store's handle,
 * the JS-store bridge's (lib/bridge/js-store.js) for a store written in JS, which
 * never crosses into Rust.
 */

const native = require('../native.js')

/** LockStore's methods, in the interface's order. */
const STORE_METHODS = /** @type {const} */ (['acquire', 'release', 'extend', 'isLocked', 'remainingTime'])

/**
 * The methods a store written in JS opts into for read-write locks: all of
 * them, or none (see LockStore in index.d.ts).
 */
const READ_WRITE_METHODS = /** @type {const} */ ([
  'acquireRead',
  'acquireWrite',
  'releaseHold',
  'extendHold',
  'holdRemaining',
  'holders',
  'readersWait',
  'withdrawWriter',
])

const { HoldKind } = native

/**
 * What a lock does with a store, by its handle: a native store's handle is
 * the addon's external (its functions act on it); a JS store's is an object
 * carrying the bridge's functions, with the same names and arguments.
 *
 * @typedef {object} StoreOps
 * @property {(handle: object, key: string, ttlMs: number, laneOrWait?: any, asked?: number) => import('../wait/waiting.js').Grant | Promise<import('../wait/waiting.js').Grant>} acquire
 *   (a JS store's fourth argument is the lane whose waiters a failed acquire's give-back wakes, the
 *   key's by default; a native store's is how a refused attempt waits in its line: one of WAIT, and
 *   its fifth when a waiting attempt was sent, realNow() just before the call, which a hand-over to
 *   the place it takes tells back)
 * @property {(handle: object, key: string, owner: string) => boolean | Promise<boolean>} release
 * @property {(handle: object, key: string, owner: string, ttlMs: number) => boolean | Promise<boolean>} extend
 * @property {(handle: object, key: string) => boolean | Promise<boolean>} wouldWait
 *   whether an acquire of this kind (with its limit) would be refused now: for a plain lock,
 *   whether anyone holds it (a JS store's isLocked)
 * @property {(handle: object, key: string, owner?: string) => number | null | Promise<number | null>} remainingTime
 *   a plain lock's: the key's; a semaphore's or read-write hold's: `owner`'s (null without one)
 * @property {(handle: object, key: string, owner: string) => boolean | Promise<boolean> | null} holds
 * @property {(handle: object, key: string, owner: string) => number | null} fencingToken
 * @property {(handle: object, key: string) => number | Promise<number>} [holders] how many hold it (semaphores, read-write keys)
 * @property {(handle: object, key: string) => unknown} [withdraw] a waiting writer gave up
 * @property {(handle: object, key: string, on: boolean) => void} [watchReleases] follow releases other clients announce
 * @property {(handle: object, key: string) => void | Promise<void>} [sent] settles once what was asked about
 *   `key` so far is written to the store's connection (a store that `tellsWhenSent`)
 * @property {(handle: object, key: string, owner: string, ttlMs: number, more: boolean, asked: number) => boolean | Promise<boolean>} [claim]
 *   claim a lock handed over from the store's line for its TTL (with `more` waiting here, keep a place,
 *   asked for at `asked`: realNow() as the claim was sent)
 * @property {(handle: object, key: string, owner: string) => boolean} [queueRelease] queue run()'s
 *   release of a plain lock, written with the store's next operation or at `flushReleases` (a store
 *   that `queuesReleases`); false where it is released as usual instead
 * @property {(handle: object) => { key: string, code: string, message: string }[]} [flushReleases]
 *   write the queued releases now; those that failed since the last flush
 * @property {(handle: object, key: string) => void | Promise<void>} [leaveLine] this process's waiters for
 *   the plain lock `key` all gave up: its place in the store's line goes (a store that `waitsInLine`)
 */

/**
 * How a native store's refused plain-lock attempt waits in its line: not at
 * all (an attempt that does not wait), in line, or in line with more of this
 * process's waiters behind it (then the process keeps a place at the back
 * once it has the lock).
 */
const WAIT = /** @type {const} */ ({ now: 0, inLine: 1, inLineWithMore: 2 })

/**
 * Waiters queue per lane: a plain lock's lane is its key; a semaphore's,
 * and a read-write key's (readers and writers together), start with a
 * character no key can (a lone surrogate: keys are well-formed Unicode).
 * Announced releases arrive tagged with what they were of (`l`, `s`, `r`).
 */
const LANES = /** @type {const} */ ({ l: '', s: '\udc00s', r: '\udc00rw' })

/** @param {string} tagged an announced release: its tag, then its key */
const laneOf = (tagged) => {
  const tag = /** @type {keyof typeof LANES} */ (tagged[0])
  return tag === 'l' ? tagged.slice(1) : LANES[tag] + tagged.slice(1)
}

/**
 * The operations on a native store's handle for one kind of hold: the
 * addon's functions, one set for every kind, each given the hold (and a
 * semaphore's limit where an acquire's admission depends on it).
 *
 * @param {number} hold the addon's HoldKind
 * @param {number} limit a semaphore's; 0 for the other kinds
 * @returns {StoreOps}
 */
function nativeOps(hold, limit) {
  // Taken from the addon once: a lookup on its exports object per call is
  // what a plain lock's cycle would otherwise pay for naming the hold.
  const { acquire, release, extend, wouldWait, remainingTime, holds, fencingToken, holders, withdraw, watchReleases, sent, claim, leaveLine, queueRelease, flushReleases } =
    native
  return {
    acquire: (handle, key, ttlMs, wait = WAIT.now, asked = 0) => acquire(handle, key, hold, limit, ttlMs, wait, asked),
    release: (handle, key, owner) => release(handle, key, hold, owner),
    extend: (handle, key, owner, ttlMs) => extend(handle, key, hold, owner, ttlMs),
    wouldWait: (handle, key) => wouldWait(handle, key, hold, limit),
    remainingTime: (handle, key, owner) => remainingTime(handle, key, hold, owner),
    holds: (handle, key, owner) => holds(handle, key, hold, owner),
    fencingToken: (handle, key, owner) => fencingToken(handle, key, hold, owner),
    holders: (handle, key) => holders(handle, key, hold),
    withdraw: hold === HoldKind.Write ? (handle, key) => withdraw(handle, key, hold) : undefined,
    watchReleases: (handle, key, on) => watchReleases(handle, key, hold, on),
    sent,
    claim,
    leaveLine,
    queueRelease: hold === HoldKind.Lock ? queueRelease : undefined,
    flushReleases,
  }
}

/** A plain lock's operations on a native store. */
const NATIVE_LOCK_OPS = nativeOps(HoldKind.Lock, 0)

/** Where a JS store's handle keeps its operations. */
const kOps = Symbol('LockStore.ops')

/** @param {object} handle @returns {StoreOps} */
const opsOf = (handle) => /** @type {any} */ (handle)[kOps] ?? NATIVE_LOCK_OPS


/**
 * What a store can do, as the acquire, the waiting and a hold need to know
 * it: read once per store, when lock() starts using it, so the algorithm
 * asks what its store does, never which store it is. (The names follow the
 * capabilities the store contract tests name, where they mean the same.)
 *
 * @typedef {object} Capabilities
 * @property {boolean} saysWhenLapsed the store answers at once, in this thread, how long a
 *   hold has left (a store in this thread, which so expires exactly): a hold asks it instead of
 *   counting from when its acquire was sent, and a waiter looks again as the lock lapses
 * @property {boolean} announcesReleases releases in other processes are announced and heard:
 *   a lane's waiters follow them while they wait
 * @property {boolean} answersInOrder a connection answers its commands in the order they were
 *   sent (one connection per server): the next waiter's attempt can go right behind
 *   a release instead of a round trip after it
 * @property {boolean} tellsWhenSent it says when what it was asked is written to its connection
 *   (`sent`), and a key's later operations reach the server behind it (on the event loop):
 *   run() ends once its release is on its way, not a round trip later
 * @property {boolean} queuesReleases run()'s release of a plain lock is queued in the store
 *   (`queueRelease`) and written with its next operation, else at the end of the loop's turn or
 *   as the process exits (lib/core/queued-releases.js): a store whose every operation is a write of
 *   its own (a file) commits once a lock cycle, not twice
 * @property {boolean} acquiresTogether plain locks' first attempts asked in one stretch of the
 *   microtask queue are sent together (`acquireTogether`, lib/core/acquires-together.js): the loops
 *   of a Promise.all on such a store commit once a round, not once each
 * @property {boolean} waitsInLine a plain lock's waiters wait in a line on the server, one place per
 *   process: a release hands the lock to the
 *   first in line and tells its process alone; the lock arrives as a hand-over (lib/wait/waiting.js), its holder claims it for
 *   its TTL, and a process whose waiters all gave up leaves the line (`leaveLine`)
 * @property {boolean} writtenInJs a LockStore written in JS, reached through lib/bridge/js-store.js:
 *   semaphores over permit slots, read-write locks through its own methods
 * @property {boolean} throwsOwnErrors its errors reach the caller as it threw them (not remade
 *   as a LockStoreError whose stack names the caller, as a native store's failures are)
 * @property {boolean} mayNeverAnswer a call may never settle (no command timeout bounds it):
 *   what is only waited for as a courtesy (a writer's withdrawn mark) is waited for a bounded time
 * @property {boolean} fencesAfterAcquire a plain lock's fencing token, if it gives one, is asked
 *   of the store (its `fencingToken(key, owner)`) after the acquire, not handed over with it
 */

/**
 * The addon's record of what a store can do, as it is (each store declares
 * its own in Rust; so is the one record every store written in JS shares).
 *
 * @param {Record<string, boolean>} record
 * @returns {Readonly<Capabilities>}
 */
const asCapabilities = (record) => Object.freeze(/** @type {Capabilities} */ (/** @type {unknown} */ (record)))

/** What every store written in JS can do. */
const WRITTEN_IN_JS = asCapabilities(native.storeCapabilities())

/**
 * What the store of `handle` can do, read when lock() starts using it.
 *
 * @param {object} handle
 * @returns {Readonly<Capabilities>}
 */
const capabilitiesOf = (handle) => (kOps in handle ? WRITTEN_IN_JS : asCapabilities(native.storeCapabilities(handle)))

const {
  maxMs: MAX_MS,
  defaultTtlMs: DEFAULT_TTL_MS,
  defaultRetryDelayMs: DEFAULT_RETRY_DELAY_MS,
  lineClaimMs: LINE_CLAIM_MS,
  lineRenewMs: LINE_RENEW_MS,
} = native.limits()

/**
 * Whether `want`'s waiters wait in its store's line: a plain lock (its lane
 * is its key) on a store that keeps one.
 *
 * @param {{ key: string, lane: string, capabilities: Readonly<Capabilities> }} want
 */
const inLine = (want) => want.capabilities.waitsInLine && want.lane === want.key

module.exports = {
  STORE_METHODS,
  READ_WRITE_METHODS,
  HoldKind,
  WAIT,
  nativeOps,
  NATIVE_LOCK_OPS,
  kOps,
  opsOf,
  capabilitiesOf,
  inLine,
  LANES,
  laneOf,
  MAX_MS,
  DEFAULT_TTL_MS,
  DEFAULT_RETRY_DELAY_MS,
  LINE_CLAIM_MS,
  LINE_RENEW_MS,
}
