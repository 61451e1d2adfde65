// What every store shows of a lock on node:diagnostics_channel, and how a
// wait is cancelled with an AbortSignal: the same through every store, as
// both live in the lock, but checked against each store's real timing (an
// answer at once, one a round trip away, a lock handed over from a line).
//
//   tracingContract(() => ({ opened }), { fencing, readWrite })

import { test } from 'node:test'
import assert from 'node:assert/strict'
import diagnostics from 'node:diagnostics_channel'
import { getEventListeners } from 'node:events'
import { setTimeout as sleep } from 'node:timers/promises'
import { lock, semaphore, readLock, writeLock, channels } from '@shaferllc/keel/core'
import { uniqueKey } from '../../support/servers.mjs'
import { eventually } from '../helpers/eventually.mjs'

const TRACED = ['acquire', 'run', 'release', 'extend']
const PHASES = ['start', 'end', 'asyncStart', 'asyncEnd', 'error']

/** The fields each channel's context has, and no others. */
const FIELDS = {
  acquire: ['key', 'kind', 'limit', 'store', 'ttlMs', 'timeoutMs', 'waitedMs', 'attempts', 'fencingToken'],
  run: ['key', 'kind', 'limit', 'store', 'ttlMs', 'timeoutMs'],
  release: ['key', 'kind', 'limit', 'store', 'ttlMs', 'heldMs'],
  extend: ['key', 'kind', 'limit', 'store', 'ttlMs'],
}

/**
 * Records every traced operation whose key starts with `prefix`: one entry
 * per context, with its phases in the order published and a copy of the
 * context at asyncEnd. `stop()` unsubscribes.
 */
function recorder(prefix) {
  const seen = new Map()
  const ops = []
  const lost = []
  const handlers = {}
  for (const name of TRACED) {
    handlers[name] = Object.fromEntries(
      PHASES.map((phase) => [
        phase,
        (context) => {
          if (!context.key.startsWith(prefix)) return
          let op = seen.get(context)
          if (op === undefined) {
            seen.set(context, (op = { channel: name, phases: [], atStart: { ...context }, context }))
            ops.push(op)
          }
          op.phases.push(phase)
          if (phase === 'asyncEnd') op.atEnd = { ...context }
        },
      ]),
    )
    diagnostics.tracingChannel(channels[name]).subscribe(handlers[name])
  }
  const onLost = (message) => message.key.startsWith(prefix) && lost.push(message)
  diagnostics.subscribe(channels.lost, onLost)
  return {
    ops,
    lost,
    /** Every operation seen has ended (run()'s release may answer after run() did, on a store that says when it is sent). */
    settled: () => eventually(() => assert.deepEqual(ops.filter((op) => !op.phases.includes('asyncEnd')), [])),
    of: (channel, key) => ops.filter((op) => op.channel === channel && (key === undefined || op.context.key === key)),
    stop() {
      for (const name of TRACED) diagnostics.tracingChannel(channels[name]).unsubscribe(handlers[name])
      diagnostics.unsubscribe(channels.lost, onLost)
    },
  }
}

/** Whether `value`, or anything in it, is or contains `text`. */
function carries(value, text) {
  const json = JSON.stringify(value, (_, v) => (typeof v === 'bigint' ? String(v) : v))
  return json !== undefined && json.includes(text)
}

const ownerOf = (l) => JSON.parse(l.serialize()).owner

/**
 * @param {() => { opened: { store: object, deleteKey?: (key: string) => Promise<unknown> } }} current
 * @param {{ fencing: boolean, readWrite: boolean }} can
 */
