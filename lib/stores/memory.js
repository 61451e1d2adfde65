'use strict'
/** MemoryLockStore, the default store. */

const native = require('../native.js')
const { NativeLockStore, handleOf } = require('./native-store.js')

/**
 * The default store: an in-memory map with expiry on a monotonic clock. Per
 * isolate: it coordinates async tasks of one thread and nothing more.
 */
class MemoryLockStore extends NativeLockStore {
  constructor() {
    super('MemoryLockStore', native.createMemoryStore())
  }

  /** Entries held in memory, counting expired ones not swept yet. */
  get size() {
    return native.memoryStoreSize(/** @type {object} */ (handleOf(this)))
  }
}

module.exports = { MemoryLockStore }
