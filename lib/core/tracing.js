'use strict'
/**
 * What a lock does, told on node:diagnostics_channel, where tracers
 * (OpenTelemetry, Sentry, Datadog) and an app's own code listen: an addon
 * cannot be patched by an instrumentation, so the lock publishes itself.
 * Acquire, run, release and extend are traced operations, each with one
 * context object through the tracing channel's start, end, asyncStart,
 * asyncEnd (and error) events, as Node's `tracePromise` publishes them; a
 * hold known to be lost is one message on `keel:lock:lost`.
 *
 * With nobody subscribed nothing is built: every call site asks
 * `hasSubscribers` first (a field read) and takes its untraced path. A
 * context never holds the owner token, nor anything that carries it: a
 * serialized lock is a capability, and traces are read by many.
 */

const diagnostics = require('node:diagnostics_channel')
const { realNow } = require('./timers.js')

/** The channels' names, as exported (`channels`). */
const CHANNELS = Object.freeze({
  acquire: 'keel:lock:acquire',
  run: 'keel:lock:run',
  release: 'keel:lock:release',
  extend: 'keel:lock:extend',
  lost: 'keel:lock:lost',
})

/**
 * A tracing channel with `hasSubscribers`, which Node has from 20.13 on:
 * before, it is asked of its five channels.
 *
 * @param {string} name
 */
function tracingChannel(name) {
  const channel = diagnostics.tracingChannel(name)
  if ('hasSubscribers' in channel) return channel
  const { start, end, asyncStart, asyncEnd, error } = /** @type {import('node:diagnostics_channel').TracingChannel} */ (channel)
  const hasSubscribers = () => start.hasSubscribers || end.hasSubscribers || asyncStart.hasSubscribers || asyncEnd.hasSubscribers || error.hasSubscribers
  return Object.defineProperty(channel, 'hasSubscribers', { get: hasSubscribers })
}

const acquireChannel = tracingChannel(CHANNELS.acquire)
const runChannel = tracingChannel(CHANNELS.run)
const releaseChannel = tracingChannel(CHANNELS.release)
const extendChannel = tracingChannel(CHANNELS.extend)
const lostChannel = diagnostics.channel(CHANNELS.lost)

/**
 * What every context and lost message says of the lock it is about.
 *
 * @typedef {object} About
 * @property {string} key
 * @property {'lock' | 'semaphore' | 'read' | 'write'} kind
 * @property {number | null} limit a semaphore's permits; null for the other kinds
 * @property {string} store the store's constructor name
 * @property {number} ttlMs
 */

/**
 * @param {import('../lock/acquisition.js').Target} target
 * @returns {About}
 */
function about({ key, holdKind, store, ttlMs }) {
  return {
    key,
    kind: holdKind === undefined ? 'lock' : holdKind.name,
    limit: holdKind?.name === 'semaphore' ? holdKind.limit : null,
    store: storeName(store),
    ttlMs,
  }
}

/** @param {object} store */
const storeName = (store) => {
  const made = /** @type {{ constructor?: { name?: unknown } }} */ (store).constructor
  return typeof made?.name === 'string' && made.name !== '' ? made.name : 'Object'
}

/**
 * Publish `operation` on `channel` with `context`, as `tracePromise` does,
 * but always ending with asyncEnd (a synchronous throw is a rejection here,
 * as it is for the async method traced), and with `finish` setting what the
 * answer tells before asyncStart. Resolves (or rejects) as `operation` does.
 *
 * @template T
 * @param {import('node:diagnostics_channel').TracingChannel<object, object>} channel
 * @param {Record<string, unknown>} context
 * @param {() => T | Promise<T>} operation
 * @param {(value: T | undefined, failed: boolean) => unknown} finish sets the context's fields
 *   known at the answer; returns its `result`
 * @returns {Promise<Awaited<T>>}
 */
function traced(channel, context, operation, finish) {
  return channel.start.runStores(context, () => {
    /** @type {T | Promise<T>} */
    let answer
    try {
      answer = operation()
    } catch (error) {
      answer = Promise.reject(error)
    } finally {
      channel.end.publish(context)
    }
    return Promise.resolve(answer).then(
      (value) => {
        context.result = finish(value, false)
        channel.asyncStart.publish(context)
        channel.asyncEnd.publish(context)
        return value
      },
      (error) => {
        finish(undefined, true)
        context.error = error
        channel.error.publish(context)
        channel.asyncStart.publish(context)
        channel.asyncEnd.publish(context)
        throw error
      },
    )
  })
}

