'use strict'
/**
 * Argument checks: bad input fails at once, before any store is called, with
 * a TypeError or RangeError that names the argument.
 */

const { MAX_MS, DEFAULT_RETRY_DELAY_MS, STORE_METHODS } = require('./protocol.js')

/** @param {unknown} value a short description for an error message */
function describe(value) {
  if (value === null) return 'null'
  if (typeof value === 'string') return `a string (${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)})`
  if (typeof value === 'number') return String(value)
  if (typeof value === 'function') return 'a function'
  if (Array.isArray(value)) return 'an array'
  return typeof value === 'object' ? 'an object' : `${typeof value} ${String(value)}`
}

/**
 * @param {string} where
 * @param {unknown} key
 * @returns {asserts key is string}
 */
function checkKey(where, key, name = 'key') {
  if (typeof key !== 'string') throw new TypeError(`${where}: ${name} must be a string, got ${describe(key)}`)
  if (!key.isWellFormed()) {
    throw new TypeError(`${where}: ${name} must be well-formed Unicode, but it contains a lone surrogate`)
  }
}

/**
 * Milliseconds: a finite number in [0, MAX_MS], above 0 unless `zeroOk`.
 *
 * @param {string} where
 * @param {unknown} value
 * @param {string} name
 * @param {boolean} zeroOk
 * @returns {number}
 */
function checkMs(where, value, name, zeroOk) {
  if (typeof value !== 'number') {
    throw new TypeError(`${where}: ${name} must be a number of milliseconds, got ${describe(value)}`)
  }
  if (!(zeroOk ? value >= 0 : value > 0) || value > MAX_MS) {
    const range = zeroOk ? 'a finite number >= 0' : 'a finite number > 0'
    throw new RangeError(`${where}: ${name} must be ${range} (at most ${MAX_MS}), got ${value}`)
  }
  return value
}

/** @typedef {[timeout: number, retryDelay: number, signal: AbortSignal | undefined]} WaitOptions */

/** @type {WaitOptions} */
const NO_OPTIONS = [0, DEFAULT_RETRY_DELAY_MS, undefined]

const KNOWN_OPTIONS = 'timeout, retryDelay, autoExtend, signal'

/**
 * run()'s and acquire()'s options as [timeout, retryDelay, signal], with
 * autoExtend checked (the caller acts on it). A misspelt option is an error:
 * it must not fall back to a default silently (`timeot` would mean "don't wait").
 *
 * @param {string} where
 * @param {unknown} options
 * @returns {WaitOptions}
 */
function readOptions(where, options) {
  if (options === undefined || options === null) return NO_OPTIONS
  if (typeof options !== 'object') {
    throw new TypeError(
      `${where}: options must be an object like { ${KNOWN_OPTIONS} }, got ${describe(options)}`,
    )
  }
  for (const name in options) {
    if (name !== 'timeout' && name !== 'retryDelay' && name !== 'autoExtend' && name !== 'signal') {
      throw new TypeError(`${where}: unknown option ${JSON.stringify(name)} (known: ${KNOWN_OPTIONS})`)
    }
  }
  const { timeout, retryDelay, autoExtend, signal } = /** @type {import('../../index').AcquireOptions} */ (options)
  if (autoExtend !== undefined && typeof autoExtend !== 'boolean') {
    throw new TypeError(`${where}: options.autoExtend must be true or false, got ${describe(autoExtend)}`)
  }
  if (signal !== undefined && !isAbortSignal(signal)) {
    throw new TypeError(`${where}: options.signal must be an AbortSignal (such as AbortController's signal), got ${describe(signal)}`)
  }
  return [
    timeout === undefined ? 0 : checkMs(where, timeout, 'options.timeout', true),
    retryDelay === undefined ? DEFAULT_RETRY_DELAY_MS : checkMs(where, retryDelay, 'options.retryDelay', true),
    signal,
  ]
}

/**
 * An AbortSignal, also one of another realm (a test framework's `vm`
 * context): what the wait uses of one.
 *
 * @param {unknown} value
 * @returns {value is AbortSignal}
 */
function isAbortSignal(value) {
  if (value instanceof AbortSignal) return true
  const signal = /** @type {Partial<Record<string, unknown>> | null} */ (value)
  return (
    typeof signal === 'object' &&
    signal !== null &&
    typeof signal.aborted === 'boolean' &&
    typeof signal.addEventListener === 'function' &&
    typeof signal.removeEventListener === 'function'
  )
}

