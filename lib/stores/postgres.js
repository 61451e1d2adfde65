'use strict'
/**
 * PostgresLockStore, and its options read and checked: a postgres:// URL or an
 * options object. An unknown option is an error. (The URL itself is read by
 * the addon, with tokio-postgres's own parser.)
 */

const native = require('../native.js')
const { describe, checkOptionsObject, checkUrlGiven, checkUrlOption, checkPoolSize, msOptions } = require('../core/check.js')
const { announced } = require('../core/store-events.js')
const { ServerLockStore } = require('./server-store.js')
const { readTls } = require('./tls-options.js')

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
 * @returns {import('../native').PostgresConfig}
 */
function readPostgresOptions(args) {
  if (args.length === 0) return { ...POSTGRES_DEFAULTS, listenUrl: undefined, tls: undefined }
  const [urlOrOptions] = args
  checkUrlGiven(WHERE, urlOrOptions, POSTGRES_DEFAULTS.url)
  if (typeof urlOrOptions === 'string') return { ...POSTGRES_DEFAULTS, url: urlOrOptions, listenUrl: undefined, tls: undefined }
  const given = checkOptionsObject(
    WHERE,
    urlOrOptions,
    POSTGRES_DEFAULTS,
    'a postgres:// URL or an options object like { url, table, poolSize, connectTimeout, commandTimeout }',
  )
  // (listenUrl may be left undefined: it then means url's server, never a default one.)
  checkUrlOption(WHERE, given, 'url', POSTGRES_DEFAULTS.url)
  const { url = POSTGRES_DEFAULTS.url, table = POSTGRES_DEFAULTS.table, poolSize = POSTGRES_DEFAULTS.poolSize } = given
  if (typeof url !== 'string') throw new TypeError(`${WHERE}: options.url must be a string, got ${describe(url)}`)
  const { listenUrl } = given
  if (listenUrl !== undefined && typeof listenUrl !== 'string') {
    throw new TypeError(`${WHERE}: options.listenUrl must be a string (a postgres:// URL), got ${describe(listenUrl)}`)
  }
  checkTable(WHERE, table, 'options.table')
  const ms = msOptions(WHERE, given, POSTGRES_DEFAULTS)
  return {
    url,
    table,
    poolSize: checkPoolSize(WHERE, poolSize),
    connectTimeout: ms('connectTimeout'),
    commandTimeout: ms('commandTimeout'),
    sweepInterval: ms('sweepInterval'),
    listenUrl: /** @type {string | undefined} */ (listenUrl),
    tls: readTls(WHERE, given.tls),
  }
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
    const handle = native.createPostgresStore(readPostgresOptions(urlOrOptions), (tagged) =>
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
