// Cancelling a wait with an AbortSignal, where only a store in this process
// can show it: which store calls an aborted acquire makes, a grant that the
// store answers after the abort, a signal shared by many waits and by a
// million. (Every store's own timing: the store contract, contract-tracing.mjs.)
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { getEventListeners } from 'node:events'
import { lock, semaphore, setLockStore, MemoryLockStore } from '@shaferllc/keel/core'
import { AsyncMapLockStore, MapLockStore } from '../helpers/js-stores.mjs'
import { runNode } from '../helpers/node-test.mjs'

const methodsCalled = (store) => store.calls.map(([method]) => method)
const listeners = (signal) => getEventListeners(signal, 'abort').length

test('an aborted signal rejects before the store is asked, with its reason or an AbortError', async () => {
  const store = setLockStore(new AsyncMapLockStore())
  try {
    const controller = new AbortController()
    controller.abort()
    await assert.rejects(lock('k').acquire({ signal: controller.signal }), (e) => e instanceof DOMException && e.name === 'AbortError')
    await assert.rejects(lock('k').run(() => assert.fail('fn ran'), { timeout: 1_000, signal: controller.signal }), { name: 'AbortError' })
    const reason = { why: 'shutting down' }
    await assert.rejects(lock('k').acquire({ timeout: 1_000, signal: AbortSignal.abort(reason) }), (e) => e === reason)
    assert.deepEqual(methodsCalled(store), [], 'no store call was made')
  } finally {
    setLockStore(new MemoryLockStore())
  }
})

test('a grant the store answers after the abort is released at once, with its owner', async () => {
  // Answers acquire only when let go, as a slow server would.
  const answers = []
  class SlowStore extends AsyncMapLockStore {
    acquire(key, owner, ttlMs) {
      return new Promise((resolve) => answers.push(() => resolve(super.acquire(key, owner, ttlMs))))
    }
  }
  const store = setLockStore(new SlowStore())
  try {
    const controller = new AbortController()
    const waiting = lock('k').acquire({ timeout: 5_000, signal: controller.signal })
    assert.equal(answers.length, 1, 'the first attempt is out')
    controller.abort()
    await assert.rejects(waiting, { name: 'AbortError' })
    answers[0]()
    await new Promise((resolve) => setTimeout(resolve, 20))
    const owner = store.calls.find(([method]) => method === 'acquire')[2]
    assert.deepEqual(store.calls.filter(([method]) => method === 'release'), [['release', 'k', owner]])
    assert.equal(await store.isLocked('k'), false)
    assert.equal(listeners(controller.signal), 0)
  } finally {
    setLockStore(new MemoryLockStore())
  }
})

test('waiters of one lane aborted together all reject: none tries the store again, none gets the lock', async () => {
  const store = setLockStore(new MapLockStore())
  try {
    assert.equal(await lock('lane', 30_000).acquire(), true)
    const controller = new AbortController()
    const waiting = Array.from({ length: 3 }, () => lock('lane').acquire({ timeout: 5_000, retryDelay: 60_000, signal: controller.signal }))
    // The lock goes behind their backs (an operator, a flush): nothing wakes them.
    store.held.delete('lane')
    const calls = store.calls.length
    controller.abort()
    for (const outcome of await Promise.allSettled(waiting)) assert.equal(outcome.reason?.name, 'AbortError')
    assert.deepEqual(store.calls.slice(calls).filter(([method]) => method === 'acquire'), [], 'no attempt after the abort')
    assert.equal(store.held.has('lane'), false)
  } finally {
    setLockStore(new MemoryLockStore())
  }
})

test('a signal shared by 50 waits has one listener, and none once they end: by grant, timeout or abort', async () => {
  setLockStore(new MemoryLockStore())
  const warnings = []
  const onWarning = (w) => warnings.push(w)
  process.on('warning', onWarning)
  try {
    const controller = new AbortController()
    const { signal } = controller
    const holder = lock('shared', 10_000)
    assert.equal(await holder.acquire(), true)
    assert.equal(await lock('other-key', 10_000).acquire(), true)
    const granted = Array.from({ length: 20 }, () => lock('shared').run(() => 'ran', { timeout: 10_000, signal }))
    const timedOut = Array.from({ length: 10 }, () => lock('other-key').acquire({ timeout: 50, signal }))
    const permits = Array.from({ length: 20 }, () => semaphore('permits', 1).acquire({ timeout: 10_000, signal }))
    assert.equal(listeners(signal), 1)
    assert.deepEqual(await Promise.all(timedOut), Array(10).fill(false))
    assert.equal(await holder.release(), true)
    assert.deepEqual(await Promise.all(granted), Array(20).fill([true, 'ran']))
    // The first permit was free; the other 19 wait until the abort.
    assert.equal(await permits[0], true)
    assert.equal(listeners(signal), 1)
    controller.abort()
    for (const outcome of await Promise.allSettled(permits.slice(1))) assert.equal(outcome.reason?.name, 'AbortError')
    assert.equal(listeners(signal), 0)
    await new Promise((resolve) => setImmediate(resolve))
    assert.deepEqual(warnings.map(String), [], 'no listener leak warning')
  } finally {
    process.off('warning', onWarning)
  }
})

// In a process of its own: a test's async context makes every promise several times dearer.
const MILLION = `
  import { getEventListeners } from 'node:events'
  import { lock } from '@shaferllc/keel/core'
  const signal = new AbortController().signal
  const N = 1_000_000
  const listeners = () => getEventListeners(signal, 'abort').length
  let started = 0
  let ran = 0
  let mostListeners = 0
  let heapAtTenth = 0
  // 16 loops on one key: each acquire finds it held and waits its turn.
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (started < N) {
        started++
        await lock('one-key').run(async () => {
          ran++
          if (ran % 4_096 === 0) mostListeners = Math.max(mostListeners, listeners())
          await null
        }, { timeout: 60_000, signal })
        if (ran === N / 10) {
          gc()
          heapAtTenth = process.memoryUsage().heapUsed
        }
      }
    }),
  )
  gc()
  const grown = process.memoryUsage().heapUsed - heapAtTenth
  console.log(JSON.stringify({ ran, mostListeners, listenersAfter: listeners(), heapAtTenth, grown }))
`

test('a million acquisitions that wait on one signal leave no listener and no memory behind', async () => {
  const { code, output } = await runNode(['--expose-gc', '--input-type=module', '-e', MILLION])
  assert.equal(code, 0, output)
  const { ran, mostListeners, listenersAfter, heapAtTenth, grown } = JSON.parse(output)
  assert.equal(ran, 1_000_000)
  assert.equal(mostListeners, 1, 'one listener while waits are pending')
  assert.equal(listenersAfter, 0)
  assert.ok(heapAtTenth > 0 && grown < 4 * 1024 * 1024, `the heap grew ${(grown / 1e6).toFixed(1)} MB over 900,000 acquisitions`)
})
