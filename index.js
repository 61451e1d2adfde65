'use strict'
/**
 * `@shaferllc/keel/core`'s lock: "only one of you may do this at a time",
 * across async tasks, worker threads, processes and machines.
 *
 * This file is the public entry: the exports, and the store lock() uses.
 * The rest is in lib/, one concern per file, each using only those before
 * it in the order the README's "How it is built" walks them.
 */

const native = require('./lib/native.js')
const { DEFAULT_TTL_MS, opsOf, kindOf } = require('./lib/protocol.js')
const { describe, checkKey, checkMs, checkStore } = require('./lib/check.js')
const { LockNotHeldError } = require('./lib/errors.js')
const { MemoryLockStore, RedisLockStore, PostgresLockStore } = require('./lib/stores.js')
const { handleFor } = require('./lib/js-store.js')
const { Lock, newLock } = require('./lib/lock.js')
const { verifyLockStore } = require('./lib/verify.js')

/**
 * The store lock() uses now, with what a Lock needs of it.
 *
 * @param {import('./index').LockStore} store
 */
function use(store) {
  const handle = handleFor(store)
  return { store, handle, kind: kindOf(handle), ops: opsOf(handle) }
}
let current = use(new MemoryLockStore())

/**
 * @param {string} key
 * @param {number} [ttlMs]
 */
function lock(key, ttlMs) {
  checkKey('lock', key)
  const ttl = ttlMs === undefined ? DEFAULT_TTL_MS : checkMs('lock', ttlMs, 'ttlMs', false)
  const { store, handle, kind, ops } = current
  return newLock({ key, ttlMs: ttl, store, handle, kind, ops }, null)
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
  const { key, ttlMs, owner } = fields
  checkKey('restoreLock', key, 'serialized key')
  if (owner != null) checkKey('restoreLock', owner, 'serialized owner')
  const { store, handle, kind, ops } = current
  const target = { key, ttlMs, store, handle, kind, ops }
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
  return store
}

function getLockStore() {
  return current.store
}

module.exports = {
  lock,
  restoreLock,
  setLockStore,
  getLockStore,
  Lock,
  MemoryLockStore,
  RedisLockStore,
  PostgresLockStore,
  LockNotHeldError,
  verifyLockStore,
}
