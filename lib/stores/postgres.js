'use strict'
/**
 * PostgresLockStore, and what its options add to a table store's: its
 * defaults, PostgreSQL's rule for a table's name, and listenUrl. (The URL
 * itself is read by the addon, with tokio-postgres's own parser.)
 */

const native = require('../native.js')
const { describe } = require('../core/check.js')
const { announced } = require('../core/store-events.js')
const { ServerLockStore } = require('./server-store.js')
const { readTableOptions } = require('./table-options.js')

const POSTGRES_DEFAULTS = Object.freeze({
  url: 'postgres://postgres@127.0.0.1:5432/postgres',
  table: 'locks',
  poolSize: 4,
  connectTimeout: 5_000,
  commandTimeout: 5_000,
  sweepInterval: 60_000,
  listenUrl: undefined,
  tls: undefined,
})
const WHERE = 'new PostgresLockStore'
// Unquoted, lower case: the name means to PostgreSQL what it means to the
// docs' store's SQL. Room is left for `_fencing` (a name is at most 63 bytes).
const TABLE = /^(?:[a-z_][a-z0-9_]{0,62}\.)?[a-z_][a-z0-9_]{0,54}$/

/**
 * @param {string} where
 * @param {unknown} table
 * @param {string} name
 * @returns {asserts table is string}
 */
function checkTable(where, table, name) {
  if (typeof table !== 'string' || table.length > 63 || !TABLE.test(table)) {
    throw new TypeError(
      `${where}: ${name} must be a lower-case SQL name, optionally schema-qualified ("locks", "app.locks"), of at most 55 characters, got ${describe(table)}`,
    )
  }
}

/**
 * @param {unknown[]} args the constructor's arguments: none for the default server
 * @returns {[import('../native').TableConfig, string | undefined]} the table store's options, and listenUrl
 */
function readPostgresOptions(args) {
  const { config, given } = readTableOptions(WHERE, args, POSTGRES_DEFAULTS, checkTable)
  // (listenUrl may be left undefined: it then means url's server, never a default one.)
  const { listenUrl } = given
  if (listenUrl !== undefined && typeof listenUrl !== 'string') {
    throw new TypeError(`${WHERE}: options.listenUrl must be a string (a postgres:// URL), got ${describe(listenUrl)}`)
  }
  return [config, listenUrl]
}

/**
 * A store on a PostgreSQL server, spoken to from Rust over a small pool of
 * connections. Its table is the docs' database store's, so processes using
 * either exclude each other; expiry is decided by the server's clock.
 */
class PostgresLockStore extends ServerLockStore {
  /** @param {unknown[]} urlOrOptions */
  constructor(...urlOrOptions) {
    // Tagged `w`: a warning from the store's listener (notifications that
    // do not arrive), emitted once as a process warning; else a release.
    const handle = native.createPostgresStore(...readPostgresOptions(urlOrOptions), (tagged) =>
      tagged[0] === 'w'
        ? process.emitWarning(tagged.slice(1), { type: 'LockStoreWarning', code: 'KEEL_POSTGRES_NOT_NOTIFIED' })
        : announced(handle, tagged),
    )
    super('PostgresLockStore', handle)
  }

  /**
   * The SQL that makes every object a store on `table` uses, for a database
   * whose users may not create them: run it once as a user who may.
   *
   * @param {unknown} [table]
   */
  static schema(table = 'locks') {
    checkTable('PostgresLockStore.schema', table, 'table')
    return native.postgresSchema(table)
  }
}

module.exports = { PostgresLockStore }
