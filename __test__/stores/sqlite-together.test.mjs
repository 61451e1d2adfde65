// SqliteLockStore's first attempts asked together (acquiresTogether): the
// attempts of one stretch of the microtask queue after its first are written
// in one transaction, each answered as it would be alone: taken, refused and
// then waiting in line (in the order asked), or failed with the store's
// error ("not yet" to one with time left); one whose signal aborted before
// its batch went is never sent; close() in the same turn sends it first.

import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { chmodSync, mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { lock, setLockStore, getLockStore, LockStoreError, SqliteLockStore } from '@shaferllc/keel/core'
import { writing } from '../helpers/sqlite-writing.mjs'

let dir
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'keel-sqlite-together-'))
  chmodSync(dir, 0o755)
})
after(() => rmSync(dir, { recursive: true, force: true }))

/**
 * Two stores on the file `name` (two processes, as the file sees them):
 * `here` is the lock store while `use` runs.
 *
 * @param {string} name
 * @param {(stores: { path: string, here: SqliteLockStore, elsewhere: SqliteLockStore }) => Promise<void>} use
 * @param {object} [options] `here`'s
 */
async function onOneFile(name, use, options = {}) {
  const path = join(dir, name)
  const here = new SqliteLockStore({ path, ...options })
  const elsewhere = new SqliteLockStore(path)
  const previous = getLockStore()
  setLockStore(here)
  try {
    await use({ path, here, elsewhere })
  } finally {
    setLockStore(previous)
    await here.close()
    await elsewhere.close()
  }
}

test("the acquires of a Promise.all commit together: each its own lock, seen held elsewhere, each key's token growing", async () => {
  await onOneFile('together.db', async ({ path, elsewhere }) => {
    // Each commit writes a page or so to the log: its growth counts them.
    const log = () => statSync(`${path}-wal`).size
    const keys = Array.from({ length: 16 }, (_, i) => `k${i}`)
    const oneByOne = keys.map((key) => lock(`${key}:apart`, 60_000))
    let before = log()
    for (const held of oneByOne) assert.equal(await held.acquire(), true)
    const apart = log() - before
    const together = keys.map((key) => lock(key, 60_000))
    before = log()
    assert.deepEqual(await Promise.all(together.map((held) => held.acquire())), keys.map(() => true))
    const atOnce = log() - before
    assert.ok(atOnce * 2 <= apart, `the log grew ${atOnce} bytes for 16 acquires together, ${apart} one by one`)
    for (const key of keys) assert.equal(await elsewhere.isLocked(key), true, key)
    await Promise.all([...together, ...oneByOne].map((held) => held.release()))
    // Taken again together: each key's fencing token grew.
    const again = keys.map((key) => lock(key, 60_000))
    assert.deepEqual(await Promise.all(again.map((held) => held.acquire())), keys.map(() => true))
    keys.forEach((key, i) => assert.ok(again[i].fencingToken > together[i].fencingToken, key))
    await Promise.all(again.map((held) => held.release()))
    for (const key of keys) assert.equal(await elsewhere.isLocked(key), false, key)
  })
})

test('two of one batch on one key: the first takes it, the second waits in line and gets it at its release', async () => {
  await onOneFile('together-one-key.db', async ({ elsewhere }) => {
    const [other, first, second] = [lock('other', 60_000), lock('k', 60_000), lock('k', 60_000)]
    const taken = Promise.all([other.acquire(), first.acquire(), second.acquire({ timeout: 10_000, retryDelay: 60_000 })])
    await new Promise((resolve) => setTimeout(resolve, 50))
    assert.equal(await first.isExpired(), false)
    assert.equal(await elsewhere.isLocked('k'), true)
    const started = performance.now()
    await first.release()
    assert.deepEqual(await taken, [true, true, true])
    assert.ok(performance.now() - started < 1_000, 'handed on at the release, not at a poll')
    assert.ok(second.fencingToken > first.fencingToken)
    await Promise.all([other.release(), second.release()])
  })
})

