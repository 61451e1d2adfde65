// Locks as OpenTelemetry spans and metrics, from the lock's diagnostics
// channels: a span per acquire, run, release and extension (a waiter's span
// lasts as long as it waited, and says so), the wait and hold times as
// histograms, and a lost lock as a counter and an event on the span of the
// run that held it. Works with any tracer and meter from @opentelemetry/api:
//
//   import { trace, metrics } from '@opentelemetry/api'
//   const stop = traceLocks({ tracer: trace.getTracer('locks'), meter: metrics.getMeter('locks') })
import diagnostics from 'node:diagnostics_channel'
import { AsyncLocalStorage } from 'node:async_hooks'
import { context, trace, SpanStatusCode } from '@opentelemetry/api'
import { channels } from '@shaferllc/keel/core'

const TRACED = ['acquire', 'run', 'release', 'extend']

/** The span attributes of a lock's context (never its owner token: the context has none). */
const attributesOf = (c) => ({
  'keel.lock.key': c.key,
  'keel.lock.kind': c.kind,
  'keel.lock.store': c.store,
  'keel.lock.ttl_ms': c.ttlMs,
  ...(c.limit === null ? {} : { 'keel.lock.limit': c.limit }),
  ...(c.timeoutMs === undefined ? {} : { 'keel.lock.timeout_ms': c.timeoutMs }),
})

/**
 * @param {{ tracer: import('@opentelemetry/api').Tracer, meter: import('@opentelemetry/api').Meter }} otel
 * @returns {() => void} stops it
 */
export function traceLocks({ tracer, meter }) {
  const waitTime = meter.createHistogram('keel.lock.wait_time', { unit: 'ms', description: 'From an acquire to its answer' })
  const holdTime = meter.createHistogram('keel.lock.hold_time', { unit: 'ms', description: 'From an acquisition to its release' })
  const lostLocks = meter.createCounter('keel.lock.lost', { description: 'Holds found lost' })
  // The lock span an operation runs in, so the acquire and release of a run()
  // are its children, and the run is a child of whatever span was active.
  const current = new AsyncLocalStorage()
  /** The span of each key's latest run still going, for its lost-lock event. */
  const runs = new Map()
  const spans = new WeakMap()
  const unsubscribe = []

  for (const name of TRACED) {
    const channel = diagnostics.tracingChannel(channels[name])
    channel.start.bindStore(current, (c) => {
      const parent = current.getStore() ?? context.active()
      const span = tracer.startSpan(`keel.lock.${name}`, { attributes: attributesOf(c) }, parent)
      spans.set(c, span)
      if (name === 'run') runs.set(c.key, span)
      return trace.setSpan(parent, span)
    })
    const handlers = {
      error(c) {
        const span = spans.get(c)
        span?.recordException(c.error)
        span?.setStatus({ code: SpanStatusCode.ERROR, message: String(c.error?.message ?? c.error) })
      },
      // A span ends once, at asyncEnd (which follows error too).
      asyncEnd(c) {
        const span = spans.get(c)
        if (span === undefined) return
        if (name === 'acquire') {
          span.setAttributes({ 'keel.lock.acquired': c.result === true, 'keel.lock.waited_ms': c.waitedMs, 'keel.lock.attempts': c.attempts })
          if (c.fencingToken !== null) span.setAttribute('keel.lock.fencing_token', String(c.fencingToken))
          waitTime.record(c.waitedMs, { 'keel.lock.store': c.store, 'keel.lock.kind': c.kind, 'keel.lock.acquired': c.result === true })
        } else if (name === 'release') {
          span.setAttribute('keel.lock.released', c.result === true)
          if (c.heldMs !== null) holdTime.record(c.heldMs, { 'keel.lock.store': c.store, 'keel.lock.kind': c.kind })
        } else if (name === 'extend') {
          span.setAttribute('keel.lock.extended', c.result === true)
        } else if (runs.get(c.key) === span) {
          runs.delete(c.key)
        }
        span.end()
      },
    }
    channel.subscribe(handlers)
    unsubscribe.push(() => {
      channel.unsubscribe(handlers)
      channel.start.unbindStore(current)
    })
  }

  const onLost = (m) => {
    lostLocks.add(1, { 'keel.lock.store': m.store, 'keel.lock.kind': m.kind, 'keel.lock.reason': m.reason })
    runs.get(m.key)?.addEvent('keel.lock.lost', { 'keel.lock.key': m.key, 'keel.lock.reason': m.reason })
  }
  diagnostics.subscribe(channels.lost, onLost)
  unsubscribe.push(() => diagnostics.unsubscribe(channels.lost, onLost))

  return () => {
    for (const stop of unsubscribe) stop()
  }
}
