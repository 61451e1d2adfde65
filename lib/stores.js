'use strict'
/**
 * The stores that run natively: MemoryLockStore (the default, in memory on
 * the JS thread), RedisLockStore (a Redis server or Cluster),
 * PostgresLockStore (a PostgreSQL server) and MySqlLockStore (a MySQL or
 * MariaDB server), spoken to from Rust. Each method checks its arguments, so
 * a direct call with bad input fails with the argument's name, then makes
 * one native call; a failure of the store is rethrown from the method as a
 * LockStoreError whose stack runs through the caller (lib/errors.js fromStore).
 */

const native = require('./native.js')
const { checkKey, checkMs, isThenable, noop } = require('./check.js')
const { fromStore } = require('./errors.js')
const { readRedisOptions } = require('./redis-options.js')
const { readPostgresOptions, checkTable } = require('./postgres-options.js')
const { readMysqlOptions, checkTable: checkMysqlTable } = require('./mysql-options.js')

/** A store used directly speaks of plain locks. */
const LOCK = native.HoldKind.Lock

/** @type {(store: object) => object | undefined} */
let handleOf = () => undefined

class NativeLockStore {
  #handle
  #name

  /**
   * @param {string} name
   * @param {object} handle
   */
  constructor(name, handle) {
    this.#name = name
    this.#handle = handle
  }

