'use strict'
/**
 * Read-write locks on a store written in JS, through the methods it opts
 * into for them (READ_WRITE_METHODS; documented in LockStore), called as the
 * bridge calls the five (lib/bridge/js-store.js): with exactly their arguments, TTLs
 * in whole milliseconds, each answer checked. A store that lacks any of them
 * keeps no read-write locks: using one rejects with a TypeError naming what
 * is missing.
 */

const { READ_WRITE_METHODS, LANES } = require('../core/protocol.js')
const { call, answer, boolean, milliseconds, wrongAnswer, acquireThrough } = require('./js-store.js')
const { withdraw } = require('../wait/marks.js')
const { giveBack } = require('../wait/waiting.js')

/**
 * The read-write methods `store` does not have.
 *
 * @param {Record<string, unknown>} store
 */
const missingReadWrite = (store) => READ_WRITE_METHODS.filter((name) => typeof store[name] !== 'function')

/** @param {unknown} value */
function count(value) {
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return value
  throw wrongAnswer('holders', 'a non-negative integer', value)
}

const readersWait = boolean('readersWait')
const left = milliseconds('holdRemaining')
const [released, extended] = [boolean('releaseHold'), boolean('extendHold')]

/** @param {object} handle */
const storeOf = (handle) => /** @type {{ store: Record<string, any> }} */ (handle).store

/**
 * A read hold's operations (`write` false) or a write hold's, on a JS store
 * that has every read-write method.
 *
 * @param {boolean} write
 * @returns {import('../core/protocol.js').StoreOps}
 */
function readWriteOps(write) {
  /** @type {import('../core/protocol.js').StoreOps} */
  const ops = {
    // An acquire that failed gives back what it may have taken: the hold, and a writer's mark.
    acquire: (handle, key, ttlMs) =>
      acquireThrough(storeOf(handle), write ? 'acquireWrite' : 'acquireRead', key, ttlMs, (owner) => {
        const want = { handle, key, lane: LANES.r + key, ops }
        giveBack(want, owner)
        withdraw(want)
      }),
    release: (handle, key, owner) => answer(call(storeOf(handle), 'releaseHold', key, owner), released),
    extend: (handle, key, owner, ttlMs) => answer(call(storeOf(handle), 'extendHold', key, owner, Math.ceil(ttlMs)), extended),
    wouldWait: write
      ? (handle, key) => answer(call(storeOf(handle), 'holders', key), (n) => count(n) > 0)
      : (handle, key) => answer(call(storeOf(handle), 'readersWait', key), readersWait),
    remainingTime: (handle, key, owner) => (owner === undefined ? null : answer(call(storeOf(handle), 'holdRemaining', key, owner), left)),
    holds: (handle, key, owner) => answer(call(storeOf(handle), 'holdRemaining', key, owner), (ms) => left(ms) !== null),
    // Fencing tokens for read-write holds are the native stores'.
    fencingToken: () => null,
    holders: (handle, key) => answer(call(storeOf(handle), 'holders', key), count),
    withdraw: write ? (handle, key) => call(storeOf(handle), 'withdrawWriter', key) : undefined,
  }
  return ops
}

const READ_OPS = readWriteOps(false)
const WRITE_OPS = readWriteOps(true)

/**
 * A JS store's operations for read (`write` false) or write holds, or null
 * when it lacks a read-write method.
 *
 * @param {boolean} write
 * @param {Record<string, unknown>} store
 */
const jsReadWriteOps = (write, store) => (missingReadWrite(store).length > 0 ? null : write ? WRITE_OPS : READ_OPS)

module.exports = { jsReadWriteOps, missingReadWrite }
