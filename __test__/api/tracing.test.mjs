// The lock on node:diagnostics_channel, where a store of this process shows
// what a server cannot: a store's own failure traced, autoExtend's
// extensions and its loss, a restored hold's release, the async context a
// subscriber binds, and nothing published once nobody listens. (Every
// store's fields and phases: the store contract, contract-tracing.mjs.)
import { test, afterEach } from 'node:test'
import assert from 'node:assert/strict'
import diagnostics from 'node:diagnostics_channel'
import { AsyncLocalStorage } from 'node:async_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import { lock, restoreLock, setLockStore, MemoryLockStore, channels } from '@shaferllc/keel/core'
import { MapLockStore, AsyncMapLockStore } from '../helpers/js-stores.mjs'
import { eventually } from '../helpers/eventually.mjs'
import { runNode } from '../helpers/node-test.mjs'

/** Subscribes `handlers` to a tracing channel until the test ends. */
const unsubscribe = []
function listen(name, handlers) {
  const channel = diagnostics.tracingChannel(channels[name])
  channel.subscribe(handlers)
  unsubscribe.push(() => channel.unsubscribe(handlers))
}
function listenLost(onMessage) {
  diagnostics.subscribe(channels.lost, onMessage)
  unsubscribe.push(() => diagnostics.unsubscribe(channels.lost, onMessage))
}
afterEach(() => {
  for (const stop of unsubscribe.splice(0)) stop()
  setLockStore(new MemoryLockStore())
})

test('the channel names are exported, frozen, under keel:lock', () => {
  assert.deepEqual({ ...channels }, {
    acquire: 'keel:lock:acquire',
    run: 'keel:lock:run',
    release: 'keel:lock:release',
    extend: 'keel:lock:extend',
    lost: 'keel:lock:lost',
  })
  assert.ok(Object.isFrozen(channels))
})

test("a store's failure is the acquire's error, after one attempt; the store is named by its class", async () => {
  class FailingStore extends AsyncMapLockStore {
    async acquire() {
      throw new Error('the database is read-only')
    }
  }
  setLockStore(new FailingStore())
  const seen = []
  listen('acquire', { error: (c) => seen.push(['error', { ...c }]), asyncEnd: (c) => seen.push(['asyncEnd', { ...c }]) })
  await assert.rejects(lock('k', 1_000).acquire({ timeout: 500 }), /read-only/)
  assert.deepEqual(seen.map(([phase]) => phase), ['error', 'asyncEnd'])
  const context = seen[1][1]
  assert.equal(context.error.message, 'the database is read-only')
  assert.equal(context.store, 'FailingStore')
  assert.equal(context.attempts, 1)
  assert.ok(context.waitedMs >= 0 && context.waitedMs < 500)
})

test("autoExtend's extensions are traced, and one refused is told as a lost hold", async () => {
  const store = setLockStore(new MapLockStore())
  const extensions = []
  const lost = []
  listen('extend', { asyncEnd: (c) => extensions.push([c.ttlMs, c.result]) })
  listenLost((m) => lost.push(m))
  const l = lock('renewed', 150)
  assert.equal(await l.acquire({ autoExtend: true }), true)
  await eventually(() => assert.ok(extensions.length >= 2, `${extensions.length} extensions`))
  assert.deepEqual(extensions.slice(0, 2), [[150, true], [150, true]])
  // Taken from it behind its back: its next extension is refused.
  store.held.set('renewed', { owner: 'someone else', expiresAt: Date.now() + 10_000 })
  await eventually(() => assert.equal(lost.length, 1))
  assert.deepEqual(lost[0], { key: 'renewed', kind: 'lock', limit: null, store: 'MapLockStore', ttlMs: 150, reason: 'autoExtend' })
  assert.equal(extensions.at(-1)[1], false)
  assert.equal(l.signal.aborted, true)
  await sleep(200)
  assert.equal(lost.length, 1, 'told once')
})

