'use strict'
/**
 * The default store's one sharp edge, said once. `MemoryLockStore`
 * coordinates the async tasks of one thread: in a process that is one of
 * several running the same code (a `node:cluster` worker; a child forked
 * with an IPC channel, as PM2's cluster mode and most job runners start
 * their workers), every process would take the same lock at the same time.
 * The first lock made there on the implicit default store (one never given
 * to `setLockStore`) emits one warning. A store set explicitly, even a
 * `MemoryLockStore` (the tests' `beforeEach`), says that one process is
 * meant: nothing is said.
 */

const WARNING_CODE = 'KEEL_LOCK_DEFAULT_STORE'

/** What makes this process one of several, or null when nothing does. */
function oneOfSeveral() {
  // `require` gives the cluster object itself (the types know it as the default export).
  const cluster = /** @type {import('node:cluster').Cluster} */ (/** @type {unknown} */ (require('node:cluster')))
  if (cluster.isWorker) return 'a node:cluster worker'
  if (typeof process.send === 'function') return 'a child process with an IPC channel (forked)'
  return null
}

/** Warns, once, when this process is one of several. */
function warnOfDefaultStore() {
  const why = oneOfSeveral()
  if (why === null) return
  process.emitWarning(
    `lock() is using the default in-memory store, which coordinates this process only, but this process is ${why}: ` +
      'the other processes running this code take the same locks at the same time. Call setLockStore() with a store ' +
      'every process reaches (RedisLockStore, PostgresLockStore, MySqlLockStore, or your own) before the first lock; ' +
      'if one process is meant, setLockStore(new MemoryLockStore()) says so.',
    { code: WARNING_CODE },
  )
}

module.exports = { warnOfDefaultStore, WARNING_CODE }
