'use strict'
/**
 * MySqlLockStore, and what its options add to a table store's: its defaults
 * and MySQL's rule for a table's name. (The URL itself is read by the addon,
 * which knows which of its parameters the store can use.)
 */

const native = require('../native.js')
const { describe } = require('../core/check.js')
const { announced } = require('../core/store-events.js')
const { ServerLockStore } = require('./server-store.js')
const { readTableOptions } = require('./table-options.js')

const MYSQL_DEFAULTS = Object.freeze({
  url: 'mysql://root@127.0.0.1:3306/test',
  table: 'keel_locks',
  poolSize: 4,
  connectTimeout: 5_000,
  commandTimeout: 5_000,
  sweepInterval: 60_000,
  tls: undefined,
})
const WHERE = 'new MySqlLockStore'
// Lower case only: whether MySQL tells `Locks` from `locks` depends on the
// server's OS (lower_case_table_names), and a lower-case name is the same
// table everywhere. A name is at most 64 characters; the table's leaves room
// for the suffixes of the tables made beside it (`_holds`, `_keys`).
const TABLE = /^(?:[a-z_][a-z0-9_]{0,63}\.)?[a-z_][a-z0-9_]{0,49}$/

/**
 * @param {string} where
 * @param {unknown} table
 * @param {string} name
 * @returns {asserts table is string}
 */
function checkTable(where, table, name) {
  if (typeof table !== 'string' || !TABLE.test(table)) {
    throw new TypeError(
      `${where}: ${name} must be a lower-case MySQL name (letters, digits and underscores, not starting with a digit), optionally database-qualified ("keel_locks", "app.keel_locks"), the table's name at most 50 characters and the database's at most 64, got ${describe(table)}`,
    )
  }
}

/**
 * A store on a MySQL (or MariaDB) server, spoken to from Rust over a small
 * pool of connections.
 */
class MySqlLockStore extends ServerLockStore {
  /** @param {unknown[]} urlOrOptions */
  constructor(...urlOrOptions) {
    const handle = native.createMysqlStore(readTableOptions(WHERE, urlOrOptions, MYSQL_DEFAULTS, checkTable).config, (tagged) => announced(handle, tagged))
    super('MySqlLockStore', handle)
  }

  /**
   * The SQL that makes every object a store on `table` uses, for a database
   * whose users may not create them: run it once as a user who may.
   *
   * @param {unknown} [table]
   */
  static schema(table = 'keel_locks') {
    checkTable('MySqlLockStore.schema', table, 'table')
    return native.mysqlSchema(table)
  }
}

module.exports = { MySqlLockStore }