test('every extend() is published once, with no keel:lock:lost subscriber too; a rejection through error, with what the caller got', async () => {
  class FlakyStore extends MapLockStore {
    failing = false
    extend(key, owner, ttlMs) {
      if (!this.failing) return super.extend(key, owner, ttlMs)
      this.calls.push(['extend', key, owner, ttlMs])
      throw new Error('the cache is down')
    }
  }
  const store = setLockStore(new FlakyStore())
  const ops = new Map()
  const record = (phase) => (context) => {
    if (!ops.has(context)) ops.set(context, [])
    ops.get(context).push(phase)
  }
  listen('extend', Object.fromEntries(['start', 'end', 'asyncStart', 'asyncEnd', 'error'].map((phase) => [phase, record(phase)])))
  const settled = (extending) => extending.then(() => true, (error) => error)
  const outcomes = []
  const extend = async (l) => outcomes.push(await settled(l.extend()))

  // autoExtend's extensions run alongside: each store call is one operation, never two.
  const renewed = lock('renewed', 150)
  assert.equal(await renewed.acquire({ autoExtend: true }), true)
  const failing = lock('failing', 5_000)
  assert.equal(await failing.acquire(), true)
  store.failing = true
  await extend(failing)
  assert.equal(outcomes.at(-1).message, 'the cache is down')
  store.failing = false
  await extend(failing)
  assert.equal(outcomes.at(-1), true, 'a store that failed is asked again')
  // Taken from it behind its back: the store says it is not ours, and from then on it is known lost.
  store.held.set('failing', { owner: 'someone else', expiresAt: Date.now() + 10_000 })
  await extend(failing)
  await extend(failing)
  // Its time up by this process's clock (its signal watches it): known lost, the store not asked.
  const lapsing = lock('lapsing', 50)
  assert.equal(await lapsing.acquire(), true)
  const { signal } = lapsing
  await eventually(() => assert.equal(signal.aborted, true))
  await extend(lapsing)
  assert.equal(await renewed.release(), true)
  assert.deepEqual(outcomes.slice(2).map((outcome) => outcome.name), ['LockNotHeldError', 'LockNotHeldError', 'LockNotHeldError'])

  const byKey = (key) => [...ops].filter(([context]) => context.key === key)
  const published = byKey('failing').concat(byKey('lapsing'))
  assert.equal(published.length, outcomes.length, 'one operation a call')
  for (const [i, [context, phases]] of published.entries()) {
    if (outcomes[i] === true) {
      assert.deepEqual(phases, ['start', 'end', 'asyncStart', 'asyncEnd'], `call ${i}`)
      assert.equal(context.result, true)
    } else {
      assert.deepEqual(phases, ['start', 'end', 'error', 'asyncStart', 'asyncEnd'], `call ${i}`)
      assert.equal(context.error, outcomes[i], `call ${i}: the very error it rejected with`)
      assert.equal('result' in context, false)
    }
  }
  const storeCalls = (key) => store.calls.filter(([method, called]) => method === 'extend' && called === key).length
  assert.equal(storeCalls('failing'), 3, 'a hold known lost is not asked about')
  assert.equal(storeCalls('lapsing'), 0)
  const renewals = byKey('renewed')
  assert.ok(renewals.length >= 1, 'autoExtend extended it')
  assert.equal(renewals.length, storeCalls('renewed'), "autoExtend's: one operation a store call")
  for (const [context, phases] of renewals) {
    assert.deepEqual(phases, ['start', 'end', 'asyncStart', 'asyncEnd'])
    assert.equal(context.result, true)
  }
})

test('a release says how long the hold was held, when that is known here', async () => {
  const released = []
  const unheard = lock('before', 5_000)
  assert.equal(await unheard.acquire(), true)
  listen('release', { asyncEnd: (c) => released.push([c.key, c.heldMs, c.result]) })
  const heard = lock('after', 5_000)
  assert.equal(await heard.acquire(), true)
  await sleep(50)
  const restored = restoreLock(heard.serialize())
  assert.equal(await unheard.release(), true)
  assert.equal(await restored.release(), true)
  assert.equal(await heard.release(), false)
  assert.deepEqual(released.map(([key, heldMs]) => [key, heldMs]), [
    ['before', null],
    ['after', null],
    ['after', released[2][1]],
  ])
  assert.ok(released[2][1] >= 45, `held ${released[2][1]} ms`)
  assert.deepEqual(released.map(([, , result]) => result), [true, true, false])
})

test('a store bound to the start event is the async context of the whole operation, the callback included', async () => {
  setLockStore(new AsyncMapLockStore())
  const spans = new AsyncLocalStorage()
  const runChannel = diagnostics.tracingChannel(channels.run)
  const acquireChannel = diagnostics.tracingChannel(channels.acquire)
  runChannel.start.bindStore(spans, (context) => ({ name: 'run', key: context.key }))
  acquireChannel.start.bindStore(spans, (context) => ({ name: 'acquire', parent: spans.getStore() }))
  unsubscribe.push(() => runChannel.start.unbindStore(spans), () => acquireChannel.start.unbindStore(spans))
  const parents = []
  listen('acquire', { start: () => parents.push(spans.getStore()) })
  const [, inside] = await lock('contextual').run(async () => {
    await sleep(5)
    return spans.getStore()
  })
  assert.deepEqual(inside, { name: 'run', key: 'contextual' })
  assert.deepEqual(parents, [{ name: 'acquire', parent: { name: 'run', key: 'contextual' } }])
  assert.equal(spans.getStore(), undefined, 'and not after it')
})

test('once nobody listens, nothing is published', async () => {
  const seen = []
  const handlers = { start: () => seen.push('start'), asyncEnd: () => seen.push('asyncEnd') }
  listen('run', handlers)
  await lock('k').run(() => {})
  assert.deepEqual(seen, ['start', 'asyncEnd'])
  for (const stop of unsubscribe.splice(0)) stop()
  for (const name of ['acquire', 'run', 'release', 'extend']) assert.equal(diagnostics.tracingChannel(channels[name]).hasSubscribers, false)
  await lock('k').run(() => {})
  const l = lock('k', 100)
  await l.acquire()
  await l.extend()
  await l.release()
  assert.deepEqual(seen, ['start', 'asyncEnd'])
})

test('on a Node whose tracing channels lack hasSubscribers (before 20.13), the lock still publishes', async () => {
  const script = `
    import diagnostics from 'node:diagnostics_channel'
    const prototype = Object.getPrototypeOf(diagnostics.tracingChannel('probe'))
    delete prototype.hasSubscribers
    const { lock, channels } = await import('@shaferllc/keel/core')
    const seen = []
    diagnostics.tracingChannel(channels.acquire).subscribe({ asyncEnd: (c) => seen.push(c.result) })
    await lock('k').run(() => {})
    console.log(JSON.stringify({ gone: !('hasSubscribers' in prototype), seen }))
  `
  const { code, output } = await runNode(['--input-type=module', '-e', script])
  assert.equal(code, 0, output)
  assert.deepEqual(JSON.parse(output), { gone: true, seen: [true] })
})
