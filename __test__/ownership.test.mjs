// Owner tokens: fresh, random and unguessable for every acquisition; and
// each acquisition acted on only through the handles that speak for it.
import { test, beforeEach } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { lock, setLockStore, MemoryLockStore, RedisLockStore, LockNotHeldError } from '@shaferllc/keel/core'
import { startRedis } from './helpers/servers.mjs'
import { jsStoreOver } from './helpers/stores.mjs'

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
  const owners = []
  const inner = new MemoryLockStore()
  setLockStore({
    acquire: (k, o, t) => (owners.push(o), inner.acquire(k, o, t)),
    release: (k, o) => inner.release(k, o),
    extend: (k, o, t) => inner.extend(k, o, t),
    isLocked: (k) => inner.isLocked(k),
    remainingTime: (k) => inner.remainingTime(k),
  })
  const l = lock('k')
  await l.acquire()
  assert.deepEqual(owners, [JSON.parse(l.serialize()).owner])
  await l.release()
})

// One handle, two run()s: each callback's lock speaks for its own acquisition.
for (const [name, open] of Object.entries({
  MemoryLockStore: async () => ({ store: new MemoryLockStore(), close() {} }),
  RedisLockStore: async () => {
    const server = await startRedis()
    const store = new RedisLockStore(server.url)
    return { store, close: async () => (await store.close(), await server.close()) }
  },
  'a JS store': async () => ({ store: jsStoreOver(new MemoryLockStore()), close() {} }),
})) {
  test(`${name}: a run()'s callback lock acts on its own acquisition, not on a later one through the same handle`, async () => {
    const { store, close } = await open()
    try {
      setLockStore(store)
      const h = lock('job', 100)
      let bInside = false
      const a = h.run(async (l) => {
        const token = l.fencingToken
        const signal = l.signal
        assert.notEqual(l, h, 'the callback gets a handle of its own')
        await sleep(250) // A's hold lapses; B takes the lock through the same handle
        assert.ok(bInside)
        assert.equal(l.fencingToken, null, "A's hold is gone: no token, and never B's")
        await assert.rejects(l.extend(), LockNotHeldError)
        assert.equal(signal.aborted, true)
        assert.ok(signal.reason instanceof LockNotHeldError)
        assert.equal(await l.release(), false, "A's release does not free B's hold")
        assert.equal(await l.isExpired(), true)
        assert.equal(await lock('job').acquire(), false, 'a third worker still finds the lock held by B')
        return token
      })
      await sleep(20)
      const b = h.run(
        async (l) => {
          bInside = true
          const token = l.fencingToken
          assert.equal(h.fencingToken, token, 'the shared handle speaks for its latest acquisition')
          await sleep(400)
          assert.equal(l.signal.aborted, false, "B's autoExtend kept B's hold")
          assert.equal(l.fencingToken, token)
          return token
        },
        { timeout: 1_000, autoExtend: true },
      )
      const [[ranA, tokenA], [ranB, tokenB]] = await Promise.all([a, b])
      assert.equal(ranA, true)
      assert.equal(ranB, true)
      if (name !== 'a JS store') assert.ok(tokenB > tokenA, `${tokenB} > ${tokenA}`)
      assert.equal(await lock('job').isLocked(), false, "B's run() released B's hold")
      assert.equal(h.fencingToken, null)
    } finally {
      await close()
    }
  })
}