test('an attempt whose signal aborts before its batch is sent is never sent; the others are', async () => {
  await onOneFile('together-aborted.db', async ({ elsewhere }) => {
    const controller = new AbortController()
    const first = lock('first', 60_000).acquire()
    const aborted = lock('aborted', 60_000).acquire({ signal: controller.signal })
    const last = lock('last', 60_000).acquire()
    controller.abort()
    await assert.rejects(aborted, (e) => e.name === 'AbortError')
    assert.deepEqual(await Promise.all([first, last]), [true, true])
    assert.equal(await elsewhere.isLocked('last'), true)
    // Never taken: the key's first token is still to be given.
    const later = lock('aborted', 60_000)
    assert.equal(await later.acquire(), true)
    assert.equal(later.fencingToken, 1, 'the aborted attempt took no token')
  })
})

test('two of one batch waiting for a key held elsewhere get it in the order they asked', async () => {
  await onOneFile('together-order.db', async ({ elsewhere }) => {
    assert.equal(await elsewhere.acquire('k', 'holder', 60_000), true)
    const order = []
    const options = { timeout: 10_000, retryDelay: 60_000 }
    const runs = [
      lock('other', 60_000).run(() => order.push('other')),
      lock('k', 60_000).run(() => order.push('first'), options),
      lock('k', 60_000).run(() => order.push('second'), options),
    ]
    await new Promise((resolve) => setTimeout(resolve, 50))
    assert.deepEqual(order, ['other'])
    const started = performance.now()
    assert.equal(await elsewhere.release('k', 'holder'), true)
    await Promise.all(runs)
    assert.deepEqual(order, ['other', 'first', 'second'])
    assert.ok(performance.now() - started < 1_000, 'handed on at each release, not at a poll')
  })
})

test('close() in the turn of the acquires finds them taken', async () => {
  const path = join(dir, 'together-close.db')
  const here = new SqliteLockStore(path)
  const elsewhere = new SqliteLockStore(path)
  const previous = getLockStore()
  setLockStore(here)
  try {
    const taken = Promise.all(['a', 'b', 'c'].map((key) => lock(key, 60_000).acquire()))
    await here.close()
    assert.deepEqual(await taken, [true, true, true])
    for (const key of ['a', 'b', 'c']) assert.equal(await elsewhere.isLocked(key), true, key)
  } finally {
    setLockStore(previous)
    await elsewhere.close()
  }
})

test('a file kept busy past commandTimeout: attempts that do not wait fail with the store error and take nothing; those that wait get in once it is free', async () => {
  await onOneFile(
    'together-busy.db',
    async ({ path, elsewhere }) => {
      let writer = await writing(path, 1_000)
      try {
        const keys = ['a', 'b', 'c']
        const answers = await Promise.allSettled(keys.map((key) => lock(key, 60_000).acquire()))
        for (const answer of answers) {
          assert.equal(answer.status, 'rejected')
          assert.ok(answer.reason instanceof LockStoreError, String(answer.reason))
          assert.equal(answer.reason.code, 'ERR_LOCK_STORE_TIMEOUT')
        }
        await new Promise((resolve) => writer.once('exit', resolve))
        for (const key of keys) assert.equal(await elsewhere.isLocked(key), false, key)
        // A file busy is "not yet" to an attempt with time left, in a batch as alone.
        writer = await writing(path, 1_000)
        const waited = keys.map((key) => lock(key, 60_000))
        const taken = await Promise.all(waited.map((held) => held.acquire({ timeout: 10_000, retryDelay: 100 })))
        assert.deepEqual(taken, [true, true, true])
        for (const key of keys) assert.equal(await elsewhere.isLocked(key), true, key)
        await Promise.all(waited.map((held) => held.release()))
      } finally {
        writer.kill()
      }
    },
    { commandTimeout: 200 },
  )
})
