'use strict'
/**
 * What the stores on a database table read alike: a URL, or an options object
 * { url, table, poolSize, connectTimeout, commandTimeout, sweepInterval, tls }
 * (and whatever else a store knows, left in `given` for it to read). An
 * unknown option is an error; the URL itself is read by the addon.
 */

const { describe, checkOptionsObject, checkUrlGiven, checkUrlOption, checkPoolSize, msOptions } = require('../core/check.js')
const { readTls } = require('./tls-options.js')

/**
 * @typedef {object} TableDefaults
 * @property {string} url
 * @property {string} table
 * @property {number} poolSize
 * @property {number} connectTimeout
 * @property {number} commandTimeout
 * @property {number} sweepInterval
 */

/**
 * @param {string} where the constructor, as messages name it
 * @param {unknown[]} args the constructor's arguments: none for the default server
 * @param {Readonly<TableDefaults & Record<string, unknown>>} defaults every option the store knows
 * @param {(where: string, table: unknown, name: string) => void} checkTable the server's rule for names
 * @returns {{ config: import('../native').TableConfig, given: Record<string, unknown> }}
 */
function readTableOptions(where, args, defaults, checkTable) {
  const { url: defaultUrl, table: defaultTable, poolSize: defaultPool, connectTimeout, commandTimeout, sweepInterval } = defaults
  const fallback = { url: defaultUrl, table: defaultTable, poolSize: defaultPool, connectTimeout, commandTimeout, sweepInterval, tls: undefined }
  if (args.length === 0) return { config: fallback, given: {} }
  const [urlOrOptions] = args
  checkUrlGiven(where, urlOrOptions, defaultUrl)
  if (typeof urlOrOptions === 'string') return { config: { ...fallback, url: urlOrOptions }, given: {} }
  const scheme = defaultUrl.slice(0, defaultUrl.indexOf('//') + 2)
  const given = checkOptionsObject(
    where,
    urlOrOptions,
    defaults,
    `a ${scheme} URL or an options object like { url, table, poolSize, connectTimeout, commandTimeout }`,
  )
  checkUrlOption(where, given, 'url', defaultUrl)
  const { url = defaultUrl, table = defaultTable, poolSize = defaultPool } = given
  if (typeof url !== 'string') throw new TypeError(`${where}: options.url must be a string, got ${describe(url)}`)
  checkTable(where, table, 'options.table')
  const ms = msOptions(where, given, defaults)
  const config = {
    url,
    table: /** @type {string} */ (table),
    poolSize: checkPoolSize(where, poolSize),
    connectTimeout: ms('connectTimeout'),
    commandTimeout: ms('commandTimeout'),
    sweepInterval: ms('sweepInterval'),
    tls: readTls(where, given.tls),
  }
  return { config, given }
}

module.exports = { readTableOptions }
