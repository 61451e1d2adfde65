'use strict'
/**
 * What every store on a server has beside the five operations: ping() at
 * start-up, and close() once what was sent without waiting is answered (and
 * what was queued, written).
 */

const native = require('../native.js')
const { isThenable } = require('../core/check.js')
const { fromStore } = require('../core/errors.js')
const { releasesAnswered, closedHandle } = require('../core/store-events.js')
const { flush } = require('../core/queued-releases.js')
const { sendBatch } = require('../core/acquires-together.js')
const { NativeLockStore, handleOf } = require('./native-store.js')

/** @param {NativeLockStore} store */
async function closeStore(store) {
  const handle = /** @type {object} */ (handleOf(store))
  const answered = releasesAnswered(handle)
  if (answered !== undefined) await answered
  sendBatch()
  flush(handle)
  native.closeStore(handle)
  closedHandle(handle)
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

module.exports = { ServerLockStore }
