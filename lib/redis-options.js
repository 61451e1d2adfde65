'use strict'
/**
 * RedisLockStore's options, read and checked: a URL, a list of Redis Cluster
 * node URLs, or an options object. An unknown option is an error, so a typo
 * cannot fall back to a default silently. (The URL itself is checked by the
 * addon, which knows what the redis crate would ignore.)
 */

const { describe, checkKey, checkMs } = require('./check.js')

const REDIS_DEFAULTS = Object.freeze({
  url: 'redis://127.0.0.1:6379',
  prefix: '',
  connectTimeout: 5_000,
  commandTimeout: 5_000,
  tls: undefined,
  cluster: undefined,
})
const TLS_PARTS = ['ca', 'cert', 'key']
const WHERE = 'new RedisLockStore'

/**
 * @param {unknown} urlOrOptions
 * @returns {import('./native').RedisConfig}
 */
function readRedisOptions(urlOrOptions) {
  if (urlOrOptions === undefined) return { ...REDIS_DEFAULTS, tls: undefined, cluster: [] }
  if (typeof urlOrOptions === 'string') return { ...REDIS_DEFAULTS, url: urlOrOptions, tls: undefined, cluster: [] }
  if (Array.isArray(urlOrOptions)) return readRedisOptions({ cluster: urlOrOptions })
  if (urlOrOptions === null || typeof urlOrOptions !== 'object') {
    throw new TypeError(
      `${WHERE}: expected a redis:// URL, a list of Redis Cluster node URLs, or an options object like { url, prefix, connectTimeout, commandTimeout }, got ${describe(urlOrOptions)}`,
    )
  }
  const given = /** @type {Record<string, unknown>} */ (urlOrOptions)
  const unknown = Object.keys(given).filter((k) => !Object.hasOwn(REDIS_DEFAULTS, k))
  if (unknown.length > 0) {
    throw new TypeError(
      `${WHERE}: unknown option${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')} (known: ${Object.keys(REDIS_DEFAULTS).join(', ')})`,
    )
  }
  const { url = REDIS_DEFAULTS.url, prefix = REDIS_DEFAULTS.prefix, cluster = [] } = given
  if (typeof url !== 'string') throw new TypeError(`${WHERE}: options.url must be a string, got ${describe(url)}`)
  if (!Array.isArray(cluster) || cluster.some((node) => typeof node !== 'string')) {
    throw new TypeError(`${WHERE}: options.cluster must be an array of node URLs (strings), got ${describe(cluster)}`)
  }
  if (given.cluster !== undefined && cluster.length === 0) {
    throw new TypeError(`${WHERE}: options.cluster must list at least one node URL`)
  }
  if (cluster.length > 0 && given.url !== undefined) {
    throw new TypeError(`${WHERE}: give options.url (one server) or options.cluster (a Redis Cluster), not both`)
  }
  checkKey(WHERE, prefix, 'options.prefix')
  /** @param {'connectTimeout' | 'commandTimeout'} name */
  const ms = (name) =>
    given[name] === undefined ? REDIS_DEFAULTS[name] : checkMs(WHERE, given[name], `options.${name}`, false)
  return {
    url: cluster[0] ?? url,
    cluster,
    prefix,
    connectTimeout: ms('connectTimeout'),
    commandTimeout: ms('commandTimeout'),
    tls: readTls(given.tls),
  }
}

/**
 * `tls: { ca, cert, key }` as PEM strings or bytes, turned into Buffers for the addon.
 *
 * @param {unknown} tls
 * @returns {import('./native').RedisTls | undefined}
 */
function readTls(tls) {
  if (tls === undefined) return undefined
  if (tls === null || typeof tls !== 'object' || Array.isArray(tls)) {
    throw new TypeError(`${WHERE}: options.tls must be an object like { ca, cert, key }, got ${describe(tls)}`)
  }
  const given = /** @type {Record<string, unknown>} */ (tls)
  const unknown = Object.keys(given).filter((k) => !TLS_PARTS.includes(k))
  if (unknown.length > 0) {
    throw new TypeError(`${WHERE}: unknown options.tls field ${unknown.join(', ')} (known: ${TLS_PARTS.join(', ')})`)
  }
  /** @param {string} name */
  const pem = (name) => {
    const value = given[name]
    if (value === undefined) return undefined
    if (typeof value === 'string') return Buffer.from(value)
    if (value instanceof Uint8Array) return Buffer.from(value)
    throw new TypeError(`${WHERE}: options.tls.${name} must be PEM text (a string or Buffer), got ${describe(value)}`)
  }
  const parts = { ca: pem('ca'), cert: pem('cert'), key: pem('key') }
  if ((parts.cert === undefined) !== (parts.key === undefined)) {
    throw new TypeError(`${WHERE}: options.tls.cert and options.tls.key go together (a client certificate and its key)`)
  }
  return parts
}

module.exports = { readRedisOptions }
