'use strict'
/**
 * Semaphores and read-write locks: keys more than one may hold at once. A
 * handle of either is a Lock whose target carries the operations of its kind
 * of hold, so run(), acquire(), extend(), signal, autoExtend and
 * `await using` are the lock's own code, and each permit or read/write hold
 * has its own owner token and expiry as a lock does. Their waiters queue in
 * a lane of their own (one per semaphore key, one per read-write key shared
 * by readers and writers), apart from the plain lock of the same key, whose
 * data they never touch.
 */

const { HoldKind, nativeOps, opsOf, LANES } = require('../core/protocol.js')
const { jsReadWriteOps, missingReadWrite } = require('../bridge/js-read-write.js')

/**
 * What kind of hold a target takes.
 *
 * @typedef {object} Kind
 * @property {'semaphore' | 'read' | 'write'} name as serialize() writes it
 * @property {number} hold the addon's HoldKind
 * @property {number} limit a semaphore's; 0 for read-write holds
 */

/** Each kind's wait lane, before its key (see protocol.js). */
const LANE = { semaphore: LANES.s, read: LANES.r, write: LANES.r }

/** @type {Map<string, import('../core/protocol.js').StoreOps>} kind -> its operations on a native store */
const opsByKind = new Map()

/**
 * Where a store written in JS keeps permit `slot` of semaphore `key`: a key
 * of its own, as a plain lock (keys that start with `keel:permit:` are the
 * semaphores').
 *
 * @param {string} key
 * @param {number} slot
 */
const slotKey = (key, slot) => `keel:permit:${slot}:${key}`

/**
 * A permit's owner token on a JS store names its slot: `<slot>.<token>`.
 *
 * @param {string} owner
 * @returns {[slot: number, token: string]}
 */
function slotOf(owner) {
  const dot = owner.indexOf('.')
  const slot = Number(owner.slice(0, dot))
  return dot > 0 && Number.isSafeInteger(slot) ? [slot, owner.slice(dot + 1)] : [-1, owner]
}

/**
 * A semaphore on a store that has only the five LockStore methods: `limit`
 * permit slots, each a plain lock on a key of its own; an acquire takes the
 * first free slot. (So a caller with limit n is admitted only while one of
 * the first n slots is free.)
 *
 * @param {number} limit
 * @returns {import('../core/protocol.js').StoreOps}
 */
function slotOps(limit) {
  /** @param {object} handle @param {string} key */
  const eachSlot = (handle, key) =>
    Promise.all(Array.from({ length: limit }, (_, slot) => opsOf(handle).wouldWait(handle, slotKey(key, slot))))
  return {
    async acquire(handle, key, ttlMs) {
      const ops = opsOf(handle)
      for (let slot = 0; slot < limit; slot++) {
        // (A failed attempt's give-back wakes this semaphore's waiters.)
        const grant = await ops.acquire(handle, slotKey(key, slot), ttlMs, LANES.s + key)
        if (grant !== null) return `${slot}.${typeof grant === 'string' ? grant : grant[0]}`
      }
      return null
    },
    release(handle, key, owner) {
      const [slot, token] = slotOf(owner)
      return slot < 0 ? false : opsOf(handle).release(handle, slotKey(key, slot), token)
    },
    extend(handle, key, owner, ttlMs) {
      const [slot, token] = slotOf(owner)
      return slot < 0 ? false : opsOf(handle).extend(handle, slotKey(key, slot), token, ttlMs)
    },
    wouldWait: async (handle, key) => (await eachSlot(handle, key)).every(Boolean),
    remainingTime(handle, key, owner) {
      const [slot] = owner === undefined ? [-1] : slotOf(owner)
      return slot < 0 ? null : opsOf(handle).remainingTime(handle, slotKey(key, slot))
    },
    // Such a store can say whether anyone holds the permit's slot.
    holds(handle, key, owner) {
      const [slot] = slotOf(owner)
      return slot < 0 ? false : opsOf(handle).wouldWait(handle, slotKey(key, slot))
    },
    fencingToken: () => null,
    holders: async (handle, key) => (await eachSlot(handle, key)).filter(Boolean).length,
  }
}

/**
 * Operations for a JS store without read-write locks: each one fails (a
 * rejection, through the Lock's async methods) with a TypeError that names
 * the store and the methods it lacks.
 *
 * @param {object} store
 * @returns {import('../core/protocol.js').StoreOps}
 */
function withoutReadWrite(store) {
  const made = /** @type {any} */ (store).constructor
  const name = typeof made === 'function' && made !== Object && made.name ? made.name : 'This LockStore'
  const missing = missingReadWrite(/** @type {Record<string, unknown>} */ (store))
  const why = `: it has no ${missing.join(', ')} (the LockStore methods a store written in JS opts into for them)`
  const fail = () => {
    throw new TypeError(`${name} does not support read-write locks${why}`)
  }
  return { acquire: fail, release: fail, extend: fail, wouldWait: fail, remainingTime: fail, holds: fail, fencingToken: fail, holders: fail }
}

/**
 * The operations a target of `kind` uses on a store.
 *
 * @param {Kind} kind
 * @param {Readonly<import('../core/protocol.js').Capabilities>} capabilities the store's
 * @param {object} store
 */
function opsFor(kind, capabilities, store) {
  if (capabilities.writtenInJs) {
    const ops = kind.name === 'semaphore' ? slotOps(kind.limit) : jsReadWriteOps(kind.name === 'write', /** @type {any} */ (store))
    return ops ?? withoutReadWrite(store)
  }
  // Every store of the addon keeps both natively.
  const id = `${kind.hold}:${kind.limit}`
  let ops = opsByKind.get(id)
  if (ops === undefined) {
    // Bounded: a program that makes semaphores of ever new limits rebuilds them.
    if (opsByKind.size >= 1024) opsByKind.clear()
    opsByKind.set(id, (ops = nativeOps(kind.hold, kind.limit)))
  }
  return ops
}

/** @param {number} limit @returns {Kind} */
const semaphoreKind = (limit) => ({ name: 'semaphore', hold: HoldKind.Permit, limit })
/** @type {Kind} */
const READ = { name: 'read', hold: HoldKind.Read, limit: 0 }
/** @type {Kind} */
const WRITE = { name: 'write', hold: HoldKind.Write, limit: 0 }

/**
 * The target fields a kind adds: its operations, its lane, whether more than
 * one may hold it.
 *
 * @param {Kind} kind
 * @param {string} key
 * @param {{ store: object, capabilities: Readonly<import('../core/protocol.js').Capabilities> }} current
 */
function kindFields(kind, key, current) {
  return {
    ops: opsFor(kind, current.capabilities, current.store),
    lane: LANE[kind.name] + key,
    shared: kind.name !== 'write',
    together: kind.name === 'read',
    holdKind: kind,
  }
}

module.exports = { semaphoreKind, READ, WRITE, kindFields }
