// The lock's diagnostics channels read by real consumers: the OpenTelemetry
// SDK (examples/opentelemetry.mjs: spans in an in-memory exporter, metrics
// through a reader), and a hot-keys report (examples/hot-keys.mjs), on
// MemoryLockStore and on a Redis server of this file's own.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { context } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base'
import { MeterProvider, InMemoryMetricExporter, PeriodicExportingMetricReader, AggregationTemporality } from '@opentelemetry/sdk-metrics'
import { lock, setLockStore, MemoryLockStore, RedisLockStore } from '@shaferllc/keel/core'
import { traceLocks } from '../../examples/opentelemetry.mjs'
import { watchHotKeys } from '../../examples/hot-keys.mjs'
import { startRedis } from '../../support/servers.mjs'

let redis
before(async () => {
  // As an app's OpenTelemetry setup does: the active span follows async calls.
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
  redis = await startRedis()
})
after(async () => {
  context.disable()
  await redis?.close()
})

function openTelemetry() {
  const spans = new InMemorySpanExporter()
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] })
  const metrics = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE)
  const reader = new PeriodicExportingMetricReader({ exporter: metrics, exportIntervalMillis: 3_600_000 })
  const meterProvider = new MeterProvider({ readers: [reader] })
  const stop = traceLocks({ tracer: tracerProvider.getTracer('locks'), meter: meterProvider.getMeter('locks') })
  return {
    tracer: tracerProvider.getTracer('app'),
    finished: () => spans.getFinishedSpans(),
    /** The data points of each metric, by name. */
    async points() {
      await reader.forceFlush()
      const found = {}
      for (const { scopeMetrics } of metrics.getMetrics()) {
        for (const { metrics: all } of scopeMetrics) for (const m of all) found[m.descriptor.name] = m.dataPoints
      }
      return found
    },
    async close() {
      stop()
      await tracerProvider.shutdown()
      await meterProvider.shutdown()
    },
  }
}

for (const [name, makeStore] of [
  ['MemoryLockStore', () => new MemoryLockStore()],
  ['RedisLockStore', () => new RedisLockStore(redis.url)],
]) {
  test(`OpenTelemetry on ${name}: a waiter's span with its wait, runs as parents, and a lost lock as an event`, async () => {
    const store = setLockStore(makeStore())
    const otel = openTelemetry()
    try {
      const holder = lock('invoice:42', 10_000)
      // The app's own span: the lock's spans are its children.
      await otel.tracer.startActiveSpan('POST /invoices/42', async (request) => {
        assert.equal(await holder.acquire(), true)
        const waiting = lock('invoice:42').run(() => 'sent', { timeout: 5_000 })
        await sleep(100)
        await holder.release()
        assert.deepEqual(await waiting, [true, 'sent'])
        request.end()
      })
      // A run whose hold lapses in its callback.
      await lock('report', 100).run(() => sleep(250))
      await sleep(50)
      const spans = otel.finished()
      const byName = (n) => spans.filter((s) => s.name === n)
      const request = byName('POST /invoices/42')[0]
      const [run, lapsed] = byName('keel.lock.run')
      const acquires = byName('keel.lock.acquire').filter((s) => s.attributes['keel.lock.key'] === 'invoice:42')
      assert.equal(acquires.length, 2)
      const waiter = acquires[1]
      assert.equal(waiter.attributes['keel.lock.acquired'], true)
      assert.ok(waiter.attributes['keel.lock.waited_ms'] >= 90, `waited ${waiter.attributes['keel.lock.waited_ms']} ms`)
      const spanMs = waiter.duration[0] * 1e3 + waiter.duration[1] / 1e6
      assert.ok(spanMs >= 90, `the waiter's span lasts its wait: ${spanMs} ms`)
      assert.equal(waiter.parentSpanContext?.spanId, run.spanContext().spanId, "the run's acquire is its child")
      assert.equal(run.parentSpanContext?.spanId, request.spanContext().spanId, "the run is the request's child")
      assert.equal(acquires[0].parentSpanContext?.spanId, request.spanContext().spanId)
      assert.equal(run.attributes['keel.lock.store'], name)
      const runRelease = byName('keel.lock.release').find((s) => s.parentSpanContext?.spanId === run.spanContext().spanId)
      assert.equal(runRelease.attributes['keel.lock.released'], true)

      assert.equal(lapsed.attributes['keel.lock.key'], 'report')
      assert.deepEqual(
        lapsed.events.map((e) => [e.name, e.attributes['keel.lock.reason']]),
        [['keel.lock.lost', 'expired']],
      )

      const points = await otel.points()
      const waits = points['keel.lock.wait_time']
      assert.equal(waits.reduce((n, p) => n + p.value.count, 0), 3)
      assert.ok(waits.some((p) => p.value.max >= 90))
      assert.equal(points['keel.lock.hold_time'].reduce((n, p) => n + p.value.count, 0), 3)
      assert.deepEqual(points['keel.lock.lost'].map((p) => [p.attributes['keel.lock.reason'], p.value]), [['expired', 1]])
    } finally {
      await otel.close()
      await store.close?.()
      setLockStore(new MemoryLockStore())
    }
  })
}

test('a hot-keys report: the contended key first, with its refusals and waits', async () => {
  setLockStore(new MemoryLockStore())
  const hotKeys = watchHotKeys()
  try {
    // Eight workers on one key, one worker each on keys of their own.
    const contended = Array.from({ length: 8 }, () => lock('hot', 5_000).run(() => sleep(20), { timeout: 5_000 }))
    const calm = Array.from({ length: 8 }, (_, i) => lock(`calm:${i}`, 5_000).run(() => sleep(20), { timeout: 5_000 }))
    await Promise.all([...contended, ...calm])
    assert.equal(await lock('hot').acquireImmediately(), true)
    assert.equal(await lock('hot').acquireImmediately(), false)
    const [hottest, ...rest] = hotKeys.report(5)
    assert.equal(hottest.key, 'hot')
    assert.deepEqual([hottest.acquires, hottest.refused], [10, 1])
    assert.ok(hottest.waitedMs >= 20 * (1 + 2 + 3 + 4 + 5 + 6 + 7) * 0.9, `waited ${hottest.waitedMs} ms in all`)
    assert.ok(hottest.longestMs >= 7 * 20 * 0.9)
    assert.equal(rest.length, 4)
    for (const entry of rest) assert.deepEqual([entry.acquires, entry.refused], [1, 0])
  } finally {
    hotKeys.stop()
  }
})
