'use strict'
/**
 * EtcdLockStore, and its options read and checked: a URL, a comma-separated
 * list of them, or an options object. An unknown option is an error, so a
 * typo cannot fall back to a default silently. (Each endpoint's URL is read
 * by the addon.)
 */

const native = require('../native.js')
const { describe, checkKey, checkOptionsObject, checkUrlGiven, checkUrlOption, msOptions } = require('../core/check.js')
const { announced } = require('../core/store-events.js')
const { ServerLockStore } = require('./server-store.js')
const { readTls } = require('./tls-options.js')

const ETCD_DEFAULTS = Object.freeze({
  endpoints: 'http://127.0.0.1:2379',
  prefix: 'keel:',
  username: undefined,
  password: undefined,
  connectTimeout: 5_000,
  commandTimeout: 5_000,
  tls: undefined,
})
const WHERE = 'new EtcdLockStore'

/**
 * @param {unknown} endpoints a URL, a comma-separated list of them, or an array of URLs
 * @returns {string[]}
 */
function readEndpoints(endpoints) {
  const list = typeof endpoints === 'string' ? endpoints.split(',').map((url) => url.trim()) : endpoints
  // The messages never show a URL: one may hold a password.
  if (!Array.isArray(list) || list.some((url) => typeof url !== 'string')) {
    const got = Array.isArray(endpoints) ? 'an array holding something other than strings' : describe(endpoints)
    throw new TypeError(`${WHERE}: options.endpoints must be a URL, a comma-separated list of URLs or an array of them, got ${got}`)
  }
  if (list.length === 0 || list.some((url) => url === '')) {
    throw new TypeError(`${WHERE}: options.endpoints must name at least one URL, and no empty one (${list.length} given)`)
  }
  return list
}

/**
 * @param {unknown[]} args the constructor's arguments: none for the default member
 * @returns {import('../native').EtcdConfig}
 */
function readEtcdOptions(args) {
  if (args.length === 0) return readGiven({})
  const [given] = args
  checkUrlGiven(WHERE, given, ETCD_DEFAULTS.endpoints)
  if (typeof given === 'string' || Array.isArray(given)) return readGiven({ endpoints: given })
  return readGiven(given)
}

/**
 * @param {unknown} urlOrOptions
 * @returns {import('../native').EtcdConfig}
 */
function readGiven(urlOrOptions) {
  const given = checkOptionsObject(
    WHERE,
    urlOrOptions,
    ETCD_DEFAULTS,
    'an etcd URL, a comma-separated list of them, or an options object like { endpoints, prefix, username, password, tls }',
  )
  checkUrlOption(WHERE, given, 'endpoints', ETCD_DEFAULTS.endpoints)
  const { endpoints = ETCD_DEFAULTS.endpoints, prefix = ETCD_DEFAULTS.prefix, username, password } = given
  checkKey(WHERE, prefix, 'options.prefix')
  if (username !== undefined && (typeof username !== 'string' || username === '')) {
    throw new TypeError(`${WHERE}: options.username must be a non-empty string, got ${describe(username)}`)
  }
  // The password's value never appears in a message, only its type.
  if (password !== undefined && typeof password !== 'string') {
    throw new TypeError(`${WHERE}: options.password must be a string, got a value of type ${typeof password}`)
  }
  if (password !== undefined && username === undefined) {
    throw new TypeError(`${WHERE}: options.password is given without options.username`)
  }
  const ms = msOptions(WHERE, given, ETCD_DEFAULTS)
  return {
    endpoints: readEndpoints(endpoints),
    prefix: /** @type {string} */ (prefix),
    username: /** @type {string | undefined} */ (username),
    password: /** @type {string | undefined} */ (password),
    connectTimeout: ms('connectTimeout'),
    commandTimeout: ms('commandTimeout'),
    tls: readTls(WHERE, given.tls),
  }
}

/**
 * A store on an etcd cluster, spoken to from Rust over gRPC: each lock a key
 * on a lease the cluster counts, each write committed by the cluster's
 * majority before it answers.
 */
class EtcdLockStore extends ServerLockStore {
  /** @param {unknown[]} urlOrOptions */
  constructor(...urlOrOptions) {
    const handle = native.createEtcdStore(readEtcdOptions(urlOrOptions), (tagged) => announced(handle, tagged))
    super('EtcdLockStore', handle)
  }
}

module.exports = { EtcdLockStore }
