'use strict'
/**
 * `@shaferllc/keel/core`'s lock: "only one of you may do this at a time",
 * across async tasks, worker threads, processes and machines.
 *
 * This file is the public entry: the exports, and the store lock() uses.
 * The rest is in lib/, in layers (one folder each), one concern per file,
 * each using only those before it in the order docs/how-it-is-built.md
 * walks them.
 */

const native = require('./lib/native.js')
const { DEFAULT_TTL_MS, opsOf, capabilitiesOf } = require('./lib/core/protocol.js')
const { describe, checkKey, checkMs, checkStore } = require('./lib/core/check.js')
const { LockNotHeldError, LockStoreError } = require('./lib/core/errors.js')
const { MemoryLockStore } = require('./lib/stores/memory.js')
const { handleFor } = require('./lib/bridge/js-store.js')
const { Lock, newLock } = require('./lib/lock/lock.js')
const { semaphoreKind, READ, WRITE, kindFields } = require('./lib/lock/kinds.js')
const { verifyLockStore } = require('./lib/verify/verify.js')
const { CHANNELS } = require('./lib/core/tracing.js')
const { warnOfDefaultStore } = require('./lib/stores/default-store.js')

/**
 * The store lock() uses now, with what a Lock needs of it.
 *
 * @param {import('./index').LockStore} store
 */
function use(store) {
  const handle = handleFor(store)
  return { store, handle, capabilities: capabilitiesOf(handle), ops: opsOf(handle) }
}
let current = use(new MemoryLockStore())
/** Whether `current` is still the default no one chose (lib/stores/default-store.js). */
let implicitDefault = true

/** The store in use, for a lock about to be made on it. */
function inUse() {
  if (implicitDefault) {
    implicitDefault = false
    warnOfDefaultStore()
  }
  return current
}

/**
 * @param {string} key
 * @param {number} [ttlMs]
 */
function lock(key, ttlMs) {
  checkKey('lock', key)
  const ttl = ttlMs === undefined ? DEFAULT_TTL_MS : checkMs('lock', ttlMs, 'ttlMs', false)
  const { store, handle, capabilities, ops } = inUse()
  return newLock({ key, lane: key, ttlMs: ttl, store, handle, capabilities, ops }, null)
}

/**
 * A target for a semaphore permit or a read-write hold on the current store.
 *
 * @param {string} key
 * @param {number} ttlMs
 * @param {import('./lib/lock/kinds.js').Kind} holdKind
 */
function kindTarget(key, ttlMs, holdKind) {
  const used = inUse()
  const { store, handle, capabilities } = used
  return { key, ttlMs, store, handle, capabilities, ...kindFields(holdKind, key, used) }
}

/**
 * @param {string} where
 * @param {unknown} ttlMs
 */
const ttlOf = (where, ttlMs) => (ttlMs === undefined ? DEFAULT_TTL_MS : checkMs(where, ttlMs, 'ttlMs', false))

/**
 * @param {string} key
 * @param {number} limit
 * @param {number} [ttlMs]
 */
function semaphore(key, limit, ttlMs) {
  checkKey('semaphore', key)
  checkLimit('semaphore', limit)
  return newLock(kindTarget(key, ttlOf('semaphore', ttlMs), semaphoreKind(limit)), null)
}

/**
 * @param {string} key
 * @param {number} [ttlMs]
 */
function readLock(key, ttlMs) {
  checkKey('readLock', key)
  return newLock(kindTarget(key, ttlOf('readLock', ttlMs), READ), null)
}

/**
 * @param {string} key
 * @param {number} [ttlMs]
 */
function writeLock(key, ttlMs) {
  checkKey('writeLock', key)
  return newLock(kindTarget(key, ttlOf('writeLock', ttlMs), WRITE), null)
}

/**
 * @param {string} where
 * @param {unknown} limit
 * @returns {asserts limit is number}
 */
function checkLimit(where, limit) {
  if (typeof limit !== 'number') throw new TypeError(`${where}: limit must be a number of permits, got ${describe(limit)}`)
  if (!Number.isSafeInteger(limit) || limit < 1) {
    throw new RangeError(`${where}: limit must be a positive safe integer, got ${limit}`)
  }
}

/** @param {string} serialized */
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
  const { key, ttlMs, owner, kind: holdKind, limit } = fields
  checkKey('restoreLock', key, 'serialized key')
  if (owner != null) checkKey('restoreLock', owner, 'serialized owner')
  if (holdKind === 'semaphore') return newLock(kindTarget(key, ttlMs, semaphoreKind(/** @type {number} */ (limit))), owner ?? null)
  if (holdKind === 'read' || holdKind === 'write') return newLock(kindTarget(key, ttlMs, holdKind === 'read' ? READ : WRITE), owner ?? null)
  const { store, handle, capabilities, ops } = inUse()
  const target = { key, lane: key, ttlMs, store, handle, capabilities, ops }
  return newLock(target, owner ?? null)
}

/**
 * JSON may escape a lone surrogate (`"\ud800"`), which the addon's parser
 * refuses as invalid JSON: when the text is valid JSON after all, the
 * TypeError says which field holds one.
 *
 * @param {string} serialized
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

/**
 * @template {import('./index').LockStore} S
 * @param {S} store
 * @returns {S}
 */
function setLockStore(store) {
  checkStore('setLockStore', store)
  current = use(store)
  implicitDefault = false
  return store
}

function getLockStore() {
  return current.store
}

module.exports = {
  lock,
  semaphore,
  readLock,
  writeLock,
  restoreLock,
  setLockStore,
  getLockStore,
  Lock,
  // Every store this package ships (lib/stores/index.js).
  ...require('./lib/stores/index.js'),
  LockNotHeldError,
  LockStoreError,
  verifyLockStore,
  channels: CHANNELS,
}
