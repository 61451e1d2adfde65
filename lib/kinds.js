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

const native = require('./native.js')
const { StoreKind } = require('./protocol.js')

const { HoldMode } = native

/**
 * What kind of hold a target takes.
 *
 * @typedef {object} Kind
 * @property {'semaphore' | 'read' | 'write'} name as serialize() writes it
 * @property {number} mode the addon's HoldMode
 * @property {number} limit a semaphore's; 0 for read-write holds
 */

/**
 * Lanes (wait queues) of semaphores and read-write keys start with a
 * character no lane of a plain lock can: plain lanes are their keys, and a
 * key is well-formed Unicode, which a lone low surrogate is not.
 */
const LANE = { semaphore: '\udc00s', read: '\udc00rw', write: '\udc00rw' }

/** The stores that keep semaphores and read-write locks natively. */
const NATIVE = new Set([StoreKind.Memory])

/** @type {Map<string, import('./protocol.js').StoreOps>} kind -> its operations on a native store */
const opsByKind = new Map()

/**
 * @param {Kind} kind
 * @returns {import('./protocol.js').StoreOps}
 */
function nativeOps({ mode, limit }) {
  return {
    acquire: (handle, key, ttlMs) => native.acquireIn(handle, key, mode, limit, ttlMs),
    release: (handle, key, owner) => native.releaseIn(handle, key, mode, owner),
    extend: (handle, key, owner, ttlMs) => native.extendIn(handle, key, mode, owner, ttlMs),
    isLocked: (handle, key) => native.wouldWait(handle, key, mode, limit),
    remainingTime: (handle, key, owner) => (owner === undefined ? null : native.remainingIn(handle, key, mode, owner)),
    holds: (handle, key, owner) => native.holdsIn(handle, key, mode, owner),
    fencingToken: (handle, key, owner) => native.fencingTokenIn(handle, key, mode, owner),
    holders: (handle, key) => native.holdersIn(handle, key, mode),
    withdraw: mode === HoldMode.Write ? (handle, key) => native.withdrawIn(handle, key, mode) : undefined,
  }
}

/**
 * Operations for a store that does not keep this kind of hold: each one
 * fails (a rejection, through the Lock's async methods) with a TypeError
 * that names the store and what it lacks.
 *
 * @param {Kind} kind
 * @param {string} storeName
 * @returns {import('./protocol.js').StoreOps}
 */
function unsupportedOps(kind, storeName) {
  const what = kind.name === 'semaphore' ? 'semaphores' : 'read-write locks'
  const fail = () => {
    throw new TypeError(
      `${storeName} does not support ${what} yet: use MemoryLockStore for semaphore(), readLock() and writeLock()`,
    )
  }
  return { acquire: fail, release: fail, extend: fail, isLocked: fail, remainingTime: fail, holds: fail, fencingToken: fail, holders: fail }
}

/**
 * The operations a target of `kind` uses on a store.
 *
 * @param {Kind} kind
 * @param {number} storeKind
 * @param {object} store
 */
function opsFor(kind, storeKind, store) {
  if (!NATIVE.has(storeKind)) return unsupportedOps(kind, store.constructor?.name || 'this LockStore')
  const id = `${kind.mode}:${kind.limit}`
  let ops = opsByKind.get(id)
  if (ops === undefined) {
    // Bounded: a program that makes semaphores of ever new limits rebuilds them.
    if (opsByKind.size >= 1024) opsByKind.clear()
    opsByKind.set(id, (ops = nativeOps(kind)))
  }
  return ops
}

/** @param {number} limit @returns {Kind} */
const semaphoreKind = (limit) => ({ name: 'semaphore', mode: HoldMode.Permit, limit })
/** @type {Kind} */
const READ = { name: 'read', mode: HoldMode.Read, limit: 0 }
/** @type {Kind} */
const WRITE = { name: 'write', mode: HoldMode.Write, limit: 0 }

/**
 * The target fields a kind adds: its operations, its lane, whether more than
 * one may hold it.
 *
 * @param {Kind} kind
 * @param {string} key
 * @param {{ store: object, kind: number }} current
 */
function kindFields(kind, key, current) {
  return {
    ops: opsFor(kind, current.kind, current.store),
    lane: LANE[kind.name] + key,
    shared: kind.name !== 'write',
    holdKind: kind,
  }
}

module.exports = { semaphoreKind, READ, WRITE, kindFields }
