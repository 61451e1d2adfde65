'use strict'
/**
 * First attempts of plain locks on a store that acquires them together
 * (`acquiresTogether`: a store on a file, where every write is a commit of
 * its own). The first attempt in a stretch of the microtask queue is sent
 * at once, as on any store that answers in this thread; those asked after
 * it before that stretch ends (the other loops of a Promise.all, a burst of
 * run()s on many keys) join a batch that is sent as the microtask queue
 * reaches it: one transaction for them all, with the releases queued before
 * them (lib/core/queued-releases.js), where each would have committed on its
 * own. No timer runs between an attempt and its batch; one whose signal
 * aborted meanwhile is never sent. A stretch ends when a microtask queued by
 * its first attempt runs (a resolved promise's: fake timers never hold it).
 * A store closing sends the batch first (close() in the same turn as the
 * acquires finds them taken, as it would had each gone at once).
 */

/**
 * @typedef {object} Asked
 * @property {object} handle
 * @property {string} key
 * @property {number} ttlMs
 * @property {number} wait how a refused attempt waits in the store's line (WAIT)
 * @property {number} asked when it was asked (realNow())
 * @property {AbortSignal | undefined} signal
 * @property {(grant: import('../wait/waiting.js').Grant, error: unknown) => unknown} settle
 *   what the answer makes of the grant, or of the store's error (then `grant` is null)
 * @property {(value: unknown) => void} resolve
 * @property {(error: unknown) => void} reject
 */

const { acquireTogether } = require('../native.js')

const RESOLVED = Promise.resolve()
/** An attempt was sent at once in this stretch. */
let sentAtOnce = false
/** @type {Asked[] | undefined} the batch of this stretch */
let batch
const endStretch = () => {
  sentAtOnce = false
}

/**
 * Whether this first attempt joins the stretch's batch; if not, it is the
 * stretch's first, to be sent at once (and the stretch begins).
 */
function joinsBatch() {
  if (batch !== undefined || sentAtOnce) return true
  sentAtOnce = true
  RESOLVED.then(endStretch)
  return false
}

/**
 * Ask for a plain lock in the stretch's batch: settles with what `settle`
 * makes of its answer, or rejects with the signal's reason if it aborted
 * before the batch was sent.
 *
 * @param {object} handle
 * @param {string} key
 * @param {number} ttlMs
 * @param {number} wait how a refused attempt waits in the store's line (WAIT)
 * @param {number} asked when it was asked (realNow())
 * @param {AbortSignal | undefined} signal
 * @param {Asked['settle']} settle what the answer makes
 * @returns {Promise<any>}
 */
function askInBatch(handle, key, ttlMs, wait, asked, signal, settle) {
  if (batch === undefined) {
    batch = []
    RESOLVED.then(sendBatch)
  }
  const joined = batch
  return new Promise((resolve, reject) => {
    joined.push({ handle, key, ttlMs, wait, asked, signal, settle, resolve, reject })
  })
}

/** Send the stretch's batch now, if there is one. */
function sendBatch() {
  const asked = batch
  if (asked === undefined) return
  batch = undefined
  /** @type {Map<object, Asked[]>} */
  const byStore = new Map()
  for (const one of asked) {
    if (one.signal?.aborted) {
      one.reject(one.signal.reason)
      continue
    }
    const ofStore = byStore.get(one.handle)
    if (ofStore === undefined) byStore.set(one.handle, [one])
    else ofStore.push(one)
  }
  for (const [handle, ofStore] of byStore) send(handle, ofStore)
}

/**
 * @param {object} handle
 * @param {Asked[]} asked
 */
function send(handle, asked) {
  /** @type {unknown[]} */
  let answers
  try {
    answers = acquireTogether(
      handle,
      asked.map((a) => a.key),
      asked.map((a) => a.ttlMs),
      asked.map((a) => a.wait),
      asked.map((a) => a.asked),
    )
  } catch (error) {
    // (A handle the addon no longer knows.)
    answers = asked.map(() => error)
  }
  for (let i = 0; i < asked.length; i++) {
    const one = asked[i]
    const answer = answers[i]
    try {
      const grant = /** @type {import('../wait/waiting.js').Grant} */ (answer)
      one.resolve(answer instanceof Error ? one.settle(null, answer) : one.settle(grant, undefined))
    } catch (error) {
      one.reject(error)
    }
  }
}

module.exports = { joinsBatch, askInBatch, sendBatch }
