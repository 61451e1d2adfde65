// What the network does to both server stores in production, made on demand
// by a fault proxy (support/fault-proxy.mjs) in front of servers this file
// starts: a connection that goes silent (a host gone, a flow a NAT or load
// balancer dropped: the socket stays open, nothing comes back) is replaced;
// the command timeout holds for every command, the first ones after a
// connection opened too; a server that reads slowly and a path with latency
// lose nothing.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { lock, setLockStore, RedisLockStore, PostgresLockStore } from '@shaferllc/keel/core'
import { startRedis, uniqueKey } from '../../support/servers.mjs'
import { startProxy } from '../../support/fault-proxy.mjs'
import { startPostgres } from '../../support/postgres.mjs'

let redis
let postgres
const cleanups = []
before(async () => {
  ;[redis, postgres] = await Promise.all([startRedis(), startPostgres()])
})
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup()
  await redis?.close()
  await postgres?.close()
})

const STORES = {
  RedisLockStore: (port, options) => new RedisLockStore({ url: `redis://127.0.0.1:${port}`, ...options }),
  PostgresLockStore: (port, options) =>
    new PostgresLockStore({ url: `postgres://postgres@127.0.0.1:${port}/postgres`, poolSize: 1, ...options }),
}
const serverOf = (name) => (name === 'RedisLockStore' ? redis : postgres)

/** A store of `name` behind a fresh proxy, warmed up (connected, ready). */
async function behindProxy(name, options) {
  const proxy = await startProxy(serverOf(name).port)
  const store = STORES[name](proxy.port, options)
  cleanups.push(async () => {
    await store.close()
    await proxy.close()
  })
  assert.equal(await store.isLocked(uniqueKey('warm')), false)
  return { proxy, store }
}

for (const name of Object.keys(STORES)) {
  test(`${name}: a connection gone silent is replaced; the next commands go to a fresh one`, async () => {
    const { proxy, store } = await behindProxy(name, { commandTimeout: 400, connectTimeout: 2_000 })
    const key = uniqueKey('silent')
    assert.equal(await store.acquire(key, 'first', 30_000), true)
    proxy.silenceExisting()
    const connections = proxy.connections
    // Sent into the silence: no answer within the command timeout.
    await assert.rejects(store.isLocked(key), (e) => e.code === 'ERR_LOCK_STORE_TIMEOUT')
    // Given up: what comes next goes to a new connection, and is answered.
    assert.equal(await store.isLocked(key), true)
    assert.equal(await store.release(key, 'first'), true)
    assert.ok(proxy.connections > connections, 'a fresh connection was opened')
  })

  test(`${name}: commands waiting on a silent connection when it is given up are sent again on a fresh one`, async () => {
    const { proxy, store } = await behindProxy(name, { commandTimeout: 600, connectTimeout: 2_000 })
    proxy.silenceExisting()
    const first = store.isLocked(uniqueKey('lost'))
    // Sent 300 ms later: still waiting when the first times out and the connection is given up.
    await new Promise((resolve) => setTimeout(resolve, 300))
    const key = uniqueKey('resent')
    const second = store.acquire(key, 'owner', 30_000)
    await assert.rejects(first, (e) => e.code === 'ERR_LOCK_STORE_TIMEOUT')
    assert.equal(await second, true, 'answered on the fresh connection')
    assert.equal(await store.release(key, 'owner'), true)
  })

  test(`${name}: a waiter rides out a silent connection and gets the lock`, async () => {
    const { proxy, store } = await behindProxy(name, { commandTimeout: 300, connectTimeout: 2_000 })
    setLockStore(store)
    const key = uniqueKey('ride-out')
    proxy.silenceExisting()
    assert.equal(await lock(key, 10_000).acquire({ timeout: 5_000, retryDelay: 50 }), true)
    assert.equal(await store.isLocked(key), true)
  })

  test(`${name}: the command timeout holds for a command made as the first answer on a new connection arrives`, async () => {
    // connectTimeout is long and commandTimeout short: a command sent once the
    // connection is open is given commandTimeout, not what the first command
    // (which waited for the connection) was given.
    const proxy = await startProxy(serverOf(name).port)
    const store = STORES[name](proxy.port, { commandTimeout: 300, connectTimeout: 5_000 })
    cleanups.push(async () => {
      await store.close()
      await proxy.close()
    })
    const key = uniqueKey('chained')
    assert.equal(await store.isLocked(key), false)
    proxy.silenceExisting()
    const started = performance.now()
    await assert.rejects(store.isLocked(key), (e) => e.code === 'ERR_LOCK_STORE_TIMEOUT')
    const took = performance.now() - started
    assert.ok(took < 2_000, `timed out after ${Math.round(took)} ms, not about 300`)
  })

  test(`${name}: a server that stops reading for a while loses nothing; big requests wait for room`, async () => {
    const { proxy, store } = await behindProxy(name, { commandTimeout: 10_000 })
    // Keys as big as the store takes: PostgreSQL's text index takes ~2.7 KB, Redis anything.
    const size = name === 'RedisLockStore' ? 256 * 1024 : 2_000
    const keys = Array.from({ length: 64 }, (_, i) => `${i}:`.padEnd(size, 'k'))
    proxy.stopReading()
    const taken = Promise.all(keys.map((k) => store.acquire(k, 'owner', 30_000)))
    await new Promise((resolve) => setTimeout(resolve, 500))
    proxy.resumeReading()
    assert.deepEqual(await taken, keys.map(() => true))
    assert.deepEqual(await Promise.all(keys.map((k) => store.release(k, 'owner'))), keys.map(() => true))
  })

  test(`${name}: latency on the path changes nothing but the time`, async () => {
    const { proxy, store } = await behindProxy(name, { commandTimeout: 5_000 })
    proxy.latencyMs = 20
    setLockStore(store)
    const key = uniqueKey('latency')
    let inside = 0
    let most = 0
    const worker = async () => {
      for (let i = 0; i < 5; i++) {
        const [ran] = await lock(key, 5_000).run(
          async () => {
            most = Math.max(most, ++inside)
            await new Promise((resolve) => setTimeout(resolve, 2))
            inside--
          },
          { timeout: 10_000, retryDelay: 20 },
        )
        assert.equal(ran, true)
      }
    }
    await Promise.all(Array.from({ length: 4 }, worker))
    assert.equal(most, 1)
  })
}
