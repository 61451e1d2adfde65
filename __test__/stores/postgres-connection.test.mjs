// PostgresLockStore's connections, which the JS thread's own event loop
// drives: the statements one turn produces go out together, answers are read
// however the bytes arrive, a connection that breaks under many statements
// loses none of them, and a thread that was blocked does not make a fresh
// statement look late. Through a TCP proxy that counts and cuts.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import pg from 'pg'
import { lock, setLockStore, PostgresLockStore } from '@shaferllc/keel/core'
import { uniqueKey } from '../../support/servers.mjs'
import { startProxy } from '../../support/fault-proxy.mjs'
import { startPostgres } from '../../support/postgres.mjs'

let server
let inspect
before(async () => {
  server = await startPostgres()
  inspect = new pg.Client(server.url)
  await inspect.connect()
})
after(async () => {
  await inspect.end()
  await server.close()
})

const owners = async (keys) => {
  const { rows } = await inspect.query('SELECT key, owner FROM locks WHERE key = ANY($1)', [keys])
  return new Map(rows.map((r) => [r.key, r.owner]))
}

/** A store of one connection behind a fresh proxy, warmed up (connected, statements prepared). */
async function behindProxy() {
  const proxy = await startProxy(server.port)
  const store = new PostgresLockStore({
    url: `postgres://postgres@127.0.0.1:${proxy.port}/postgres`,
    poolSize: 1,
    commandTimeout: 3_000,
  })
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

test('the statements one turn makes go out in one write, not one each', async () => {
  const { proxy, close } = await behindProxy()
  try {
    const keys = Array.from({ length: 64 }, (_, i) => uniqueKey(`batch-${i}`))
    const before = proxy.writes
    const locks = keys.map((k) => lock(k, 10_000))
    const taken = await Promise.all(locks.map((l) => l.acquire()))
    assert.ok(taken.every(Boolean))
    const tokens = locks.map((l) => l.fencingToken)
    assert.equal(new Set(tokens).size, 64, 'each acquire drew its own fencing token')
    const acquireWrites = proxy.writes - before
    assert.ok(acquireWrites <= 3, `64 acquires made in one turn took ${acquireWrites} writes`)
    const mid = proxy.writes
    await Promise.all(locks.map((l) => l.release()))
    assert.ok(proxy.writes - mid <= 3, `64 releases took ${proxy.writes - mid} writes`)
    assert.equal((await owners(keys)).size, 0)
  } finally {
    await close()
  }
})

test('answers that arrive a byte at a time are read whole, each with its statement', async () => {
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
    assert.equal(await l.extend(20_000), undefined)
    assert.equal(await l.release(), true)
    assert.equal(await store.isLocked(key), false)
  } finally {
    await close()
  }
})

test('a connection cut mid-pipeline: every statement still gets its own answer', async () => {
  const { proxy, store, close } = await behindProxy()
  try {
    const keys = Array.from({ length: 64 }, (_, i) => uniqueKey(`cut-${i}`))
    const mine = keys.map((_, i) => `owner-${i}`)
    const connections = proxy.connections
    // The connection goes after a few answers have come back.
    proxy.cutAfterReplyBytes(200)
    const taken = await Promise.all(keys.map((k, i) => store.acquire(k, mine[i], 30_000)))
    assert.deepEqual(taken, Array(64).fill(true), 'each acquire ran once, or was found to have run')
    assert.ok(proxy.connections > connections, 'the rest went on a new connection')
    const held = await owners(keys)
    for (const [i, k] of keys.entries()) assert.equal(held.get(k), mine[i])
    proxy.cutAfterReplyBytes(100)
    await Promise.all(keys.map((k, i) => store.release(k, mine[i])))
    assert.equal((await owners(keys)).size, 0, 'released, on one connection or the next')
  } finally {
    await close()
  }
})

test('many statements in flight while the connection is killed and remade: none is lost, none hangs', async () => {
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
    // the store, each key's next statement finds its release done.
    assert.deepEqual(await Promise.all(keys.map((k) => store.isLocked(k))), Array(500).fill(false))
    assert.equal((await owners(keys)).size, 0, 'released')
  } finally {
    await close()
  }
})

test('a statement sent just after the JS thread was blocked for longer than commandTimeout is not failed as late', async () => {
  const store = new PostgresLockStore({ url: server.url, commandTimeout: 300, connectTimeout: 300 })
  try {
    const block = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
    block(700) // before the first statement: the connection opens after it
    assert.equal(await store.acquire(uniqueKey('blocked'), 'o', 1_000), true)
    block(700) // and on an open connection
    const key = uniqueKey('blocked-open')
    assert.equal(await store.acquire(key, 'o', 1_000), true)
    assert.equal(await store.release(key, 'o'), true)
  } finally {
    await store.close()
  }
})
