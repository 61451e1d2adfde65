'use strict'
/**
 * verifyLockStore: checks a LockStore against the two promises every store
 * must keep, by calling its methods the way the lock does: an atomic
 * set-if-absent acquire (racing callers, several rounds), and a release and an
 * extend that act only for the owner (the docs' A/B scenario); plus the TTL,
 * `remainingTime` and `isLocked` after expiry. It reports; it never throws
 * for a failing store (a method that throws, rejects, answers the wrong type
 * or never answers is a failed check that says so).
 */

const { randomUUID } = require('node:crypto')
const { setTimeout: sleep } = require('node:timers/promises')

const { STORE_METHODS: METHODS, READ_WRITE_METHODS } = require('../core/protocol.js')
const { readWriteChecks } = require('./verify-read-write.js')
const DEFAULTS = Object.freeze({ prefix: undefined, ttlMs: 300, racers: 20, rounds: 5, callTimeout: 5_000 })

class CheckFailed extends Error {}

/** The answers a store's methods give, by what each must be. */
const ANSWERS = {
  boolean: { fits: (/** @type {unknown} */ v) => typeof v === 'boolean', shown: 'a boolean' },
  number: { fits: (/** @type {unknown} */ v) => v === null || (typeof v === 'number' && Number.isFinite(v)), shown: 'a number or null' },
  count: { fits: (/** @type {unknown} */ v) => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0, shown: 'a non-negative integer' },
  any: { fits: () => true, shown: 'anything' },
}
/** @typedef {keyof typeof ANSWERS} Answer */

/** What gives back what each acquire method took. */
const RELEASED_BY = /** @type {Record<string, string | undefined>} */ ({ acquire: 'release', acquireRead: 'releaseHold', acquireWrite: 'releaseHold' })

/**
 * @typedef {{ prefix: string | undefined, ttlMs: number, racers: number, rounds: number, callTimeout: number }} Settings
 */

/**
 * @param {unknown} options
 * @returns {Settings}
 */
function readOptions(options) {
  if (options === undefined) return { ...DEFAULTS }
  if (options === null || typeof options !== 'object') {
    throw new TypeError(`verifyLockStore: options must be an object like { prefix, ttlMs, racers }, got ${typeof options}`)
  }
  const unknown = Object.keys(options).filter((k) => !Object.hasOwn(DEFAULTS, k))
  if (unknown.length > 0) {
    throw new TypeError(`verifyLockStore: unknown option ${unknown.join(', ')} (known: ${Object.keys(DEFAULTS).join(', ')})`)
  }
  /** @type {Record<string, unknown>} */
  const read = { ...DEFAULTS, ...Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) }
  if (read.prefix !== undefined && typeof read.prefix !== 'string') {
    throw new TypeError('verifyLockStore: options.prefix must be a string')
  }
  /** @type {[string, number][]} */
  const minimums = [['ttlMs', 50], ['racers', 2], ['rounds', 1], ['callTimeout', 1]]
  for (const [name, min] of minimums) {
    const value = read[name]
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min) {
      throw new RangeError(`verifyLockStore: options.${name} must be an integer >= ${min}, got ${String(value)}`)
    }
  }
  return /** @type {Settings} */ (read)
}

/**
 * @param {import('../../index').LockStore} store
 * @param {import('../../index').VerifyLockStoreOptions} [options]
 * @returns {Promise<import('../../index').LockStoreReport>}
 */