/**
 * @param {string} where
 * @param {unknown} store
 */
function checkStore(where, store) {
  if (store === null || (typeof store !== 'object' && typeof store !== 'function')) {
    throw new TypeError(`${where}: store must be an object with ${STORE_METHODS.join(', ')}, got ${describe(store)}`)
  }
  const missing = STORE_METHODS.filter((m) => typeof (/** @type {any} */ (store)[m]) !== 'function')
  if (missing.length > 0) {
    throw new TypeError(
      `${where}: store is missing the LockStore method${missing.length > 1 ? 's' : ''} ${missing.join(', ')}`,
    )
  }
}

/**
 * A store's options object, checked to be one whose fields are all known:
 * a typo must not fall back to a default silently.
 *
 * @param {string} where
 * @param {unknown} options
 * @param {Record<string, unknown>} defaults the known fields
 * @param {string} expected what else the argument may be, for the message
 * @returns {Record<string, unknown>}
 */
function checkOptionsObject(where, options, defaults, expected) {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new TypeError(`${where}: expected ${expected}, got ${describe(options)}`)
  }
  const unknown = Object.keys(options).filter((k) => !Object.hasOwn(defaults, k))
  if (unknown.length > 0) {
    throw new TypeError(
      `${where}: unknown option${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')} (known: ${Object.keys(defaults).join(', ')})`,
    )
  }
  return /** @type {Record<string, unknown>} */ (options)
}

/**
 * A URL that names a store's server given as undefined (most often an
 * environment variable that is not set) is refused, never read as "the
 * default server": a program would otherwise lock on localhost without a
 * word. The default is what a store made with no argument, or with the
 * option left out, uses.
 *
 * @param {string} where
 * @param {unknown} given the constructor's first argument, present
 * @param {string} fallback the default URL
 */
function checkUrlGiven(where, given, fallback) {
  if (given !== undefined) return
  throw new TypeError(
    `${where}: url is undefined (an environment variable that is not set?). ` +
      `Give a URL, or call ${where}() with no argument for the default server, ${fallback}`,
  )
}

/**
 * An option that names the server (`url`, or a list of them) present but undefined.
 *
 * @param {string} where
 * @param {Record<string, unknown>} options
 * @param {string} name
 * @param {string} fallback the default URL
 */
function checkUrlOption(where, options, name, fallback) {
  if (!Object.hasOwn(options, name) || options[name] !== undefined) return
  throw new TypeError(
    `${where}: options.${name} is undefined (an environment variable that is not set?). ` +
      `Give it, or leave ${name} out of the options for the default server, ${fallback}`,
  )
}

/** A server store's largest pool of connections. */
const MAX_POOL_SIZE = 100

/**
 * A server store's `poolSize`: an integer from 1 to MAX_POOL_SIZE.
 *
 * @param {string} where
 * @param {unknown} poolSize
 * @returns {number}
 */
function checkPoolSize(where, poolSize) {
  if (!Number.isSafeInteger(poolSize) || /** @type {number} */ (poolSize) < 1 || /** @type {number} */ (poolSize) > MAX_POOL_SIZE) {
    throw new RangeError(`${where}: options.poolSize must be an integer from 1 to ${MAX_POOL_SIZE}, got ${describe(poolSize)}`)
  }
  return /** @type {number} */ (poolSize)
}

/**
 * A reader of a store's millisecond options (each > 0): `given`'s, or else `defaults`'.
 *
 * @param {string} where
 * @param {Record<string, unknown>} given
 * @param {Readonly<Record<string, unknown>>} defaults
 * @returns {(name: string) => number}
 */
const msOptions = (where, given, defaults) => (name) =>
  given[name] === undefined ? /** @type {number} */ (defaults[name]) : checkMs(where, given[name], `options.${name}`, false)

/**
 * What a native call returned: a value, or a promise of one?
 *
 * @template T
 * @param {T} v
 * @returns {v is Extract<T, PromiseLike<any>>}
 */
const isThenable = (v) =>
  v !== null && typeof v === 'object' && typeof (/** @type {any} */ (v).then) === 'function'

const noop = () => {}

module.exports = { describe, checkKey, checkMs, readOptions, checkStore, checkOptionsObject, checkUrlGiven, checkUrlOption, checkPoolSize, msOptions, isThenable, noop }