  static {
    handleOf = (store) => (#handle in store ? store.#handle : undefined)
  }

  /**
   * @param {string} key
   * @param {string} owner
   * @param {number} ttlMs
   */
  async acquire(key, owner, ttlMs) {
    const where = this.#checkCall('acquire', key, owner)
    checkMs(where, ttlMs, 'ttlMs', false)
    try {
      const acquired = native.storeAcquire(this.#handle, key, LOCK, 0, owner, ttlMs)
      return isThenable(acquired) ? await acquired : acquired
    } catch (error) {
      throw fromStore(error)
    }
  }

  /**
   * @param {string} key
   * @param {string} owner
   */
  async release(key, owner) {
    this.#checkCall('release', key, owner)
    try {
      const released = native.release(this.#handle, key, LOCK, owner)
      return isThenable(released) ? await released : released
    } catch (error) {
      throw fromStore(error)
    }
  }

  /**
   * @param {string} key
   * @param {string} owner
   * @param {number} ttlMs
   */
  async extend(key, owner, ttlMs) {
    const where = this.#checkCall('extend', key, owner)
    checkMs(where, ttlMs, 'ttlMs', false)
    try {
      const extended = native.extend(this.#handle, key, LOCK, owner, ttlMs)
      return isThenable(extended) ? await extended : extended
    } catch (error) {
      throw fromStore(error)
    }
  }

  /** @param {string} key */
  async isLocked(key) {
    checkKey(`${this.#name}.isLocked`, key)
    try {
      const locked = native.isLocked(this.#handle, key, LOCK, 0)
      return isThenable(locked) ? await locked : locked
    } catch (error) {
      throw fromStore(error)
    }
  }

  /** @param {string} key */
  async remainingTime(key) {
    checkKey(`${this.#name}.remainingTime`, key)
    try {
      const left = native.remainingTime(this.#handle, key, LOCK)
      return isThenable(left) ? await left : left
    } catch (error) {
      throw fromStore(error)
    }
  }

  /**
   * @param {string} method
   * @param {unknown} key
   * @param {unknown} owner
   */
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
    super('MemoryLockStore', native.createMemoryStore())
  }

  /** Entries held in memory, counting expired ones not swept yet. */
  get size() {
    return native.memoryStoreSize(/** @type {object} */ (handleOf(this)))
  }
}

/**
 * Who hears of a release another process announced through a
 * RedisLockStore, PostgresLockStore or MySqlLockStore: the wait queues
 * (lib/waiting.js, later in the order) register here.
 *
 * @type {(handle: object, tagged: string) => void}
 */
let heard = noop

/** @param {(handle: object, tagged: string) => void} listener */
function onAnnouncedRelease(listener) {
  heard = listener
}

/**
 * For the tests that hold a hand-over in flight (__test__/stores/contract-line.mjs):
 * from now on, the locks handed to this thread from a store's line are told
 * to its waiters only at `deliver()`, in the order they came, as a message
 * that the network or a busy thread held up would be.
 */
function holdHandOvers() {
  /** @type {[object, string][]} */
  const held = []
  const hear = heard
  heard = (handle, tagged) => (tagged[0] === 'h' ? void held.push([handle, tagged]) : hear(handle, tagged))
  return {
    /** How many are held. */
    get count() {
      return held.length
    },
    /** Tell them now, and tell later ones at once. */
    deliver() {
      if (heard !== hear) heard = hear
      for (const [handle, tagged] of held.splice(0)) hear(handle, tagged)
    },
  }
}

/**
 * Who hears that a store was closed: the wait queues, whose waiters then
 * reject at once instead of at their next poll.
 *
 * @type {(handle: object) => void}
 */
let closed = noop

/** @param {(handle: object) => void} listener */
function onClosed(listener) {
  closed = listener
}

/**
 * What was sent without waiting for its answer, per store handle: releases
 * run() ended on (a store that tells when they are written), locks given
 * back, places left in a store's line. close() lets them be answered first,
 * so a run() followed by close() neither cuts its release off nor warns that
 * it failed, and a waiter that gave up just before close() leaves no lock
 * or place behind to lapse.
 *
 * @typedef {{ count: number, idle: (() => void) | undefined }} Unanswered
 * @type {WeakMap<object, Unanswered>}
 */
const unanswered = new WeakMap()

/**
 * A release on `handle` that nobody waits for is in flight: pass what this
 * returns to releaseAnswered once it is answered.
 *
 * @param {object} handle
 */
function releaseInFlight(handle) {
  let flight = unanswered.get(handle)
  if (flight === undefined) unanswered.set(handle, (flight = { count: 0, idle: undefined }))
  flight.count++
  return flight
}

/** @param {Unanswered} flight */
function releaseAnswered(flight) {
  if (--flight.count === 0) flight.idle?.()
}

/**
 * `answer`, of an operation on `handle` nobody waits for, is let in before
 * close() (as run()'s releases are).
 *
 * @param {object} handle
 * @param {Promise<unknown>} answer
 */
function answeredBeforeClose(handle, answer) {
  const flight = releaseInFlight(handle)
  const answered = () => releaseAnswered(flight)
  answer.then(answered, answered)
}

/**
 * Once every release in flight on `handle` is answered (each within the
 * store's command timeout).
 *
 * @param {object} handle
 * @returns {Promise<void> | undefined}
 */
function releasesAnswered(handle) {
  const flight = unanswered.get(handle)
  if (flight === undefined || flight.count === 0) return undefined
  return new Promise((resolve) => {
    const before = flight.idle
    flight.idle = () => {
      flight.idle = undefined
      before?.()
      resolve()
    }
  })
}

/** @param {NativeLockStore} store */
async function closeStore(store) {
  const handle = /** @type {object} */ (handleOf(store))
  const answered = releasesAnswered(handle)
  if (answered !== undefined) await answered
  native.closeStore(handle)
  closed(handle)
}

/** What the stores on a server have beside the operations. */
class ServerLockStore extends NativeLockStore {
  /**
   * Resolves once the server answered one round trip (opening a connection
   * if none is open); rejects as an operation would, with a LockStoreError
   * (ERR_LOCK_STORE_CONNECTION, _AUTH, _TIMEOUT, ...) within the store's
   * connectTimeout when the server cannot be reached: a check at start-up.
   */
  async ping() {
    try {
      const answered = native.ping(/** @type {object} */ (handleOf(this)))
      if (isThenable(answered)) await answered
    } catch (error) {
      throw fromStore(error)
    }
  }

  /**
   * Close the connections, once what the locks sent without waiting (run()'s
   * releases, locks given back, places left in line) is answered. Later
   * operations, and acquires waiting, reject with code ERR_LOCK_STORE_CLOSED.
   */
  async close() {
    await closeStore(this)
  }
}

/**
 * A store on a Redis server, spoken to from Rust over one multiplexed
 * connection. Wire-compatible with the docs' ioredis store: the key (after
 * `prefix`) holds the owner token, with the lock's TTL as its Redis expiry.
 */
class RedisLockStore extends ServerLockStore {
  /** @param {unknown[]} urlOrOptions */
  constructor(...urlOrOptions) {
    const handle = native.createRedisStore(readRedisOptions(urlOrOptions), (tagged) => heard(handle, tagged))
    super('RedisLockStore', handle)
  }
}

/**
 * A store on a PostgreSQL server, spoken to from Rust over a small pool of
 * connections. Its table is the docs' database store's, so processes using
 * either exclude each other; expiry is decided by the server's clock.
 */
class PostgresLockStore extends ServerLockStore {
  /** @param {unknown[]} urlOrOptions */
  constructor(...urlOrOptions) {
    // Tagged `w`: a warning from the store's listener (notifications that
    // do not arrive), emitted once as a process warning; else a release.
    const handle = native.createPostgresStore(readPostgresOptions(urlOrOptions), (tagged) =>
      tagged[0] === 'w'
        ? process.emitWarning(tagged.slice(1), { type: 'LockStoreWarning', code: 'KEEL_POSTGRES_NOT_NOTIFIED' })
        : heard(handle, tagged),
    )
    super('PostgresLockStore', handle)
  }

  /**
   * The SQL that makes every object a store on `table` uses, for a database
   * whose users may not create them: run it once as a user who may.
   *
   * @param {unknown} [table]
   */
  static schema(table = 'locks') {
    checkTable('PostgresLockStore.schema', table, 'table')
    return native.postgresSchema(table)
  }
}

/**
 * A store on a MySQL (or MariaDB) server, spoken to from Rust over a small
 * pool of connections.
 */
class MySqlLockStore extends ServerLockStore {
  /** @param {unknown[]} urlOrOptions */
  constructor(...urlOrOptions) {
    const handle = native.createMysqlStore(readMysqlOptions(urlOrOptions), (tagged) => heard(handle, tagged))
    super('MySqlLockStore', handle)
  }

  /**
   * The SQL that makes every object a store on `table` uses, for a database
   * whose users may not create them: run it once as a user who may.
   *
   * @param {unknown} [table]
   */
  static schema(table = 'keel_locks') {
    checkMysqlTable('MySqlLockStore.schema', table, 'table')
    return native.mysqlSchema(table)
  }
}

module.exports = { NativeLockStore, MemoryLockStore, RedisLockStore, PostgresLockStore, MySqlLockStore, handleOf, onAnnouncedRelease, holdHandOvers, onClosed, answeredBeforeClose }