async function verifyLockStore(store, options) {
  const settings = readOptions(options)
  if (store === null || (typeof store !== 'object' && typeof store !== 'function')) {
    throw new TypeError(`verifyLockStore: store must be an object with ${METHODS.join(', ')}`)
  }
  const prefix = settings.prefix ?? `keel-verify:${randomUUID().slice(0, 8)}:`
  const { ttlMs, racers, rounds, callTimeout } = settings
  /** @type {[release: string, key: string, owner: string][]} what was taken, to give back at the end */
  const used = []
  const key = (/** @type {string} */ name) => `${prefix}${name}`
  const methods = /** @type {Record<string, (...args: unknown[]) => unknown>} */ (/** @type {unknown} */ (store))

  /**
   * One store call, bounded in time, its answer checked against `kind`.
   *
   * @param {string} method
   * @param {Answer} kind
   * @param {...unknown} args
   * @returns {Promise<any>}
   */
  async function call(method, kind, ...args) {
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    let timer
    /** @type {{ value?: unknown, error?: any, late?: boolean }} */
    const answer = await Promise.race([
      Promise.resolve()
        .then(() => methods[method](...args))
        .then(
          (value) => ({ value }),
          (error) => ({ error }),
        ),
      new Promise((resolve) => {
        timer = setTimeout(resolve, callTimeout, { late: true })
      }),
    ])
    clearTimeout(timer)
    const shown = `${method}(${args.map((a) => JSON.stringify(a)).join(', ')})`
    if (answer.late) throw new CheckFailed(`${shown} did not answer within ${callTimeout} ms`)
    if ('error' in answer) throw new CheckFailed(`${shown} failed: ${answer.error?.message ?? String(answer.error)}`)
    const { value } = answer
    if (!ANSWERS[kind].fits(value)) throw new CheckFailed(`${shown} answered ${JSON.stringify(value) ?? String(value)}, not ${ANSWERS[kind].shown}`)
    if (value === true && RELEASED_BY[method] !== undefined) used.push([RELEASED_BY[method], /** @type {string} */ (args[0]), /** @type {string} */ (args[1])])
    return value
  }
  const expect = (/** @type {unknown} */ condition, /** @type {string} */ detail) => {
    if (!condition) throw new CheckFailed(detail)
  }

  /** @type {[string, () => Promise<string>][]} */
  const checks = [
    [
      'has the five LockStore methods',
      async () => {
        const missing = METHODS.filter((m) => typeof methods[m] !== 'function')
        expect(missing.length === 0, `missing ${missing.join(', ')}`)
        return 'acquire, release, extend, isLocked, remainingTime'
      },
    ],
    [
      'remainingTime is null and isLocked false for a key nobody holds',
      async () => {
        const k = key('free')
        expect((await call('isLocked', 'boolean', k)) === false, `isLocked(${JSON.stringify(k)}) is true for a key never used`)
        const left = await call('remainingTime', 'number', k)
        expect(left === null, `remainingTime of a free key is ${left}, not null`)
        return 'null and false'
      },
    ],
    [
      'acquire is atomic: of racing owners exactly one wins',
      async () => {
        const winners = []
        for (let round = 0; round < rounds; round++) {
          const k = key(`race-${round}`)
          const answers = await Promise.all(
            Array.from({ length: racers }, (_, i) => call('acquire', 'boolean', k, `racer-${round}-${i}`, 10_000)),
          )
          const won = answers.filter(Boolean).length
          winners.push(won)
          expect(won === 1, `round ${round + 1}: ${won} of ${racers} racing acquires of one key answered true`)
          const owner = `racer-${round}-${answers.indexOf(true)}`
          expect(await call('release', 'boolean', k, owner), `the winner ${owner} could not release`)
        }
        return `${rounds} rounds of ${racers} racing owners: one winner each`
      },
    ],
    [
      'acquire refuses a key someone holds',
      async () => {
        const k = key('held')
        expect(await call('acquire', 'boolean', k, 'A', 10_000), 'A could not acquire a free key')
        expect((await call('acquire', 'boolean', k, 'B', 10_000)) === false, 'B acquired a key A holds')
        expect(await call('isLocked', 'boolean', k), 'isLocked is false while A holds the key')
        expect(await call('release', 'boolean', k, 'A'), 'A could not release')
        return 'B refused while A held it'
      },
    ],
    [
      "release acts only for the owner: another owner's release frees nothing",
      async () => {
        const k = key('release')
        expect(await call('acquire', 'boolean', k, 'A', 10_000), 'A could not acquire a free key')
        expect((await call('release', 'boolean', k, 'B')) === false, "B's release of A's lock answered true")
        expect(await call('isLocked', 'boolean', k), "B's release freed A's lock: release must compare the owner")
        expect(await call('release', 'boolean', k, 'A'), "A's own release answered false")
        expect((await call('isLocked', 'boolean', k)) === false, "the key is still locked after A's release")
        expect((await call('release', 'boolean', k, 'A')) === false, 'a second release answered true')
        return "B's release refused and harmless; A's released"
      },
    ],
    [
      'extend acts only for the owner',
      async () => {
        const k = key('extend')
        expect(await call('acquire', 'boolean', k, 'A', ttlMs), 'A could not acquire a free key')
        expect((await call('extend', 'boolean', k, 'B', 60_000)) === false, "B's extend of A's lock answered true")
        const before = await call('remainingTime', 'number', k)
        expect(before !== null && before <= ttlMs, `remainingTime after B's extend is ${before} (TTL ${ttlMs})`)
        expect(await call('extend', 'boolean', k, 'A', 60_000), "A's extend of its own lock answered false")
        const after = await call('remainingTime', 'number', k)
        expect(after !== null && after > ttlMs && after <= 60_000, `remainingTime after A's extend to 60000 is ${after}`)
        expect(await call('release', 'boolean', k, 'A'), 'A could not release')
        return `B's extend refused; A's pushed ${before} ms to ${after} ms`
      },
    ],
    [
      'the TTL is honoured, and isLocked is false once it passed',
      async () => {
        const k = key('ttl')
        expect(await call('acquire', 'boolean', k, 'A', ttlMs), 'A could not acquire a free key')
        const left = await call('remainingTime', 'number', k)
        expect(left !== null && left > 0 && left <= ttlMs, `remainingTime right after acquire(ttl ${ttlMs}) is ${left}`)
        await sleep(Math.floor(ttlMs / 3))
        expect(await call('isLocked', 'boolean', k), `the lock was gone a third of its TTL in`)
        await sleep(ttlMs + 100)
        expect((await call('isLocked', 'boolean', k)) === false, `isLocked is still true ${ttlMs + 100} ms after the TTL`)
        const gone = await call('remainingTime', 'number', k)
        expect(gone === null, `remainingTime after the TTL is ${gone}, not null`)
        expect(await call('acquire', 'boolean', k, 'B', 10_000), 'B could not acquire the key after its TTL passed')
        expect((await call('extend', 'boolean', k, 'A', 10_000)) === false, "A extended a lock that expired and is B's")
        expect((await call('release', 'boolean', k, 'A')) === false, "A's late release answered true")
        expect(await call('isLocked', 'boolean', k), "A's late release freed B's lock")
        expect(await call('release', 'boolean', k, 'B'), 'B could not release')
        return `held within ${ttlMs} ms, free after; A's late extend and release refused`
      },
    ],
  ]

  // A store that has any read-write method is checked as one that keeps read-write locks.
  const readWrite = READ_WRITE_METHODS.some((m) => typeof methods[m] === 'function')
  if (readWrite) checks.push(...readWriteChecks({ call, expect, key, methods, ttlMs, racers, rounds }))

  /** @type {import('../../index').LockStoreReport} */
  const report = { ok: true, checks: [] }
  /** The checks the ones after them need (the read-write ones come last). */
  const needed = new Set(['has the five LockStore methods', 'read-write: has all eight read-write methods'])
  for (const [name, run] of checks) {
    try {
      report.checks.push({ name, ok: true, detail: await run() })
    } catch (error) {
      report.ok = false
      const detail =
        error instanceof CheckFailed ? error.message : `unexpected: ${/** @type {any} */ (error)?.stack ?? String(error)}`
      report.checks.push({ name, ok: false, detail })
      if (needed.has(name)) break
    }
  }
  // Leave nothing behind (each release deletes only its own token).
  await Promise.allSettled(
    used.map(([release, k, owner]) => Promise.race([Promise.resolve().then(() => methods[release](k, owner)), sleep(callTimeout)])),
  )
  return report
}

module.exports = { verifyLockStore }
