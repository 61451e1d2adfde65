'use strict'
/**
 * `@shaferllc/keel/core`'s lock: "only one of you may do this at a time".
 *
 * This file is the JS face of the native addon. It keeps what is cheapest in
 * JS: the `Lock` handle (a plain object, created once per critical section),
 * argument checks (so bad input fails before any store call, with the
 * argument's name), `run()`'s try/finally around the user's callback, and
 * waiting for a held lock (queues, wake-ups and deadlines are promises and
 * timers; a hop to Rust per wait step would cost more than the step). The
 * decisions that make the lock correct live in Rust: owner tokens, the
 * compare-and-act store operations, and expiry.
 */

const { inspect, types: { isPromise, isNativeError } } = require('node:util')
const native = inThisRealm(require('./binding.js'))

const { maxMs: MAX_MS, defaultTtlMs: DEFAULT_TTL_MS, defaultRetryDelayMs: DEFAULT_RETRY_DELAY_MS } =
  native.limits()
const STORE_METHODS = ['acquire', 'release', 'extend', 'isLocked', 'remainingTime']
const REMAINING_TIME = STORE_METHODS.indexOf('remainingTime')

/* --------------------------------- realms ---------------------------------- */

/**
 * The addon makes its objects and errors in the realm that loaded it first.
 * When this file runs in another one (Jest evaluates modules in a `vm`
 * context per test file), an error from the addon would fail `instanceof
 * TypeError` there. Only then are the addon's functions wrapped, so that its
 * errors and promises are this realm's; in a plain process nothing changes.
 */
function inThisRealm(binding) {
  if (Object.getPrototypeOf(binding.limits()) === Object.prototype) return binding
  const own = (error) => {
    if (error instanceof Error || !isNativeError(error)) return error
    const Class = { TypeError, RangeError }[error.name] ?? Error
    const copy = new Class(error.message)
    Object.assign(copy, error)
    Object.defineProperty(copy, 'stack', { value: error.stack, writable: true, configurable: true })
    return copy
  }
  const rethrow = (error) => {
    throw own(error)
  }
  const wrapped = {}
  for (const [name, fn] of Object.entries(binding)) {
    wrapped[name] =
      typeof fn !== 'function'
        ? fn
        : (...args) => {
            let result
            try {
              result = fn(...args)
            } catch (error) {
              throw own(error)
            }
            return isPromise(result) ? Promise.resolve(result).catch(rethrow) : result
          }
  }
  return wrapped
}

/* ------------------------------ argument checks ----------------------------- */

function describe(value) {
  if (value === null) return 'null'
  if (typeof value === 'string') return `a string (${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)})`
  if (typeof value === 'number') return String(value)
  if (typeof value === 'function') return 'a function'
  if (Array.isArray(value)) return 'an array'
  return typeof value === 'object' ? 'an object' : `${typeof value} ${String(value)}`
}

function checkKey(where, key, name = 'key') {
  if (typeof key !== 'string') throw new TypeError(`${where}: ${name} must be a string, got ${describe(key)}`)
  if (!key.isWellFormed()) {
    throw new TypeError(`${where}: ${name} must be well-formed Unicode, but it contains a lone surrogate`)
  }
}

/** Milliseconds: a finite number in [0, MAX_MS], above 0 unless `zeroOk`. */
function checkMs(where, value, name, zeroOk) {
  if (typeof value !== 'number') {
    throw new TypeError(`${where}: ${name} must be a number of milliseconds, got ${describe(value)}`)
  }
  if (!(zeroOk ? value >= 0 : value > 0) || value > MAX_MS) {
    const range = zeroOk ? 'a finite number >= 0' : 'a finite number > 0'
    throw new RangeError(`${where}: ${name} must be ${range} (at most ${MAX_MS}), got ${value}`)
  }
  return value
}

const NO_OPTIONS = [0, DEFAULT_RETRY_DELAY_MS]

/** [timeout, retryDelay], with options.autoExtend checked (run() and acquire() act on it). */
function readOptions(where, options) {
  if (options === undefined || options === null) return NO_OPTIONS
  if (typeof options !== 'object') {
    throw new TypeError(
      `${where}: options must be an object like { timeout, retryDelay, autoExtend }, got ${describe(options)}`,
    )
  }
  for (const name in options) {
    if (name !== 'timeout' && name !== 'retryDelay' && name !== 'autoExtend') unknownOption(where, name)
  }
  const { timeout, retryDelay, autoExtend } = options
  if (autoExtend !== undefined && typeof autoExtend !== 'boolean') {
    throw new TypeError(`${where}: options.autoExtend must be true or false, got ${describe(autoExtend)}`)
  }
  return [
    timeout === undefined ? 0 : checkMs(where, timeout, 'options.timeout', true),
    retryDelay === undefined ? DEFAULT_RETRY_DELAY_MS : checkMs(where, retryDelay, 'options.retryDelay', true),
  ]
}

/** A misspelt option must not fall back to a default silently (`timeot` would mean "don't wait"). */
function unknownOption(where, name) {
  throw new TypeError(`${where}: unknown option ${JSON.stringify(name)} (known: timeout, retryDelay, autoExtend)`)
}

/**
 * Errors that say the store could not be reached or did not answer in time:
 * a waiter with time left takes them as "not yet" and tries again. (Native
 * stores set these codes; a JS store may set them too.)
 */
const isUnreachable = (error) =>
  error?.code === 'ERR_LOCK_STORE_CONNECTION' || error?.code === 'ERR_LOCK_STORE_TIMEOUT'

