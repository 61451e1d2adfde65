// setLockStore() / getLockStore(): which store a lock uses. setLockStore
// returns the store it installs; a lock keeps the store it was created with;
// restoreLock() uses the one current when it is called.
import { test, beforeEach } from 'node:test'
import assert from 'node:assert/strict'
import { lock, restoreLock, setLockStore, getLockStore, MemoryLockStore } from '@shaferllc/keel/core'
import { AsyncMapLockStore } from '../helpers/js-stores.mjs'

beforeEach(() => setLockStore(new MemoryLockStore()))

test('setLockStore() returns the store and getLockStore() reads it back', () => {
  const store = new MemoryLockStore()
  assert.equal(setLockStore(store), store)
  assert.equal(getLockStore(), store)
})

test('a lock keeps the store it was created with', async () => {
  const first = setLockStore(new MemoryLockStore())
  const l = lock('k')
  const second = setLockStore(new MemoryLockStore())
  await l.acquire()
  assert.equal(l.store, first)
  assert.equal(await first.isLocked('k'), true)
  assert.equal(await second.isLocked('k'), false)
  await l.release()
})

test('a fresh MemoryLockStore per test means keys cannot leak between tests', async () => {
  await lock('leaky', 60_000).acquire()
  setLockStore(new MemoryLockStore())
  assert.equal(await lock('leaky').isLocked(), false)
  assert.equal(await lock('leaky').acquire(), true)
})

test('restoreLock() uses the current store', async () => {
  const store = setLockStore(new AsyncMapLockStore())
  const owner = crypto.randomUUID()
  await store.acquire('k', owner, 10_000)
  const l = restoreLock(JSON.stringify({ key: 'k', ttlMs: 10_000, owner }))
  assert.equal(l.store, store)
  assert.equal(await l.release(), true)
})
