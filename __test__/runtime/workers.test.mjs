// Worker threads: the default store is per isolate (each worker that loads the
// addon gets its own, and locks in one do not exclude another), while a shared
// store such as Redis excludes across threads.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Worker } from 'node:worker_threads'
import { lock } from '@shaferllc/keel/core'

const workerSource = `
  const { parentPort, workerData } = require('node:worker_threads')
  const { lock, getLockStore, MemoryLockStore } = require('@shaferllc/keel/core')
  ;(async () => {
    const isMemory = getLockStore() instanceof MemoryLockStore
    const mine = lock('shared-key', 60_000)
    const gotShared = await mine.acquire()
    const [ran, sum] = await lock('work:' + workerData.id).run(async () => workerData.id * 2)
    const secondTry = await lock('shared-key').acquire()
    parentPort.postMessage({ isMemory, gotShared, ran, sum, secondTry, released: await mine.release() })
  })().catch((e) => parentPort.postMessage({ error: String(e && e.stack || e) }))
`

function runWorker(id) {
  return new Promise((resolve, reject) => {
    const w = new Worker(workerSource, { eval: true, workerData: { id } })
    w.once('message', resolve)
    w.once('error', reject)
    w.once('exit', (code) => code !== 0 && reject(new Error(`worker exited with ${code}`)))
  })
}

test('8 worker threads at once, each with its own default store', async () => {
  const holder = lock('shared-key', 60_000)
  assert.equal(await holder.acquire(), true, 'the main thread holds shared-key in its own store')
  const results = await Promise.all(Array.from({ length: 8 }, (_, id) => runWorker(id)))
  results.forEach((r, id) => {
    assert.equal(r.error, undefined, r.error)
    assert.equal(r.isMemory, true)
    assert.equal(r.gotShared, true, `worker ${id} got shared-key in its own store`)
    assert.equal(r.ran, true)
    assert.equal(r.sum, id * 2)
    assert.equal(r.secondTry, false, 'within a worker the lock still excludes')
    assert.equal(r.released, true)
  })
  assert.equal(await lock('shared-key').isLocked(), true, 'workers did not touch the main store')
  await holder.release()
})

test('worker threads locking through one Redis exclude each other; the main thread goes on after they exit', async () => {
  const { redisForTests, uniqueKey } = await import('../../support/servers.mjs')
  const { RedisLockStore, setLockStore, getLockStore } = await import('@shaferllc/keel/core')
  const redis = await redisForTests()
  const key = uniqueKey('workers')
  // [counter, threads inside the critical section, most ever inside at once]
  const shared = new Int32Array(new SharedArrayBuffer(12))
  const source = `
    const { parentPort, workerData } = require('node:worker_threads')
    const { lock, setLockStore, RedisLockStore } = require('@shaferllc/keel/core')
    const shared = workerData.shared
    setLockStore(new RedisLockStore(workerData.url))
    ;(async () => {
      for (let i = 0; i < 20; i++) {
        const [ran] = await lock(workerData.key, 5_000).run(async () => {
          const inside = Atomics.add(shared, 1, 1) + 1
          if (inside > Atomics.load(shared, 2)) Atomics.store(shared, 2, inside)
          const n = Atomics.load(shared, 0)
          await new Promise((r) => setTimeout(r, 1))
          Atomics.store(shared, 0, n + 1)
          Atomics.sub(shared, 1, 1)
        }, { timeout: 10_000, retryDelay: 2 })
        if (!ran) throw new Error('timed out')
      }
      // The store is not closed: a worker may end with its store open.
      parentPort.postMessage({ done: true })
    })().catch((e) => parentPort.postMessage({ error: String((e && e.stack) || e) }))
  `
  const previous = getLockStore()
  const main = setLockStore(new RedisLockStore(redis.url))
  try {
    const results = await Promise.all(
      Array.from(
        { length: 4 },
        () =>
          new Promise((resolve, reject) => {
            const w = new Worker(source, { eval: true, workerData: { url: redis.url, key, shared } })
            w.once('message', (m) => w.once('exit', () => resolve(m)))
            w.once('error', reject)
          }),
      ),
    )
    for (const r of results) assert.equal(r.error, undefined, r.error)
    assert.equal(shared[0], 80, 'no increment lost')
    assert.equal(shared[2], 1, 'never two threads inside at once')
    // The workers have exited; the addon still works on the main thread.
    assert.deepEqual(await lock(key).run(() => 'still works'), [true, 'still works'])
  } finally {
    await main.close()
    setLockStore(previous)
    await redis.close()
  }
})
