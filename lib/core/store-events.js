'use strict'
/**
 * What the stores tell the rest of the lock, and what the lock tells them
 * back, with neither knowing the other: releases announced by other
 * processes and locks handed over from a store's line (a store calls
 * `announced`; the wait queues listen), a store closed (`closedHandle`), and
 * what was sent without waiting for its answer, which close() lets finish
 * first (`answeredBeforeClose`, `releasesAnswered`).
 */

const { noop } = require('./check.js')

/**
 * Who hears of a release another process announced through a store that
 * follows them: the wait queues (lib/wait/waiting.js) register here.
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
 * that the network or a busy thread held up would be. `onHeld` is called
 * with the key of each as it is held (one may be of a key an earlier case
 * used, its message late).
 *
 * @param {(key: string) => void} [onHeld]
 */
function holdHandOvers(onHeld = noop) {
  /** @type {[object, string][]} */
  const held = []
  const hear = heard
  heard = (handle, tagged) => {
    if (tagged[0] !== 'h') return hear(handle, tagged)
    held.push([handle, tagged])
    onHeld(handedKey(tagged))
  }
  return {
    /** How many are held. */
    get count() {
      return held.length
    },
    /** How many of `key` are held. */
    countOf(/** @type {string} */ key) {
      return held.filter(([, tagged]) => handedKey(tagged) === key).length
    },
    /** Tell them now, and tell later ones at once. */
    deliver() {
      if (heard !== hear) heard = hear
      for (const [handle, tagged] of held.splice(0)) hear(handle, tagged)
    },
  }
}

/**
 * The key of a hand-over as heard (`h<token> <asked> <owner> <key>`).
 *
 * @param {string} tagged
 */
function handedKey(tagged) {
  let at = 0
  for (let spaces = 0; spaces < 3; spaces++) at = tagged.indexOf(' ', at) + 1
  return tagged.slice(at)
}

/**
 * For the cross-process tests of a store with no server to watch
 * (__test__/stores/sqlite-line.test.mjs, through __test__/helpers/child.mjs):
 * from now on, counts what this thread hears from other processes, as it
 * hears it: locks handed to it from a store's line, and other releases
 * announced.
 */
function countHeard() {
  const counts = { handOvers: 0, announcements: 0 }
  const hear = heard
  heard = (handle, tagged) => {
    if (tagged[0] === 'h') counts.handOvers++
    else counts.announcements++
    hear(handle, tagged)
  }
  return counts
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

/**
 * A store heard `tagged` (a letter saying what of, then the key) for `handle`.
 *
 * @param {object} handle
 * @param {string} tagged
 */
function announced(handle, tagged) {
  heard(handle, tagged)
}

/**
 * The store of `handle` was closed.
 *
 * @param {object} handle
 */
function closedHandle(handle) {
  closed(handle)
}

module.exports = { onAnnouncedRelease, announced, holdHandOvers, countHeard, onClosed, closedHandle, answeredBeforeClose, releasesAnswered }
