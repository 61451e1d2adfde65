'use strict'
/**
 * A waiting writer's mark: a writer refused while others hold a read-write
 * key marks it in the store, and new readers stay out until the writer gets
 * in, withdraws the mark, or its TTL passes. Here: withdrawing it, and the
 * one case where a writer of this thread withdraws it while still waiting.
 */

const { isThenable, noop } = require('../core/check.js')
const { timer, cancel } = require('../core/timers.js')

/**
 * A writer stopped trying (it gave up, or was refused with no wait): it holds
 * back no new readers any more (a writer still waiting marks the key again at
 * its next attempt). A promise, never rejected, when the store answers later;
 * errors are dropped, as the mark lapses at the writer's TTL anyway. On a
 * store that may never answer (one written in JS) the promise settles after
 * `waitAtMost` ms regardless (a native store's is bounded by its command
 * timeout).
 *
 * @param {{ ops: import('../core/protocol.js').StoreOps, handle: object, key: string, capabilities?: import('../core/protocol.js').Capabilities }} want
 *   a write hold's target (what only gives a mark back, and waits for no answer, may leave out
 *   its capabilities)
 * @param {number} [waitAtMost]
 * @returns {Promise<void> | undefined}
 */
function withdraw({ ops, handle, key, capabilities }, waitAtMost = Infinity) {
  if (ops.withdraw === undefined) return undefined
  try {
    const done = ops.withdraw(handle, key)
    if (!isThenable(done)) return undefined
    const answered = /** @type {Promise<unknown>} */ (done).then(noop, noop)
    if (waitAtMost === Infinity || capabilities?.mayNeverAnswer !== true) return answered
    return new Promise((resolve) => {
      const bound = timer(resolve, waitAtMost)
      answered.then(() => {
        cancel(bound)
        resolve()
      })
    })
  } catch {}
  return undefined
}

/**
 * A writer whose first attempt crossed those of readers here that asked
 * before it marked the key, keeping them out while it waits behind them:
 * its mark goes (one round trip), and it marks again at its turn.
 *
 * @param {{ want: { ops: import('../core/protocol.js').StoreOps, handle: object, key: string, together?: boolean }, crossed: boolean }[]} queue
 *   a lane's waiters (lib/wait/waiting.js)
 */
function dropCrossedMarks(queue) {
  let readerAhead = false
  for (const waiter of queue) {
    if (waiter.want.together === true) readerAhead = true
    else if (waiter.crossed && readerAhead) {
      waiter.crossed = false
      withdraw(waiter.want)
    }
  }
}

module.exports = { withdraw, dropCrossedMarks }
