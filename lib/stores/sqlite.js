'use strict'
/**
 * SqliteLockStore: the processes of one machine coordinated through one
 * SQLite file. Its options are a path, or { path, table, commandTimeout,
 * sweepInterval }; the file is opened (and checked) as the store is made.
 */

const { resolve } = require('node:path')
const native = require('../native.js')
const { describe, checkOptionsObject, msOptions } = require('../core/check.js')
const { fromStore } = require('../core/errors.js')
const { announced } = require('../core/store-events.js')
const { ServerLockStore } = require('./server-store.js')

const SQLITE_DEFAULTS = Object.freeze({
  path: undefined,
  table: 'keel_locks',
  commandTimeout: 5_000,
  sweepInterval: 60_000,
})
const WHERE = 'new SqliteLockStore'
// The tables `<table>_holds` and `<table>_state` go beside it.
const TABLE = /^[a-z_][a-z0-9_]{0,49}$/

/**
 * @param {unknown} path
 * @param {string} name
 * @returns {string}
 */
function checkPath(path, name) {
  if (typeof path !== 'string' || path === '') {
    throw new TypeError(`${WHERE}: ${name} must be the path of the database file (made if missing; its folder must exist), got ${describe(path)}`)
  }
  if (path === ':memory:' || path.startsWith('file:')) {
    throw new TypeError(
      `${WHERE}: ${name} must be the path of a file that every process opens (":memory:" and "file:" URIs are not; for one thread, MemoryLockStore), got ${describe(path)}`,
    )
  }
  return resolve(path)
}

/** @param {unknown[]} args */
function readOptions(args) {
  const [pathOrOptions] = args
  if (pathOrOptions === null || typeof pathOrOptions !== 'object') {
    return { path: checkPath(pathOrOptions, 'path'), table: SQLITE_DEFAULTS.table, commandTimeout: SQLITE_DEFAULTS.commandTimeout, sweepInterval: SQLITE_DEFAULTS.sweepInterval }
  }
  const given = checkOptionsObject(WHERE, pathOrOptions, SQLITE_DEFAULTS, 'a path or an options object like { path, table, commandTimeout, sweepInterval }')
  const { table = SQLITE_DEFAULTS.table } = given
  if (typeof table !== 'string' || !TABLE.test(table)) {
    throw new TypeError(
      `${WHERE}: options.table must be a lower-case name (letters, digits and underscores, not starting with a digit, at most 50 characters), got ${describe(table)}`,
    )
  }
  const ms = msOptions(WHERE, given, SQLITE_DEFAULTS)
  return { path: checkPath(given.path, 'options.path'), table, commandTimeout: ms('commandTimeout'), sweepInterval: ms('sweepInterval') }
}

/**
 * A store on a SQLite file that the processes of one machine share: no
 * server, the same locks, semaphores, read-write locks and fencing tokens.
 */
class SqliteLockStore extends ServerLockStore {
  /** @param {unknown[]} pathOrOptions */
  constructor(...pathOrOptions) {
    const config = readOptions(pathOrOptions)
    /** @type {object} */
    let handle
    try {
      handle = native.createSqliteStore(config, (tagged) => announced(handle, tagged))
    } catch (error) {
      throw fromStore(error)
    }
    super('SqliteLockStore', handle)
  }
}

module.exports = { SqliteLockStore }
