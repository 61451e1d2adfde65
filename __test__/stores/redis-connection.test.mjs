// RedisLockStore's connection to one server, which the JS thread's own event
// loop drives: what one turn produces goes out together, replies are read
// however the bytes arrive, and a connection that breaks under many commands
// loses none of them. Through a TCP proxy that counts and cuts.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { Redis } from 'ioredis'
import { lock, readLock, writeLock, setLockStore, RedisLockStore } from '@shaferllc/keel/core'
import { startRedis, uniqueKey } from '../../support/servers.mjs'
import { startProxy } from '../../support/fault-proxy.mjs'

const server = await startRedis()
const inspect = new Redis(server.url)
after(async () => {
  inspect.disconnect()
  await server.close()
})

/** A store behind a fresh proxy, warmed up (connected, scripts loaded). */
async function behindProxy() {
  const proxy = await startProxy(server.port)
  const store = new RedisLockStore({ url: proxy.url, commandTimeout: 3_000 })
  setLockStore(store)
  await lock(uniqueKey('warm')).run(() => {})
  return {
    proxy,
    store,
    close: async () => {
      await store.close()
      await proxy.close()
    },
  }
}

test('the commands one turn makes go out in one write, not one each', async () => {
  const { proxy, close } = await behindProxy()
  try {
    const keys = Array.from({ length: 64 }, (_, i) => uniqueKey(`batch-${i}`))
    const before = proxy.writes
    const locks = keys.map((k) => lock(k, 10_000))
    const taken = await Promise.all(locks.map((l) => l.acquire()))
    assert.ok(taken.every(Boolean))
    const acquireWrites = proxy.writes - before
    assert.ok(acquireWrites <= 3, `64 acquires made in one turn took ${acquireWrites} writes`)
    const mid = proxy.writes
    await Promise.all(locks.map((l) => l.release()))
    assert.ok(proxy.writes - mid <= 3, `64 releases took ${proxy.writes - mid} writes`)
    for (const k of keys) assert.equal(await inspect.exists(k), 0)
  } finally {
    await close()
  }
})

test('replies that arrive a byte at a time are read whole, each with its command', async () => {
  const { proxy, store, close } = await behindProxy()
  try {
    proxy.dribble = true
    const key = uniqueKey('dribble')
    const l = lock(key, 10_000)
    assert.equal(await l.acquire(), true)
    assert.equal(typeof l.fencingToken, 'number')
    assert.equal(await store.isLocked(key), true)
    const left = await store.remainingTime(key)
    assert.ok(left > 9_000 && left <= 10_000, `remaining ${left}`)
    const others = await Promise.all(Array.from({ length: 8 }, () => store.acquire(key, 'other', 1_000)))
    assert.deepEqual(others, Array(8).fill(false))
    assert.equal(await l.release(), true)
    assert.equal(await store.isLocked(key), false)
  } finally {
    await close()
  }
})

test('a server that closes the connection mid-pipeline: every command still gets its own answer', async () => {
  const { proxy, store, close } = await behindProxy()
  try {
    const keys = Array.from({ length: 64 }, (_, i) => uniqueKey(`cut-${i}`))
    const owners = keys.map((_, i) => `owner-${i}`)
    const connections = proxy.connections
    // The connection goes after a few replies have come back.
    proxy.cutAfterReplyBytes(20)
    const taken = await Promise.all(keys.map((k, i) => store.acquire(k, owners[i], 30_000)))
    assert.deepEqual(taken, Array(64).fill(true), 'each acquire ran once, or was found to have run')
    assert.ok(proxy.connections > connections, 'the rest went on a new connection')
    for (const [i, k] of keys.entries()) assert.equal(await inspect.get(k), owners[i])
    proxy.cutAfterReplyBytes(10)
    await Promise.all(keys.map((k, i) => store.release(k, owners[i])))
    for (const k of keys) assert.equal(await inspect.exists(k), 0, 'released, on one connection or the next')
  } finally {
    await close()
  }
})

test('many commands in flight while the connection is killed and remade: none is lost, none hangs', async () => {
  const { proxy, store, close } = await behindProxy()
  try {
    const keys = Array.from({ length: 500 }, (_, i) => uniqueKey(`storm-${i}`))
    const connections = proxy.connections
    const runs = keys.map((k) => lock(k, 10_000).run(async () => 'done'))
    setImmediate(() => proxy.cutClients())
    const results = await Promise.all(runs)
    assert.deepEqual(results, Array(500).fill([true, 'done']))
    assert.ok(proxy.connections > connections, 'the connection was remade under them')
    // The releases were written, some to the connection that went: through
    // the store, each key's next command finds its release done.
    assert.deepEqual(await Promise.all(keys.map((k) => store.isLocked(k))), Array(500).fill(false))
    for (const k of keys.slice(0, 50)) assert.equal(await inspect.exists(k), 0, 'released')
  } finally {
    await close()
  }
})

test('a command sent just after the JS thread was blocked for longer than commandTimeout is not failed as late', async () => {
  const store = new RedisLockStore({ url: server.url, commandTimeout: 300, connectTimeout: 300 })
  try {
    const block = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
    block(700) // before the first command: the connection opens after it
    assert.equal(await store.acquire(uniqueKey('blocked'), 'o', 1_000), true)
    block(700) // and on an open connection
    const key = uniqueKey('blocked-open')
    assert.equal(await store.acquire(key, 'o', 1_000), true)
    assert.equal(await store.release(key, 'o'), true)
  } finally {
    await store.close()
  }
})

test('readers queued behind a writer go in together when it lets go, not one round trip after another', async () => {
  const { proxy, close } = await behindProxy()
  try {
    const key = uniqueKey('readers-together')
    const writer = writeLock(key, 10_000)
    assert.equal(await writer.acquire(), true)
    // retryDelay beyond the test: only the writer's release lets them in.
    const readers = Array.from({ length: 16 }, () => readLock(key, 10_000))
    const waiting = readers.map((r) => r.acquire({ timeout: 5_000, retryDelay: 60_000 }))
    await new Promise((resolve) => setTimeout(resolve, 50))
    const before = proxy.writes
    await writer.release()
    assert.deepEqual(await Promise.all(waiting), Array(16).fill(true))
    // The release with the first reader's attempt behind it, then the other 15 together.
    const writes = proxy.writes - before
    assert.ok(writes <= 4, `16 readers took ${writes} writes to get in`)
    assert.equal(await readLock(key).holders(), 16)
    await Promise.all(readers.map((r) => r.release()))
  } finally {
    await close()
  }
})
