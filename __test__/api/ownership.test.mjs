// Owner tokens: fresh, random and unguessable for every acquisition, and the
// very tokens a store is handed. That each acquisition is acted on only
// through the handles that speak for it is part of the store contract
// (stores/contract.mjs), checked for every store.
import { test, beforeEach } from 'node:test'
import assert from 'node:assert/strict'
import { lock, setLockStore, MemoryLockStore } from '@shaferllc/keel/core'
import { AsyncMapLockStore } from '../helpers/js-stores.mjs'

beforeEach(() => setLockStore(new MemoryLockStore()))

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

test('every acquisition mints a distinct UUID-v4-shaped token (122 random bits)', async () => {
  const seen = new Set()
  const l = lock('k')
  for (let i = 0; i < 20_000; i++) {
    await l.acquire()
    const { owner } = JSON.parse(l.serialize())
    assert.match(owner, UUID_V4)
    seen.add(owner)
    await l.release()
  }
  assert.equal(seen.size, 20_000)
})

test('the random bits of the tokens are all in use', async () => {
  // Over 4,000 tokens, each of the 122 random bit positions must be seen both
  // set and clear; a token built from a small or fixed source would not be.
  let ones = 0n
  let zeros = 0n
  const mask = (1n << 128n) - 1n
  for (let i = 0; i < 4_000; i++) {
    const l = lock(`k${i}`)
    await l.acquire()
    const bits = BigInt(`0x${JSON.parse(l.serialize()).owner.replaceAll('-', '')}`)
    ones |= bits
    zeros |= ~bits & mask
    await l.release()
  }
  const varying = (ones & zeros).toString(2).replaceAll('0', '').length
  assert.equal(varying, 122)
})

test('tokens passed to a store are the ones serialize() reports', async () => {
  const store = setLockStore(new AsyncMapLockStore())
  const l = lock('k')
  await l.acquire()
  const owners = store.calls.filter(([method]) => method === 'acquire').map(([, , owner]) => owner)
  assert.deepEqual(owners, [JSON.parse(l.serialize()).owner])
  await l.release()
})