function checkStore(where, store) {
  if (store === null || (typeof store !== 'object' && typeof store !== 'function')) {
    throw new TypeError(`${where}: store must be an object with ${STORE_METHODS.join(', ')}, got ${describe(store)}`)
  }
  const missing = STORE_METHODS.filter((m) => typeof store[m] !== 'function')
  if (missing.length > 0) {
    throw new TypeError(
      `${where}: store is missing the LockStore method${missing.length > 1 ? 's' : ''} ${missing.join(', ')}`,
    )
  }
}

const noop = () => {}

/** A native call's result: a value, or a promise of one. */
const isThenable = (v) => v !== null && typeof v === 'object' && typeof v.then === 'function'

/* --------------------------------- errors ---------------------------------- */

class LockNotHeldError extends Error {
  /** @param {string} [key] */
  constructor(key) {
    const text = key === undefined ? '' : String(key)
    const shown = text.length > 200 ? `${text.slice(0, 200)}…` : text
    const which = key === undefined ? 'The lock' : `Lock "${shown}"`
    super(`${which} is not held by this owner: it expired, was released, or was never acquired`)
    /** The key of the lock that is not held ('' when none was given). */
    this.key = text
  }
}
Object.defineProperty(LockNotHeldError.prototype, 'name', {
  value: 'LockNotHeldError',
  writable: true,
  configurable: true,
})

/* --------------------------------- stores ---------------------------------- */

let handleOf

/**
 * What the stores that run natively share: each method checks its arguments
 * (so a direct call with bad input fails with the argument's name), then makes
 * one native call.
 */
class NativeLockStore {
  #handle
  #name

  constructor(name, handle) {
    this.#name = name
    this.#handle = handle
  }

