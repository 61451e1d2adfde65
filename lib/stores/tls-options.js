'use strict'
/**
 * `tls: { ca, cert, key }` for the stores that speak TLS themselves, read
 * and checked the same way.
 */

const { describe } = require('../core/check.js')

const TLS_PARTS = ['ca', 'cert', 'key']

/**
 * `tls: { ca, cert, key }` as PEM strings or bytes, turned into Buffers for the addon.
 *
 * @param {string} where the constructor, for messages
 * @param {unknown} tls
 * @returns {import('../native').TlsPem | undefined}
 */
function readTls(where, tls) {
  if (tls === undefined) return undefined
  if (tls === null || typeof tls !== 'object' || Array.isArray(tls)) {
    throw new TypeError(`${where}: options.tls must be an object like { ca, cert, key }, got ${describe(tls)}`)
  }
  const given = /** @type {Record<string, unknown>} */ (tls)
  const unknown = Object.keys(given).filter((k) => !TLS_PARTS.includes(k))
  if (unknown.length > 0) {
    throw new TypeError(`${where}: unknown options.tls field ${unknown.join(', ')} (known: ${TLS_PARTS.join(', ')})`)
  }
  /** @param {string} name */
  const pem = (name) => {
    const value = given[name]
    if (value === undefined) return undefined
    if (typeof value === 'string') return Buffer.from(value)
    if (value instanceof Uint8Array) return Buffer.from(value)
    throw new TypeError(`${where}: options.tls.${name} must be PEM text (a string or Buffer), got ${describe(value)}`)
  }
  const parts = { ca: pem('ca'), cert: pem('cert'), key: pem('key') }
  if ((parts.cert === undefined) !== (parts.key === undefined)) {
    throw new TypeError(`${where}: options.tls.cert and options.tls.key go together (a client certificate and its key)`)
  }
  return parts
}

module.exports = { readTls }