export function tracingContract(current, { fencing, readWrite }) {
  test('tracing: acquire, run, release and extend publish every phase, with their fields, and never the owner token', async () => {
    const prefix = uniqueKey('traced')
    const key = `${prefix}:a`
    const { store } = current().opened
    const trace = recorder(prefix)
    const owners = []
    try {
      const holder = lock(key, 5_000)
      assert.equal(await holder.acquire(), true)
      owners.push(ownerOf(holder))
      assert.equal(await lock(key).acquireImmediately(), false)
      await holder.extend(6_000)
      // A waiter: woken by the release, with what it waited recorded.
      const waiter = lock(key, 4_000)
      const waiting = waiter.acquire({ timeout: 10_000, retryDelay: 20 })
      await sleep(120)
      assert.equal(await holder.release(), true)
      assert.equal(await waiting, true)
      owners.push(ownerOf(waiter))
      assert.equal(await waiter.release(), true)
      const [ran, value] = await lock(`${prefix}:run`, 3_000).run(async (l) => {
        owners.push(ownerOf(l))
        await l.extend(3_500)
        return 'done'
      })
      assert.deepEqual([ran, value], [true, 'done'])
      await trace.settled()
    } finally {
      trace.stop()
    }

    const name = store.constructor.name
    for (const op of trace.ops) {
      assert.deepEqual(op.phases, ['start', 'end', 'asyncStart', 'asyncEnd'], `${op.channel} on ${op.context.key}`)
      assert.deepEqual(Object.keys(op.atStart).sort(), [...FIELDS[op.channel]].sort(), `${op.channel}'s fields at start`)
      assert.deepEqual(Object.keys(op.atEnd).sort(), [...FIELDS[op.channel], 'result'].sort(), `${op.channel}'s fields at asyncEnd`)
      assert.equal(op.atEnd.store, name)
      assert.equal(op.atEnd.kind, 'lock')
      assert.equal(op.atEnd.limit, null)
      for (const owner of owners) assert.ok(!carries(op.atEnd, owner), `${op.channel}'s context carries an owner token`)
    }

    const acquires = trace.of('acquire', key)
    assert.deepEqual(acquires.map((op) => op.atEnd.result), [true, false, true])
    const [first, refused, waited] = acquires.map((op) => op.atEnd)
    assert.deepEqual([first.ttlMs, first.timeoutMs, refused.timeoutMs, waited.timeoutMs, waited.ttlMs], [5_000, 0, 0, 10_000, 4_000])
    assert.equal(first.attempts, 1)
    assert.equal(refused.attempts, 1)
    assert.equal(refused.fencingToken, null)
    assert.ok(waited.waitedMs >= 100 && waited.waitedMs < 5_000, `the waiter waited ${waited.waitedMs} ms`)
    assert.ok(first.waitedMs >= 0 && first.waitedMs < waited.waitedMs, `the first took ${first.waitedMs} ms`)
    assert.ok(waited.attempts >= 1 && waited.attempts <= 10, `${waited.attempts} attempts`)
    if (fencing) {
      for (const got of [first, waited]) assert.ok(['number', 'bigint'].includes(typeof got.fencingToken), `fencing token ${got.fencingToken}`)
      assert.ok(waited.fencingToken > first.fencingToken, 'the tokens grow')
    } else {
      assert.equal(first.fencingToken, null)
    }

    const releases = trace.of('release', key).map((op) => op.atEnd)
    assert.deepEqual(releases.map((r) => r.result), [true, true])
    assert.ok(releases[0].heldMs >= 100, `the holder held it ${releases[0].heldMs} ms`)
    assert.ok(releases[1].heldMs >= 0 && releases[1].heldMs < releases[0].heldMs)
    assert.deepEqual(trace.of('extend', key).map((op) => [op.atEnd.ttlMs, op.atEnd.result]), [[6_000, true]])

    // run(): the run, and inside it its acquire, the extension its callback made, its release.
    const inRun = trace.ops.filter((op) => op.context.key === `${prefix}:run`)
    assert.deepEqual(inRun.map((op) => op.channel), ['run', 'acquire', 'extend', 'release'])
    assert.deepEqual(inRun[0].atEnd.result, [true, 'done'])
    assert.deepEqual([inRun[0].atEnd.timeoutMs, inRun[0].atEnd.ttlMs, inRun[2].atEnd.ttlMs], [0, 3_000, 3_500])
    assert.equal(inRun[3].atEnd.result, true)
  })

  test('tracing: a failure publishes error before asyncEnd; semaphores and read-write locks say their kind', async () => {
    const prefix = uniqueKey('traced-kinds')
    const { store } = current().opened
    const trace = recorder(prefix)
    const reason = new Error('client went away')
    try {
      const controller = new AbortController()
      controller.abort(reason)
      await assert.rejects(lock(`${prefix}:gone`).acquire({ signal: controller.signal }), (e) => e === reason)
      await assert.rejects(lock(`${prefix}:gone`).run(() => assert.fail('fn ran'), { signal: controller.signal }), (e) => e === reason)
      assert.deepEqual(await semaphore(`${prefix}:s`, 3, 4_000).run(() => 1), [true, 1])
      if (readWrite) {
        assert.deepEqual(await readLock(`${prefix}:rw`).run(() => 2), [true, 2])
        assert.deepEqual(await writeLock(`${prefix}:rw`).run(() => 3), [true, 3])
      }
      await trace.settled()
    } finally {
      trace.stop()
    }
    const failed = trace.of('acquire', `${prefix}:gone`)
    assert.equal(failed.length, 2)
    for (const op of failed) {
      assert.deepEqual(op.phases, ['start', 'end', 'error', 'asyncStart', 'asyncEnd'])
      assert.equal(op.atEnd.error, reason)
      assert.equal('result' in op.atEnd, false)
      assert.equal(op.atEnd.attempts, 0, 'no store round trip')
    }
    const [run] = trace.of('run', `${prefix}:gone`)
    assert.deepEqual(run.phases, ['start', 'end', 'error', 'asyncStart', 'asyncEnd'])
    assert.equal(run.atEnd.error, reason)

    const permit = trace.of('acquire', `${prefix}:s`)[0].atEnd
    assert.deepEqual([permit.kind, permit.limit, permit.ttlMs, permit.store, permit.result], ['semaphore', 3, 4_000, store.constructor.name, true])
    assert.deepEqual(trace.of('release', `${prefix}:s`).map((op) => [op.atEnd.kind, op.atEnd.limit]), [['semaphore', 3]])
    if (readWrite) {
      const kinds = trace.ops.filter((op) => op.context.key === `${prefix}:rw`).map((op) => `${op.channel}:${op.atEnd.kind}`)
      assert.deepEqual(kinds, ['run:read', 'acquire:read', 'release:read', 'run:write', 'acquire:write', 'release:write'])
    }
  })

  test('tracing: every extend() is published once, and one that rejects publishes error with what it rejects with', async () => {
    const prefix = uniqueKey('traced-extend')
    // Taken before anyone listens: its TTL is not watched, so only the store can say it lapsed.
    const unwatched = lock(`${prefix}:store-says`, 200)
    assert.equal(await unwatched.acquire(), true)
    const trace = recorder(prefix)
    /** Each call made, in order: its lock's key and how it settled (true, or what it rejected with). */
    const calls = []
    const extend = async (l, ttlMs) => {
      const outcome = await l.extend(ttlMs).then(
        () => true,
        (error) => error,
      )
      calls.push([l.key, outcome])
      return outcome
    }
    try {
      const holder = lock(`${prefix}:held`, 5_000)
      assert.equal(await holder.acquire(), true)
      assert.equal(await extend(holder, 6_000), true)
      // A bad argument is no extension, as a bad acquire() option is no acquisition: nothing is published.
      await assert.rejects(holder.extend(-1), RangeError)
      await assert.rejects(holder.extend(/** @type {any} */ ('6s')), TypeError)
      assert.equal(await holder.release(), true)
      assert.equal((await extend(holder)).name, 'LockNotHeldError', 'released')
      assert.equal((await extend(lock(`${prefix}:never`))).name, 'LockNotHeldError', 'never held')
      // Taken while someone listens to keel:lock:lost: its TTL passing is watched for.
      const lapsing = lock(`${prefix}:known-lost`, 200)
      assert.equal(await lapsing.acquire(), true)
      await sleep(400)
      await eventually(() => assert.deepEqual(trace.lost.map((m) => m.reason), ['expired']))
      assert.equal((await extend(lapsing)).name, 'LockNotHeldError', 'known lost, without asking the store')
      // The unwatched hold's key taken by another: the store says it is not ours.
      assert.equal(await lock(`${prefix}:store-says`, 5_000).acquire(), true)
      assert.equal((await extend(unwatched)).name, 'LockNotHeldError', 'the store says not held')
      assert.equal((await extend(unwatched, 1_000)).name, 'LockNotHeldError', 'known lost since')
      await trace.settled()
    } finally {
      trace.stop()
    }
    assert.deepEqual(
      trace.lost.map((m) => [m.key.slice(prefix.length + 1), m.reason]),
      [['known-lost', 'expired'], ['store-says', 'extend']],
    )
    const published = trace.of('extend')
    assert.deepEqual(published.map((op) => op.context.key), calls.map(([key]) => key), 'one operation a call, in order')
    for (const [i, op] of published.entries()) {
      const [key, outcome] = calls[i]
      const which = `extend #${i} on ${key.slice(prefix.length + 1)}`
      assert.deepEqual(Object.keys(op.atStart).sort(), [...FIELDS.extend].sort(), `${which}: fields at start`)
      if (outcome === true) {
        assert.deepEqual(op.phases, ['start', 'end', 'asyncStart', 'asyncEnd'], which)
        assert.deepEqual([op.atEnd.result, 'error' in op.atEnd], [true, false], which)
      } else {
        assert.deepEqual(op.phases, ['start', 'end', 'error', 'asyncStart', 'asyncEnd'], which)
        assert.equal(op.atEnd.error, outcome, `${which}: the error the call rejected with`)
        assert.equal('result' in op.atEnd, false, which)
      }
    }
    assert.deepEqual(published.map((op) => op.atEnd.ttlMs), [6_000, 5_000, 30_000, 200, 200, 1_000])
  })

  test('tracing: a lost hold is told once on keel:lock:lost, with how it was found', async () => {
    const prefix = uniqueKey('lost')
    // Taken before anyone listens: found lost only when asked.
    const [extended, checked, released] = ['extend', 'check', 'release'].map((k) => lock(`${prefix}:${k}`, 200))
    for (const l of [extended, checked, released]) assert.equal(await l.acquire(), true)
    const trace = recorder(prefix)
    try {
      // Taken while someone listens: its TTL passing is watched for.
      const lapsing = lock(`${prefix}:lapse`, 200)
      assert.equal(await lapsing.acquire(), true)
      const kept = lock(`${prefix}:kept`, 200)
      assert.equal(await kept.acquire(), true)
      assert.equal(await kept.release(), true)
      await sleep(400)
      await eventually(() => assert.equal(trace.lost.length, 1))
      // The lapsed locks are free, and others take them.
      for (const k of ['extend', 'release']) assert.equal(await lock(`${prefix}:${k}`, 5_000).acquire(), true)
      await assert.rejects(extended.extend(), { name: 'LockNotHeldError' })
      assert.equal(await checked.isExpired(), true)
      assert.equal(await released.release(), false)
      // Each is told once: asking again finds nothing new.
      await assert.rejects(extended.extend(), { name: 'LockNotHeldError' })
      assert.equal(await checked.isExpired(), true)
      await assert.rejects(lapsing.extend(), { name: 'LockNotHeldError' })
    } finally {
      trace.stop()
    }
    const told = trace.lost.map((m) => [m.key.slice(prefix.length + 1), m.reason])
    assert.deepEqual(told, [
      ['lapse', 'expired'],
      ['extend', 'extend'],
      ['check', 'isExpired'],
      ['release', 'release'],
    ])
    const { store } = current().opened
    for (const message of trace.lost) {
      assert.deepEqual(Object.keys(message).sort(), ['key', 'kind', 'limit', 'reason', 'store', 'ttlMs'])
      assert.deepEqual([message.kind, message.limit, message.store, message.ttlMs], ['lock', null, store.constructor.name, 200])
    }
  })

  test('abort: a signal aborted already rejects with its reason, and nothing is taken', async () => {
    const key = uniqueKey('aborted-before')
    const controller = new AbortController()
    controller.abort()
    let ran = false
    for (const attempt of [
      () => lock(key).acquire({ signal: controller.signal }),
      () => lock(key).acquire({ timeout: 5_000, signal: controller.signal }),
      () => lock(key).run(() => (ran = true), { timeout: 5_000, signal: controller.signal }),
      () => semaphore(key, 2).acquire({ timeout: 5_000, signal: controller.signal }),
    ]) {
      await assert.rejects(attempt(), (e) => e === controller.signal.reason && e.name === 'AbortError')
    }
    assert.equal(ran, false)
    assert.equal(await lock(key).isLocked(), false)
    assert.equal(getEventListeners(controller.signal, 'abort').length, 0)
  })

  test('abort: waiters reject at once with the reason, leave the queue, and run() never calls fn', async () => {
    const key = uniqueKey('aborted-waiting')
    const holder = lock(key, 10_000)
    assert.equal(await holder.acquire(), true)
    const controller = new AbortController()
    const { signal } = controller
    let ran = false
    const waiting = [
      lock(key).acquire({ timeout: 10_000, signal }),
      lock(key).run(() => (ran = true), { timeout: 10_000, retryDelay: 10, signal }),
      lock(key).acquire({ timeout: 10_000, retryDelay: 5_000, signal }),
    ]
    const outcomes = Promise.allSettled(waiting)
    await sleep(150)
    assert.equal(getEventListeners(signal, 'abort').length, 1, 'one listener, however many waits')
    const reason = new Error('request closed')
    const aborted = performance.now()
    controller.abort(reason)
    for (const outcome of await outcomes) assert.deepEqual(outcome, { status: 'rejected', reason })
    const took = performance.now() - aborted
    assert.ok(took < 100, `rejected ${took} ms after the abort`)
    assert.equal(ran, false)
    assert.equal(getEventListeners(signal, 'abort').length, 0)
    assert.equal(await holder.isLocked(), true, 'the holder still holds it')
    // They left the queue: a newcomer is next when the holder lets go.
    const newcomer = lock(key, 5_000)
    const next = newcomer.acquire({ timeout: 5_000, retryDelay: 20 })
    await sleep(50)
    const released = performance.now()
    assert.equal(await holder.release(), true)
    assert.equal(await next, true)
    assert.ok(performance.now() - released < 1_000)
    assert.equal(await newcomer.release(), true)
  })

  test('abort: a grant that comes after the abort is given back at once', async () => {
    // A store that answers at once grants a free lock within the acquire() call.
    const probe = lock(uniqueKey('probe'))
    const probing = probe.acquire()
    const atOnce = ownerOf(probe) !== undefined
    assert.equal(await probing, true)
    assert.equal(await probe.release(), true)
    for (let round = 0; round < 3; round++) {
      const key = uniqueKey('late-grant')
      const controller = new AbortController()
      // The key is free: the first attempt, on its way, takes it.
      const taking = lock(key, 10_000).acquire({ timeout: 5_000, signal: controller.signal })
      controller.abort()
      const outcome = await taking.then(
        (got) => got,
        (error) => error,
      )
      if (atOnce) {
        // A store that answers at once granted it within the call, before the abort.
        assert.equal(outcome, true)
        assert.equal(await lock(key).isLocked(), true)
        continue
      }
      assert.equal(outcome.name, 'AbortError')
      // Taken by the attempt for 10 s unless given back: another gets it well before.
      const after = lock(key)
      await eventually(async () => assert.equal(await after.acquireImmediately(), true, 'given back'), 3_000)
      assert.equal(await after.release(), true)
    }
    // Handed over from the holder as the waiter aborts: it goes on, to the next.
    const key = uniqueKey('late-handover')
    const holder = lock(key, 10_000)
    assert.equal(await holder.acquire(), true)
    const controller = new AbortController()
    const first = lock(key, 5_000)
    const waiting = first.acquire({ timeout: 5_000, retryDelay: 5, signal: controller.signal })
    const second = lock(key, 5_000)
    const next = second.acquire({ timeout: 5_000, retryDelay: 20 })
    await sleep(80)
    const releasing = holder.release()
    controller.abort()
    if (atOnce) {
      // Released within the call: the first waiter had it before the abort.
      assert.equal(await waiting, true)
      assert.equal(await first.release(), true)
    } else {
      await assert.rejects(waiting, { name: 'AbortError' })
    }
    assert.equal(await releasing, true)
    assert.equal(await next, true)
    assert.equal(await second.release(), true)
  })

  test('abort: the timeout and the signal together, whichever comes first', async () => {
    const key = uniqueKey('timeout-or-signal')
    const holder = lock(key, 10_000)
    assert.equal(await holder.acquire(), true)
    const signal = new AbortController().signal
    let started = performance.now()
    assert.equal(await lock(key).acquire({ timeout: 150, retryDelay: 20, signal }), false)
    assert.ok(performance.now() - started >= 140, 'the timeout came first')
    assert.equal(getEventListeners(signal, 'abort').length, 0)
    started = performance.now()
    await assert.rejects(lock(key).run(() => assert.fail('fn ran'), { timeout: 10_000, signal: AbortSignal.timeout(150) }), { name: 'TimeoutError' })
    const took = performance.now() - started
    assert.ok(took >= 140 && took < 2_000, `the signal came first, after ${took} ms`)
    assert.equal(await holder.release(), true)
    // A signal never aborted changes nothing for a lock that is free.
    assert.deepEqual(await lock(key).run(() => 'ran', { timeout: 1_000, signal }), [true, 'ran'])
    assert.equal(getEventListeners(signal, 'abort').length, 0)
  })
}
