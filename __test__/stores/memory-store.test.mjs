// MemoryLockStore beyond the store contract (contract/memory.test.mjs): used
// directly as a LockStore, its expiry, its sweep of expired entries (a
// million keys left to expire do not stay in memory), and two instances
// being independent.
import { test, beforeEach } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { lock, setLockStore, MemoryLockStore } from '@shaferllc/keel/core'

beforeEach(() => setLockStore(new MemoryLockStore()))

test('MemoryLockStore works directly as a LockStore', async () => {
  const store = new MemoryLockStore()
  assert.equal(await store.acquire('k', 'A', 1_000), true)
  assert.equal(await store.acquire('k', 'B', 1_000), false, 'acquire is set-if-absent')
  assert.equal(await store.isLocked('k'), true)
  const left = await store.remainingTime('k')
  assert.ok(left > 900 && left <= 1_000)
  assert.equal(await store.release('k', 'B'), false, 'release is owner-conditional')
  assert.equal(await store.extend('k', 'B', 5_000), false, 'extend is owner-conditional')
  assert.equal(await store.extend('k', 'A', 5_000), true)
  assert.ok((await store.remainingTime('k')) > 4_000)
  assert.equal(await store.release('k', 'A'), true)
  assert.equal(await store.isLocked('k'), false)
  assert.equal(await store.remainingTime('k'), null)
  for (const p of [store.acquire('x', 'o', 1), store.isLocked('x')]) assert.ok(p instanceof Promise)
})

test('MemoryLockStore expiry: an expired entry is free, and its old owner cannot act on it', async () => {
  const store = new MemoryLockStore()
  await store.acquire('k', 'A', 30)
  await sleep(50)
  assert.equal(await store.isLocked('k'), false)
  assert.equal(await store.remainingTime('k'), null)
  assert.equal(await store.extend('k', 'A', 1_000), false)
  assert.equal(await store.acquire('k', 'B', 1_000), true)
  assert.equal(await store.release('k', 'A'), false)
  assert.equal(await store.isLocked('k'), true)
})

test('a million keys taken and left to expire do not stay in memory', async () => {
  const store = setLockStore(new MemoryLockStore())
  for (let i = 0; i < 1_000_000; i++) {
    if (!(await lock(`job:${i}`, 200).acquire())) throw new Error(`job:${i} was not free`)
  }
  assert.ok(store.size > 1_000, `the store held ${store.size} entries while they were live`)
  await sleep(1_300) // past the TTL and the store's sweep interval
  await lock('one-more').acquire()
  assert.equal(store.size, 1)
})

test('two memory stores are independent', async () => {
  const a = new MemoryLockStore()
  const b = new MemoryLockStore()
  await a.acquire('k', 'o', 1_000)
  assert.equal(await b.isLocked('k'), false)
})
