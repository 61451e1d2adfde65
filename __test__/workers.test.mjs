// The default store is per isolate: each worker thread that loads the addon
// gets its own, and locks in one do not exclude another.
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
