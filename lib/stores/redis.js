'use strict'
/**
 * RedisLockStore, and its options read and checked: a URL, a list of Redis Cluster
 * node URLs, or an options object. An unknown option is an error, so a typo
 * cannot fall back to a default silently. (The URL itself is checked by the
 * addon, which knows what the redis crate would ignore.)
 */

const native = require('../native.js')
const { describe, checkKey, checkMs, checkOptionsObject, checkUrlGiven, checkUrlOption } = require('../core/check.js')
const { announced } = require('../core/store-events.js')
const { ServerLockStore } = require('./server-store.js')
const { readTls } = require('./tls-options.js')

const REDIS_DEFAULTS = Object.freeze({
  url: 'redis://127.0.0.1:6379',
  prefix: '',
  connectTimeout: 5_000,
  commandTimeout: 5_000,
  tls: undefined,
  cluster: undefined,
})
const WHERE = 'new RedisLockStore'

/**
 * @param {unknown[]} args the constructor's arguments: none for the default server
 * @returns {import('../native').RedisConfig}
 */
function readRedisOptions(args) {
  if (args.length === 0) return { ...REDIS_DEFAULTS, tls: undefined, cluster: [] }
  return readGiven(args[0])
}

/**
 * @param {unknown} urlOrOptions
 * @returns {import('../native').RedisConfig}
 */
function readGiven(urlOrOptions) {
  checkUrlGiven(WHERE, urlOrOptions, REDIS_DEFAULTS.url)
  if (typeof urlOrOptions === 'string') return { ...REDIS_DEFAULTS, url: urlOrOptions, tls: undefined, cluster: [] }
  if (Array.isArray(urlOrOptions)) return readGiven({ cluster: urlOrOptions })
  const given = checkOptionsObject(
    WHERE,
    urlOrOptions,
    REDIS_DEFAULTS,
    'a redis:// URL, a list of Redis Cluster node URLs, or an options object like { url, prefix, connectTimeout, commandTimeout }',
  )
  // Refused only when no server is given at all: with one of the two given,
  // the other left undefined is the usual way to pick between them.
  const named = /** @type {const} */ (['url', 'cluster']).filter((name) => Object.hasOwn(given, name))
  if (named.every((name) => given[name] === undefined)) {
    for (const name of named) checkUrlOption(WHERE, given, name, REDIS_DEFAULTS.url)
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
    tls: readTls(WHERE, given.tls),
  }
}

/**
 * A store on a Redis server, spoken to from Rust over one multiplexed
 * connection. Wire-compatible with the docs' ioredis store: the key (after
 * `prefix`) holds the owner token, with the lock's TTL as its Redis expiry.
 */
class RedisLockStore extends ServerLockStore {
  /** @param {unknown[]} urlOrOptions */
  constructor(...urlOrOptions) {
    const handle = native.createRedisStore(readRedisOptions(urlOrOptions), (tagged) => announced(handle, tagged))
    super('RedisLockStore', handle)
  }
}

module.exports = { RedisLockStore }