/**
 * One acquisition attempt of a handle, traced; `take(context)` makes it,
 * counting its store round trips in `context.attempts`.
 *
 * @param {import('../lock/acquisition.js').Target} target
 * @param {number} timeoutMs
 * @param {(context: { attempts: number }) => import('../lock/acquisition.js').Acquisition | null | Promise<import('../lock/acquisition.js').Acquisition | null>} take
 */
function traceAcquire(target, timeoutMs, take) {
  const context = { ...about(target), timeoutMs, waitedMs: 0, attempts: 0, fencingToken: /** @type {number | bigint | null} */ (null) }
  const called = realNow()
  return traced(acquireChannel, context, () => take(context), (hold) => {
    context.waitedMs = realNow() - called
    if (hold == null) return false
    try {
      context.fencingToken = hold.fencingToken() ?? null
    } catch {}
    return true
  })
}

/**
 * A whole run(), its callback included.
 *
 * @template T
 * @param {import('../lock/acquisition.js').Target} target
 * @param {unknown} options run()'s options, as given (checked by the run)
 * @param {() => Promise<T>} run
 */
function traceRun(target, options, run) {
  const timeout = /** @type {{ timeout?: unknown } | undefined} */ (options)?.timeout
  const context = { ...about(target), timeoutMs: typeof timeout === 'number' ? timeout : 0 }
  return traced(runChannel, context, run, (result) => result)
}

/**
 * A release, with how long the hold was held (null when that is unknown
 * here: restored, or taken while nobody listened).
 *
 * @param {import('../lock/acquisition.js').Acquisition} hold
 * @param {() => boolean | Promise<boolean>} release
 */
function traceRelease(hold, release) {
  const context = { ...about(hold.target), heldMs: hold.takenAt === 0 ? null : realNow() - hold.takenAt }
  return traced(releaseChannel, context, release, (released) => released)
}

/**
 * A Lock.extend() call, by `ttlMs`, from its checked argument to its
 * answer: it resolves once the store extended the hold (`result` true), and
 * every other outcome (a hold not held, or known lost, a store that says
 * it is gone, a store that failed) is a rejection, so an `error` event.
 *
 * @param {import('../lock/acquisition.js').Target} target
 * @param {number} ttlMs
 * @param {() => Promise<void>} extend
 */
function traceExtend(target, ttlMs, extend) {
  const context = { ...about(target), ttlMs }
  return traced(extendChannel, context, extend, () => true)
}

/**
 * One of autoExtend's extensions, by `ttlMs`: its `result` is the store's
 * answer, as nobody awaits it: a refusal there is a lost hold (told on
 * `keel:lock:lost`), not a rejection; a store that failed is one.
 *
 * @param {import('../lock/acquisition.js').Target} target
 * @param {number} ttlMs
 * @param {() => boolean | Promise<boolean>} extend
 */
function traceRenewal(target, ttlMs, extend) {
  const context = { ...about(target), ttlMs }
  return traced(extendChannel, context, extend, (extended) => extended)
}

/**
 * A hold known to be lost, told once.
 *
 * @param {import('../lock/acquisition.js').Target} target
 * @param {LostReason} reason
 */
function publishLost(target, reason) {
  lostChannel.publish({ ...about(target), reason })
}

/**
 * How a hold was found lost: an extension refused (`extend`, `autoExtend`),
 * its time up by this process's clock (`expired`: its TTL passed without an
 * extension, or a hand-over's claim window without the claim), `isExpired()`
 * finding it gone, or a release finding it gone (`release`).
 *
 * @typedef {'extend' | 'autoExtend' | 'expired' | 'isExpired' | 'release'} LostReason
 */

module.exports = {
  CHANNELS,
  acquireChannel,
  runChannel,
  releaseChannel,
  extendChannel,
  lostChannel,
  traceAcquire,
  traceRun,
  traceRelease,
  traceExtend,
  traceRenewal,
  publishLost,
}
