'use strict'
/**
 * run()'s releases on a store that queues them (`queuesReleases`: a store on
 * a file, where every operation is a write transaction of its own). The
 * release waits in the store and is written with its next operation (a
 * plain lock's acquire in the same transaction, so a loop that gives a lock
 * back and takes one again commits once a cycle, not twice), else at the
 * end of this turn of the event loop (on the real setImmediate of
 * node:timers, taken when this file loads: a test's fake timers would never
 * run it), or as the process exits; close() writes them first, and a store
 * dropped with its thread (a worker terminated) writes them as it goes.
 * Nobody waited for the answer: a release that failed is told as run()'s
 * failed releases are, by a LockReleaseWarning (at exit, written to stderr
 * at once, as a warning emitted then would never be told); the lock then
 * lapses at its TTL.
 */

const { setImmediate: realSetImmediate } = require('node:timers')
const { inspect } = require('node:util')
const { LockStoreError } = require('./errors.js')
const { Internal } = require('../native.js').ErrorCode

/**
 * Handles with releases queued since their last flush, and their operations.
 *
 * @type {Map<object, import('./protocol.js').StoreOps>}
 */
const queuedOn = new Map()
let flushScheduled = false
let exitHooked = false

/**
 * Queue run()'s release of `owner`'s plain lock `key` on `handle`; false
 * where its store releases at once instead (then release it as usual).
 *
 * @param {object} handle
 * @param {import('./protocol.js').StoreOps} ops
 * @param {string} key
 * @param {string} owner
 */
function queueRelease(handle, ops, key, owner) {
  if (ops.queueRelease === undefined || !ops.queueRelease(handle, key, owner)) return false
  queuedOn.set(handle, ops)
  if (!flushScheduled) {
    flushScheduled = true
    realSetImmediate(flushAll)
  }
  if (!exitHooked) {
    exitHooked = true
    process.on('exit', () => flushAll(true))
  }
  return true
}

/** @param {boolean} [exiting] */
function flushAll(exiting = false) {
  flushScheduled = false
  for (const [handle, ops] of queuedOn) flush(handle, ops, exiting)
}

/**
 * Write what `handle`'s store queued, now (before it closes), and warn of
 * the releases that failed.
 *
 * @param {object} handle
 * @param {import('./protocol.js').StoreOps} [ops]
 * @param {boolean} [exiting]
 */
function flush(handle, ops = queuedOn.get(handle), exiting = false) {
  if (ops?.flushReleases === undefined) return
  queuedOn.delete(handle)
  let failed
  try {
    failed = ops.flushReleases(handle)
  } catch (error) {
    // A handle the addon no longer knows: nothing of it can be written.
    failed = [{ key: '', code: Internal, message: String(error) }]
  }
  for (const { key, code, message } of failed) {
    const text =
      `Lock "${key.slice(0, 200)}": release after run() failed (${inspect(new LockStoreError(message, { code }))}); ` +
      'its run() has ended, and the lock stays held until its TTL passes.'
    if (exiting) process.stderr.write(`(node:${process.pid}) LockReleaseWarning: ${text}\n`)
    else process.emitWarning(text, { type: 'LockReleaseWarning' })
  }
}

module.exports = { queueRelease, flush }