  static {
    handleOf = (store) => (#handle in store ? store.#handle : undefined)
  }

  async acquire(key, owner, ttlMs) {
    const where = this.#checkCall('acquire', key, owner)
    checkMs(where, ttlMs, 'ttlMs', false)
    return native.storeAcquire(this.#handle, key, owner, ttlMs)
  }

  async release(key, owner) {
    this.#checkCall('release', key, owner)
    return native.release(this.#handle, key, owner)
  }

  async extend(key, owner, ttlMs) {
    const where = this.#checkCall('extend', key, owner)
    checkMs(where, ttlMs, 'ttlMs', false)
    return native.extend(this.#handle, key, owner, ttlMs)
  }

  async isLocked(key) {
    checkKey(`${this.#name}.isLocked`, key)
    return native.isLocked(this.#handle, key)
  }

  async remainingTime(key) {
    checkKey(`${this.#name}.remainingTime`, key)
    return native.remainingTime(this.#handle, key)
  }

  #checkCall(method, key, owner) {
    const where = `${this.#name}.${method}`
    checkKey(where, key)
    checkKey(where, owner, 'owner')
    if (owner.length === 0) throw new TypeError(`${where}: owner must be a non-empty string`)
    return where
  }
}

/**
 * The default store: an in-memory map with expiry on a monotonic clock. Per
 * isolate: it coordinates async tasks of one thread and nothing more.
 */
class MemoryLockStore extends NativeLockStore {
  constructor() {
    const handle = native.createMemoryStore()
    inMemory.add(handle)
    super('MemoryLockStore', handle)
  }

  /** Entries held in memory, counting expired ones not swept yet. */
  get size() {
    return native.memoryStoreSize(handleOf(this))
  }
}

const REDIS_DEFAULTS = Object.freeze({
  url: 'redis://127.0.0.1:6379',
  prefix: '',
  connectTimeout: 5_000,
  commandTimeout: 5_000,
  tls: undefined,
  cluster: undefined,
})
const TLS_PARTS = ['ca', 'cert', 'key']

function readRedisOptions(urlOrOptions) {
  const where = 'new RedisLockStore'
  if (urlOrOptions === undefined) return { ...REDIS_DEFAULTS, cluster: [] }
  if (typeof urlOrOptions === 'string') return { ...REDIS_DEFAULTS, url: urlOrOptions, cluster: [] }
  if (Array.isArray(urlOrOptions)) return readRedisOptions({ cluster: urlOrOptions })
  if (urlOrOptions === null || typeof urlOrOptions !== 'object') {
    throw new TypeError(
      `${where}: expected a redis:// URL, a list of Redis Cluster node URLs, or an options object like { url, prefix, connectTimeout, commandTimeout }, got ${describe(urlOrOptions)}`,
    )
  }
  const unknown = Object.keys(urlOrOptions).filter((k) => !Object.hasOwn(REDIS_DEFAULTS, k))
  if (unknown.length > 0) {
    throw new TypeError(
      `${where}: unknown option${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')} (known: ${Object.keys(REDIS_DEFAULTS).join(', ')})`,
    )
  }
  const { url = REDIS_DEFAULTS.url, prefix = REDIS_DEFAULTS.prefix, cluster = [] } = urlOrOptions
  if (typeof url !== 'string') throw new TypeError(`${where}: options.url must be a string, got ${describe(url)}`)
  if (!Array.isArray(cluster) || cluster.some((node) => typeof node !== 'string')) {
    throw new TypeError(`${where}: options.cluster must be an array of node URLs (strings), got ${describe(cluster)}`)
  }
  if (urlOrOptions.cluster !== undefined && cluster.length === 0) {
    throw new TypeError(`${where}: options.cluster must list at least one node URL`)
  }
  if (cluster.length > 0 && urlOrOptions.url !== undefined) {
    throw new TypeError(`${where}: give options.url (one server) or options.cluster (a Redis Cluster), not both`)
  }
  checkKey(where, prefix, 'options.prefix')
  const ms = (name) =>
    urlOrOptions[name] === undefined ? REDIS_DEFAULTS[name] : checkMs(where, urlOrOptions[name], `options.${name}`, false)
  return {
    url: cluster[0] ?? url,
    cluster,
    prefix,
    connectTimeout: ms('connectTimeout'),
    commandTimeout: ms('commandTimeout'),
    tls: readTls(where, urlOrOptions.tls),
  }
}

/** `tls: { ca, cert, key }` as PEM strings or bytes, turned into Buffers for the addon. */
function readTls(where, tls) {
  if (tls === undefined) return undefined
  if (tls === null || typeof tls !== 'object' || Array.isArray(tls)) {
    throw new TypeError(`${where}: options.tls must be an object like { ca, cert, key }, got ${describe(tls)}`)
  }
  const unknown = Object.keys(tls).filter((k) => !TLS_PARTS.includes(k))
  if (unknown.length > 0) {
    throw new TypeError(`${where}: unknown options.tls field ${unknown.join(', ')} (known: ${TLS_PARTS.join(', ')})`)
  }
  const pem = (name) => {
    const value = tls[name]
    if (value === undefined) return undefined
    if (typeof value === 'string') return Buffer.from(value)
    if (value instanceof Uint8Array) return Buffer.from(value)
    throw new TypeError(`${where}: options.tls.${name} must be PEM text (a string or Buffer), got ${describe(value)}`)
  }
  const parts = { ca: pem('ca'), cert: pem('cert'), key: pem('key') }
  if ((parts.cert === undefined) !== (parts.key === undefined)) {
    throw new TypeError(`${where}: options.tls.cert and options.tls.key go together (a client certificate and its key)`)
  }
  return parts
}

/**
 * A store on a Redis server, spoken to from Rust over one multiplexed
 * connection. Wire-compatible with the docs' ioredis store: the key (after
 * `prefix`) holds the owner token, with the lock's TTL as its Redis expiry.
 */
class RedisLockStore extends NativeLockStore {
  constructor(urlOrOptions) {
    // Releases announced by other processes wake this thread's waiters for that key.
    const handle = native.createRedisStore(readRedisOptions(urlOrOptions), (key) => wake(handle, key))
    announcing.add(handle)
    super('RedisLockStore', handle)
  }

  /** Close the connection. Later operations reject with code ERR_LOCK_STORE_CLOSED. */
  async close() {
    native.closeRedisStore(handleOf(this))
  }
}

/**
 * The native handle that runs a store's operations. One of our stores whose
 * methods are its own runs natively; any other object (including a subclass
 * that overrides a method) has its own methods called.
 */
function handleFor(store) {
  const handle = handleOf(store)
  if (handle !== undefined && STORE_METHODS.every((m) => store[m] === NativeLockStore.prototype[m])) return handle
  return jsStoreHandle(store)
}

const jsHandles = new WeakMap()
function jsStoreHandle(store) {
  let handle = jsHandles.get(store)
  if (handle === undefined) {
    // A method is looked up when called (so a store may swap one later) and
    // called with the store as `this`. A plain value goes back as it is (a
    // synchronous store settles without a promise); a thenable that is not a
    // native promise is adopted into one, which is what Rust can await.
    const adopt = (returned) => (isThenable(returned) && !isPromise(returned) ? Promise.resolve(returned) : returned)
    // A throw, of anything (not only an Error), is the same as a rejection
    // with that value; a method replaced by a non-function is named.
    const failed = (m, error) =>
      Promise.reject(
        typeof store[m] === 'function'
          ? error
          : new TypeError(`LockStore.${m} must be a function, but the store's ${m} is ${describe(store[m])}`),
      )
    // One wrapper per arity, so the method gets exactly the interface's arguments.
    const bridge = (m) =>
      m === 'release'
        ? (key, owner) => {
            try {
              return adopt(store[m](key, owner))
            } catch (error) {
              return failed(m, error)
            }
          }
        : m === 'acquire' || m === 'extend'
          ? (key, owner, ttlMs) => {
              try {
                return adopt(store[m](key, owner, ttlMs))
              } catch (error) {
                return failed(m, error)
              }
            }
          : (key) => {
              try {
                return adopt(store[m](key))
              } catch (error) {
                return failed(m, error)
              }
            }
    // A promise a method returned is settled here on the JS thread, its value
    // checked by the addon (checkReply). `key` and `owner` come with an
    // acquire: if it fails, the token it may have left is given back (safe:
    // a release only deletes its own token).
    const giveBack = (key, owner) => giveBackUnwanted(handle, key, owner)
    const settle = (promise, method, key, owner) =>
      promise.then(
        (value) => {
          // The well-formed answers pass straight through; anything else goes
          // to the addon, which says what was wrong.
          if (method === REMAINING_TIME) {
            if (value == null) return null
            if (typeof value === 'number' && Number.isFinite(value)) return value
          } else if (typeof value === 'boolean') {
            return owner === undefined ? value : value ? owner : null
          }
          try {
            return native.checkReply(method, value, owner)
          } catch (error) {
            if (owner !== undefined) giveBack(key, owner)
            throw error
          }
        },
        (error) => {
          if (owner !== undefined) giveBack(key, owner)
          throw error
        },
      )
    handle = native.createJsStore(...STORE_METHODS.map(bridge), settle)
    jsHandles.set(store, handle)
  }
  return handle
}


/* -------------------------------- waiting ---------------------------------- */

// Waiters of this thread, per store handle and key, in arrival order. Only
// the head of a queue asks the store. A release through the same store wakes
// it at once (for MemoryLockStore that hands the lock straight over); so does
// a release that another process announces through RedisLockStore. Polling
// every retryDelay is only the fallback, for releases nobody announced and for
// locks that lapse at their TTL. A newcomer never jumps the queue, so a
// worker that loops straight back to the lock it released queues behind the
// others instead of starving them.

const queues = new WeakMap() // store handle -> Map<key, waiter[]>
/** Handles whose store can announce releases made elsewhere (RedisLockStore). */
const announcing = new WeakSet()
/** Handles whose store says at once when a lock lapses (MemoryLockStore). */
const inMemory = new WeakSet()
// Waiting runs on the global setTimeout, looked up at each call: under a test
// framework's fake timers a waiter's timeout and polls follow the fake clock
// (a lock's TTL does not: the store keeps real time).
// setTimeout fires at once for delays above 2^31 - 1 ms, so longer waits are chained.
const MAX_TIMER_MS = 2 ** 31 - 1

function waitersOf(handle, key) {
  return queues.get(handle)?.get(key)
}

/** Arrival order: taken when acquire is called, before any store round trip. */
let nextTicket = 0

function enqueue(handle, key, ttlMs, timeout, retryDelay, ticket, tryNow, attempt, failed) {
  let byKey = queues.get(handle)
  if (byKey === undefined) queues.set(handle, (byKey = new Map()))
  let queue = byKey.get(key)
  if (queue === undefined) {
    byKey.set(key, (queue = []))
    if (announcing.has(handle)) native.watchReleases(handle, key, true)
  }
  return new Promise((resolve, reject) => {
    const waiter = {
      ticket,
      attempt,
      ttlMs,
      retryDelay,
      resolve,
      reject,
      trying: false,
      again: false,
      late: false,
      poll: undefined,
      deadline: undefined,
      // The error of the last attempt, if the store could not be reached: what
      // the waiter rejects with if its time runs out before one gets through.
      failed,
    }
    waiter.deadline = timer(() => giveUp(handle, key, queue, waiter), timeout)
    // Callers whose first attempts were answered out of order still queue in
    // the order they called (behind a head that is already trying).
    let at = queue.length
    while (at > 0 && queue[at - 1].ticket > ticket && !(at === 1 && queue[0].trying)) at--
    queue.splice(at, 0, waiter)
    // The attempt just made found the lock held: the first poll can wait.
    if (queue[0] === waiter) {
      cancel(queue[1]?.poll)
      // A release came while the first attempt was out: look again now.
      const delay = tryNow ? 0 : pollDelay(handle, key, retryDelay)
      waiter.poll = timer(() => tryHead(handle, key, queue), delay)
    }
  })
}

/** A cancellable timer for any delay; `unref`: it does not keep the process alive. */
function timer(fn, ms, unref = false) {
  const t = { id: undefined }
  const arm = (left) => {
    t.id = left > MAX_TIMER_MS ? setTimeout(arm, MAX_TIMER_MS, left - MAX_TIMER_MS) : setTimeout(fn, left)
    if (unref) t.id?.unref?.()
  }
  arm(ms)
  return t
}
const cancel = (t) => t !== undefined && clearTimeout(t.id)

/**
 * First attempts still in flight, per handle and key: a release that lands
 * while one is out may come after the store looked, so it must try again.
 */
const attempts = new WeakMap() // store handle -> Map<key, Set<attempt>>

function attemptStarted(handle, key) {
  let byKey = attempts.get(handle)
  if (byKey === undefined) attempts.set(handle, (byKey = new Map()))
  let set = byKey.get(key)
  if (set === undefined) byKey.set(key, (set = new Set()))
  const attempt = { again: false }
  set.add(attempt)
  return attempt
}

function attemptEnded(handle, key, attempt) {
  const byKey = attempts.get(handle)
  const set = byKey?.get(key)
  if (set === undefined) return
  set.delete(attempt)
  if (set.size === 0) byKey.delete(key)
}

/** A release of `key` through `handle` happened: its first waiter tries now. */
function wake(handle, key) {
  const inFlight = attempts.get(handle)?.get(key)
  if (inFlight !== undefined) for (const attempt of inFlight) attempt.again = true
  const queue = waitersOf(handle, key)
  if (queue !== undefined) tryHead(handle, key, queue)
}

function tryHead(handle, key, queue) {
  const waiter = queue[0]
  if (waiter === undefined) return
  // A wake during an attempt in flight must not be lost: that attempt may
  // have been answered "held" just before the release.
  if (waiter.trying) {
    waiter.again = true
    return
  }
  cancel(waiter.poll)
  waiter.trying = true
  waiter.again = false
  // When the attempt that may take the lock started: its TTL runs from no later.
  waiter.attempt.since = performance.now()
  let grant
  try {
    grant = native.acquire(handle, key, waiter.ttlMs)
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

function afterTry(handle, key, queue, waiter, grant) {
  waiter.trying = false
  // It gave up while this attempt was in flight: whatever it took goes back.
  if (waiter.late) return grant === null ? undefined : giveBackUnwanted(handle, key, grant)
  waiter.failed = undefined
  // Taken: the next waiter polls later, as the lock has just been taken again.
  if (grant !== null) return leave(handle, key, queue, waiter, () => waiter.resolve(grant), false)
  if (waiter.again) return tryHead(handle, key, queue)
  waiter.poll = timer(() => tryHead(handle, key, queue), pollDelay(handle, key, waiter.retryDelay))
}

/**
 * The attempt failed. A store that could not be reached is "not yet": the
 * waiter tries again after retryDelay until its timeout (then rejects with
 * this error). Any other failure rejects it now.
 */
function failedTry(handle, key, queue, waiter, error) {
  waiter.trying = false
  if (!isUnreachable(error)) return leave(handle, key, queue, waiter, () => waiter.reject(error), true)
  waiter.failed = error
  waiter.poll = timer(() => tryHead(handle, key, queue), waiter.retryDelay)
}

/**
 * When to look again: after retryDelay, or as the lock lapses if that is
 * sooner and the store can say so at no cost (a lock that expires frees no
 * one with a release, so nothing else would wake its waiters).
 */
function pollDelay(handle, key, retryDelay) {
  if (!inMemory.has(handle)) return retryDelay
  const left = native.remainingTime(handle, key)
  return left === null ? 0 : Math.min(retryDelay, Math.ceil(left))
}

function giveUp(handle, key, queue, waiter) {
  // On time even if the store has not answered an attempt in flight (it may
  // never): that attempt's result is dealt with when it comes.
  waiter.late = true
  const settle = waiter.failed === undefined ? () => waiter.resolve(null) : () => waiter.reject(waiter.failed)
  leave(handle, key, queue, waiter, settle, true)
}

/**
 * A token nobody will use (an attempt that answered after its caller gave up,
 * or an acquire that failed midway and may have left it): released at once
 * (only that token is deleted), and the next waiter woken. Errors are dropped.
 * `grant` is an owner token, or what native.acquire resolved with.
 */
function giveBackUnwanted(handle, key, grant) {
  const after = (released) => released && wake(handle, key)
  try {
    const released = native.release(handle, key, typeof grant === 'string' ? grant : grant[0])
    if (isThenable(released)) released.then(after, noop)
    else after(released)
  } catch {}
}

/** Take `waiter` out of its queue and settle it; `nextNow`: the next one tries at once. */
function leave(handle, key, queue, waiter, settle, nextNow) {
  cancel(waiter.poll)
  cancel(waiter.deadline)
  const at = queue.indexOf(waiter)
  if (at !== -1) queue.splice(at, 1)
  settle()
  if (queue.length === 0) {
    queues.get(handle)?.delete(key)
    if (announcing.has(handle)) native.watchReleases(handle, key, false)
  } else if (at === 0) {
    const next = queue[0]
    if (nextNow) tryHead(handle, key, queue)
    else next.poll = timer(() => tryHead(handle, key, queue), pollDelay(handle, key, next.retryDelay))
  }
}

/* ---------------------------------- lock ----------------------------------- */

// What a handle's store is, as far as a Lock cares: 2 is any JS store.
const [MEMORY, REDIS, JS_STORE] = [0, 1, 2]
const kindOf = (handle) => (inMemory.has(handle) ? MEMORY : announcing.has(handle) ? REDIS : JS_STORE)

const kCreate = Symbol('Lock.create')

/**
 * One acquisition: its owner token, and what is known about it. Every Lock
 * handle that speaks for this acquisition (the handle that took it, and the
 * one run() gives its callback) shares this object, so an extension through
 * either moves both, and a later acquisition through the same handle never
 * changes it.
 */
class Hold {
  constructor(owner, since, token) {
    this.owner = owner
    /** True while it is ours by what we know; false once released or lost. */
    this.held = true
    /** We held it and know we lost it (a release is not a loss). */
    this.lost = false
    // Outside memory (where the store answers "until when?" at once), a hold
    // lasts heldFor (default: the TTL) from `since`: performance.now() when
    // its acquire or last extension was sent, never later than the store's start.
    this.since = since
    /** The fencing token the store handed over with the acquisition, if it did. */
    this.token = token
    /**
     * What only some holds need, made on first need so a plain run() pays for
     * none of it: { heldFor, controller, expiry, renewal, ended }: a hold
     * length other than the TTL, the signal's AbortController (it costs µs),
     * the timers of its expiry and of autoExtend, and the aborted controller a
     * released hold's handle gives out.
     */
    this.extra = undefined
  }
}

const extras = (hold) =>
  (hold.extra ??= { heldFor: undefined, controller: undefined, expiry: undefined, renewal: undefined, ended: undefined })

/** A hold restored from serialize(): it started elsewhere, at a time unknown here. */
function restoredHold(owner) {
  const hold = new Hold(owner, 0, undefined)
  // Until an extension dates it, its signal aborts only on a loss the store reports.
  extras(hold).heldFor = Infinity
  return hold
}

/** Stop the hold's timers (its signal is left as it was). */
function endTimers(hold) {
  const extra = hold.extra
  if (extra === undefined) return
  cancel(extra.expiry)
  cancel(extra.renewal)
}

class Lock {
  #key
  #ttlMs
  #store
  #handle
  /** MEMORY, REDIS or JS_STORE: what the store can do for signal and fencingToken. */
  #kind
  /** The latest acquisition made (or restored) through this handle, held or not; null before any. */
  #hold

  constructor(token, key, ttlMs, store, handle, kind, hold) {
    if (token !== kCreate) {
      throw new TypeError('Lock cannot be constructed directly: use lock(key, ttlMs) or restoreLock(serialized)')
    }
    this.#key = key
    this.#ttlMs = ttlMs
    this.#store = store
    this.#handle = handle
    this.#kind = kind
    this.#hold = hold
  }

  /**
   * The current hold's fencing token: a number that only grows, per key,
   * across every process using the store (MemoryLockStore, RedisLockStore,
   * and JS stores that implement `fencingToken(key, owner)`); null when this
   * handle holds nothing or the store gives none.
   */
  get fencingToken() {
    const hold = this.#hold
    if (hold === null || !hold.held) return null
    if (hold.token !== undefined) return hold.token
    // The in-memory store keeps it with the hold; Redis and JS stores gave theirs on acquire.
    return this.#kind === MEMORY ? native.fencingToken(this.#handle, this.#key, hold.owner) : null
  }

  /**
   * Aborts, with a LockNotHeldError as its reason, as soon as this hold is
   * known to be lost: extend() or autoExtend found it gone, isExpired() said
   * so, or its TTL passed without an extension (also after an event-loop
   * stall). A handle that holds nothing gives an aborted signal. Release is
   * not a loss: the signal of a hold you released is left as it was.
   */
  get signal() {
    const hold = (this.#hold ??= nothingHeld())
    const extra = extras(hold)
    if (hold.held) {
      if (extra.controller === undefined) {
        extra.controller = new AbortController()
        this.#watchExpiry(hold)
      } else if (!extra.controller.signal.aborted && this.#left(hold) <= 0) {
        this.#markLost(hold)
      }
      return extra.controller.signal
    }
    if (hold.lost && extra.controller !== undefined) return extra.controller.signal
    if (extra.ended === undefined) {
      extra.ended = new AbortController()
      extra.ended.abort(new LockNotHeldError(this.#key))
    }
    return extra.ended.signal
  }

  /** The key this lock guards. */
  get key() {
    return this.#key
  }

  /** How long the lock is held once acquired before it expires on its own, in ms. */
  get ttlMs() {
    return this.#ttlMs
  }

  /** The store this lock was created with. */
  get store() {
    return this.#store
  }

  async run(fn, options) {
    if (typeof fn !== 'function') throw new TypeError(`Lock.run: fn must be a function, got ${describe(fn)}`)
    // The hold this call took is the one it gives back and the one fn's handle
    // speaks for, even if this handle is used by another run() meanwhile.
    // (The store calls are awaited only when they return a promise: the
    // in-memory path pays no extra turns of the microtask queue.)
    let hold = this.#take('Lock.run', options)
    if (isThenable(hold)) hold = await hold
    if (hold === null) return [false, undefined]
    if (options?.autoExtend === true) this.#renewLater(hold)
    const own = new Lock(kCreate, this.#key, this.#ttlMs, this.#store, this.#handle, this.#kind, hold)
    let result
    try {
      result = await fn(own)
    } catch (error) {
      const giving = this.#giveBackQuietly(hold, true)
      if (giving !== undefined) await giving
      throw error
    }
    // fn has run: its result is not thrown away because the release failed.
    const giving = this.#giveBackQuietly(hold, false)
    if (giving !== undefined) await giving
    return [true, result]
  }

  runImmediately(fn) {
    return this.run(fn, { timeout: 0 })
  }

  async acquire(options) {
    const hold = await this.#take('Lock.acquire', options)
    if (hold === null) return false
    if (options?.autoExtend === true) this.#renewLater(hold)
    return true
  }

  acquireImmediately() {
    return this.acquire({ timeout: 0 })
  }

  async release() {
    const hold = this.#hold
    if (hold === null || !hold.held) return false
    return this.#giveBack(hold)
  }

  /**
   * `await using l = lock(key)`: at the end of the scope the lock is released
   * if this handle holds it, also when the scope is left by a throw.
   */
  async [Symbol.asyncDispose]() {
    if (this.#hold?.held) await this.release()
  }

  async extend(ttlMs) {
    const ttl = ttlMs === undefined ? this.#ttlMs : checkMs('Lock.extend', ttlMs, 'ttlMs', false)
    const hold = this.#hold
    if (hold === null || !hold.held) throw new LockNotHeldError(this.#key)
    const sent = this.#kind === MEMORY ? 0 : performance.now()
    let extended = native.extend(this.#handle, this.#key, hold.owner, ttl)
    if (isThenable(extended)) extended = await extended
    if (!extended) {
      this.#markLost(hold)
      throw new LockNotHeldError(this.#key)
    }
    this.#extended(hold, sent, ttl)
  }

  async isLocked() {
    return native.isLocked(this.#handle, this.#key)
  }

  async isExpired() {
    const hold = this.#hold
    if (hold === null) return false
    if (!hold.held) return hold.lost
    // Stores that can tell whose lock it is answer exactly; others can only
    // say whether anyone holds the key.
    const held = native.holds(this.#handle, this.#key, hold.owner) ?? native.isLocked(this.#handle, this.#key)
    if (await held) return false
    this.#markLost(hold)
    return true
  }

  async getRemainingTime() {
    return native.remainingTime(this.#handle, this.#key)
  }

  serialize() {
    const hold = this.#hold
    return JSON.stringify({ key: this.#key, ttlMs: this.#ttlMs, owner: hold?.held ? hold.owner : undefined })
  }

  /**
   * Acquire for a fresh owner: the new Hold, or null if the lock stayed held;
   * or a promise of that when the store (or the wait) has to be awaited.
   */
  #take(where, options) {
    const [timeout, retryDelay] = readOptions(where, options)
    const ticket = nextTicket++
    // With waiters queued in this thread, a newcomer queues behind them.
    if (waitersOf(this.#handle, this.#key) !== undefined) return this.#wait(timeout, retryDelay, ticket)
    const grant = native.acquire(this.#handle, this.#key, this.#ttlMs)
    if (!isThenable(grant)) {
      if (grant === null) return this.#wait(timeout, retryDelay, ticket)
      return this.#took(grant, this.#kind === MEMORY ? 0 : performance.now())
    }
    const sent = performance.now()
    if (timeout === 0) return grant.then((g) => (g === null ? null : this.#took(g, sent)))
    // The first attempt counts against the timeout too, even if the store never answers it.
    // (performance.now, like setTimeout, follows fake timers when a test installs them.)
    const attempt = attemptStarted(this.#handle, this.#key)
    return new Promise((resolve, reject) => {
      let gaveUp = false
      const deadline = timer(() => {
        gaveUp = true
        attemptEnded(this.#handle, this.#key, attempt)
        resolve(null)
      }, timeout)
      const settled = () => {
        attemptEnded(this.#handle, this.#key, attempt)
        cancel(deadline)
        return Math.max(0, timeout - (performance.now() - sent))
      }
      grant.then(
        (g) => {
          if (gaveUp) return g === null ? undefined : giveBackUnwanted(this.#handle, this.#key, g)
          const left = settled()
          if (g !== null) return resolve(this.#took(g, sent))
          resolve(left > 0 ? this.#wait(left, retryDelay, ticket, attempt.again) : null)
        },
        (error) => {
          if (gaveUp) return
          const left = settled()
          // The store could not be reached: with time left, that is "not yet".
          if (left > 0 && isUnreachable(error)) return resolve(this.#wait(left, retryDelay, ticket, false, error))
          reject(error)
        },
      )
    })
  }

  #wait(timeout, retryDelay, ticket, tryNow = false, failed = undefined) {
    if (timeout === 0) return null
    const attempt = { since: 0 }
    const waiting = enqueue(this.#handle, this.#key, this.#ttlMs, timeout, retryDelay, ticket, tryNow, attempt, failed)
    return waiting.then((g) => (g === null ? null : this.#took(g, attempt.since)))
  }

  /** A grant the store gave: the owner token, or [owner, fencing token] from RedisLockStore. */
  #took(grant, since) {
    if (typeof grant !== 'string') return (this.#hold = new Hold(grant[0], since, grant[1]))
    const hold = new Hold(grant, since, undefined)
    this.#hold = hold
    if (this.#kind === JS_STORE && typeof this.#store.fencingToken === 'function') return this.#fenced(hold)
    return hold
  }

  /** A JS store's own fencing token for this acquisition; if it fails, the acquisition is given back. */
  #fenced(hold) {
    const fail = (error) => {
      this.#markLost(hold)
      giveBackUnwanted(this.#handle, this.#key, hold.owner)
      throw error
    }
    const accept = (token) => {
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
      hold.token = token
      return hold
    }
    let token
    try {
      token = this.#store.fencingToken(this.#key, hold.owner)
    } catch (error) {
      fail(error)
    }
    return isThenable(token) ? Promise.resolve(token).then(accept, fail) : accept(token)
  }

  /** ms `hold` has left by what we know; <= 0 once it lapsed (or was found gone). */
  #left(hold) {
    if (this.#kind === MEMORY) {
      if (!native.holds(this.#handle, this.#key, hold.owner)) return 0
      return native.remainingTime(this.#handle, this.#key) ?? 0
    }
    // (A restored hold's length is Infinity: its start is unknown until an extension dates it.)
    return hold.since + (hold.extra?.heldFor ?? this.#ttlMs) - performance.now()
  }

  #extended(hold, sent, ttl) {
    if (!hold.held) return
    hold.since = sent
    const extra = hold.extra
    if (ttl !== this.#ttlMs || extra?.heldFor !== undefined) extras(hold).heldFor = ttl
    if (extra?.controller !== undefined) this.#watchExpiry(hold)
  }

  /** Abort the signal when the hold's time is up (re-armed by each extension). */
  #watchExpiry(hold) {
    const extra = extras(hold)
    cancel(extra.expiry)
    const left = this.#left(hold)
    if (left <= 0) return this.#markLost(hold)
    if (left === Infinity) return
    // The in-memory store counts whole ms: a timer a hair early looks again.
    extra.expiry = timer(() => hold.held && this.#watchExpiry(hold), Math.max(1, Math.ceil(left)), true)
  }

  /** autoExtend: extend every third of the TTL while held; a failure aborts the signal. */
  #renewLater(hold) {
    if (!hold.held) return
    const extra = extras(hold)
    cancel(extra.renewal)
    extra.renewal = timer(() => this.#renew(hold), Math.max(1, Math.floor(this.#ttlMs / 3)), true)
  }

  #renew(hold) {
    if (!hold.held) return
    // Woken after the hold ran out (a stalled event loop): it may have been
    // someone else's meanwhile, even if an extension would still succeed.
    if (this.#left(hold) <= 0) return this.#markLost(hold)
    const sent = this.#kind === MEMORY ? 0 : performance.now()
    const after = (extended) => {
      if (!hold.held) return
      if (!extended) return this.#markLost(hold)
      this.#extended(hold, sent, this.#ttlMs)
      this.#renewLater(hold)
    }
    // A store that fails is asked again next time; the expiry still counts down.
    const retry = () => this.#renewLater(hold)
    let extended
    try {
      extended = native.extend(this.#handle, this.#key, hold.owner, this.#ttlMs)
    } catch {
      return retry()
    }
    if (isThenable(extended)) extended.then(after, retry)
    else after(extended)
  }

  /** Give `hold` back: whether the store released it, now or as a promise. */
  #giveBack(hold) {
    // Marked before the store call, so a second release() racing this one
    // returns false instead of sending a second delete.
    hold.held = false
    endTimers(hold)
    let released
    try {
      released = native.release(this.#handle, this.#key, hold.owner)
    } catch (error) {
      stillHeld(hold)
      throw error
    }
    if (!isThenable(released)) return this.#released(hold, released)
    return released.then(
      (r) => this.#released(hold, r),
      (error) => {
        stillHeld(hold)
        throw error
      },
    )
  }

  #released(hold, released) {
    if (released) wake(this.#handle, this.#key)
    else if (!hold.held) hold.lost = true
    return released
  }

  /**
   * run()'s release: a failure here must not replace the callback's outcome
   * (its error, or its result once it has run), so it becomes a process
   * warning; the lock then lapses at its TTL. Returns undefined, or a promise
   * that never rejects.
   */
  #giveBackQuietly(hold, fnFailed) {
    // Released inside fn already: nothing to give back. (A hold found lost is
    // still released: by our clock it lapsed, but the store may still have it.)
    if (!hold.held && !hold.lost) return undefined
    let released
    try {
      released = this.#giveBack(hold)
    } catch (releaseError) {
      return this.#warnRelease(releaseError, fnFailed)
    }
    if (isThenable(released)) return released.then(noop, (releaseError) => this.#warnRelease(releaseError, fnFailed))
  }

  #warnRelease(releaseError, fnFailed) {
    const outcome = fnFailed ? 'the callback error is the one thrown' : 'its result is returned'
    process.emitWarning(
      `Lock "${this.#key.slice(0, 200)}": release after run() failed (${inspect(releaseError)}); ` +
        `${outcome}, and the lock stays held until its TTL passes.`,
      { type: 'LockReleaseWarning' },
    )
  }

  #markLost(hold) {
    if (!hold.held) return
    hold.held = false
    hold.lost = true
    endTimers(hold)
    // The aborted signal stays this hold's.
    hold.extra?.controller?.abort(new LockNotHeldError(this.#key))
  }
}

/** The store did not answer a release: we may still hold it, so a retry must be possible. */
function stillHeld(hold) {
  if (!hold.lost) hold.held = true
}

/** What a handle that never held anything speaks for. */
function nothingHeld() {
  const hold = new Hold(null, 0, undefined)
  hold.held = false
  return hold
}

Object.defineProperty(Lock.prototype, Symbol.toStringTag, { value: 'Lock' })

/* --------------------------------- global ---------------------------------- */

let currentStore = new MemoryLockStore()
let currentHandle = handleFor(currentStore)
let currentKind = kindOf(currentHandle)

function lock(key, ttlMs) {
  checkKey('lock', key)
  const ttl = ttlMs === undefined ? DEFAULT_TTL_MS : checkMs('lock', ttlMs, 'ttlMs', false)
  return new Lock(kCreate, key, ttl, currentStore, currentHandle, currentKind, null)
}

function restoreLock(serialized) {
  if (typeof serialized !== 'string') {
    throw new TypeError(`restoreLock: serialized must be the string serialize() returned, got ${describe(serialized)}`)
  }
  if (!serialized.isWellFormed()) {
    throw new TypeError('restoreLock: serialized must be well-formed Unicode, but it contains a lone surrogate')
  }
  const fields = native.parseSerialized(serialized)
  if (typeof fields === 'string') {
    checkLoneSurrogates(serialized)
    throw new TypeError(fields)
  }
  const { key, ttlMs, owner } = fields
  checkKey('restoreLock', key, 'serialized key')
  if (owner != null) checkKey('restoreLock', owner, 'serialized owner')
  return new Lock(kCreate, key, ttlMs, currentStore, currentHandle, currentKind, owner == null ? null : restoredHold(owner))
}

/**
 * JSON may escape a lone surrogate (`"\ud800"`), which the addon's parser
 * refuses as invalid JSON: when the text is valid JSON after all, the
 * TypeError says which field holds one.
 */
function checkLoneSurrogates(serialized) {
  let parsed
  try {
    parsed = JSON.parse(serialized)
  } catch {
    return
  }
  if (typeof parsed?.key === 'string') checkKey('restoreLock', parsed.key, 'serialized key')
  if (typeof parsed?.owner === 'string') checkKey('restoreLock', parsed.owner, 'serialized owner')
}

function setLockStore(store) {
  checkStore('setLockStore', store)
  const handle = handleFor(store)
  currentStore = store
  currentHandle = handle
  currentKind = kindOf(handle)
  return store
}

function getLockStore() {
  return currentStore
}

const { verifyLockStore } = require('./verify.js')

module.exports = {
  lock,
  restoreLock,
  setLockStore,
  getLockStore,
  Lock,
  MemoryLockStore,
  RedisLockStore,
  LockNotHeldError,
  verifyLockStore,
}
