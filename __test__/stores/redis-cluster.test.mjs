// RedisLockStore on a Redis Cluster this file creates (3 masters, 3 replicas,
// redis-server --cluster-enabled + redis-cli --cluster create): the whole
// store contract (contract.mjs), across processes too; then what is the
// cluster's own: options, keys spread across the masters, fencing counters
// kept one per hash slot, connections killed on every node, announced
// releases, and a master killed mid-run with its replica taking over.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { Cluster } from 'ioredis'
import { lock, semaphore, writeLock, setLockStore, RedisLockStore } from '@shaferllc/keel/core'
import { startCluster, uniqueKey } from '../../support/servers.mjs'
import { openStore } from '../helpers/stores.mjs'
import { storeContract } from './contract.mjs'
import { describeWith } from '../helpers/tools.mjs'

describeWith(['redis-cli'], 'RedisLockStore on a Redis Cluster of its own', () => {
  let cluster
  const stores = []
  const store = (options = {}) => {
    const s = new RedisLockStore({ cluster: cluster.urls, connectTimeout: 2_000, commandTimeout: 2_000, ...options })
    stores.push(s)
    return s
  }
  before(async () => {
    cluster = await startCluster()
  })
  after(async () => {
    for (const s of stores) await s.close()
    await cluster?.close()
  })

  // First, while every master is up: the failover test below kills one.
  storeContract('RedisLockStore on a Redis Cluster', {
    async open() {
      const opened = await openStore({
        KEEL_TEST_STORE: 'redis-cluster',
        KEEL_TEST_REDIS_CLUSTER: cluster.urls.join(' '),
        KEEL_TEST_COMMAND_TIMEOUT: '2000',
      })
      const inspect = new Cluster(cluster.nodes.map((n) => ({ host: '127.0.0.1', port: n.port })))
      return {
        ...opened,
        deleteKey: (key) => inspect.del(key),
        async close() {
          await opened.close()
          inspect.disconnect()
        },
      }
    },
    pings: true,
    fencing: true,
    processes: true,
    semaphores: 'native',
    readWrite: true,
    announcesReleases: true,
    anyKey: true,
  })

  test('options: a list of node URLs, or { cluster }; malformed ones are TypeErrors', () => {
    assert.ok(new RedisLockStore(['redis://127.0.0.1:1', 'redis://127.0.0.1:2']))
    assert.ok(new RedisLockStore({ cluster: ['redis://127.0.0.1:1'], prefix: 'locks:' }))
    for (const [options, message] of [
      [{ cluster: [] }, /options\.cluster must list at least one node URL/],
      [{ cluster: 'redis://x' }, /options\.cluster must be an array of node URLs/],
      [{ cluster: [6379] }, /options\.cluster must be an array of node URLs/],
      [{ url: 'redis://a', cluster: ['redis://b'] }, /not both/],
      [{ cluster: ['http://x'] }, /not a Redis URL/],
    ]) {
      assert.throws(() => new RedisLockStore(options), (e) => e instanceof TypeError && message.test(e.message))
    }
  })

  test('the lock API over keys spread across every master; two clients exclude each other', async () => {
    const a = setLockStore(store())
    const b = store()
    const keys = Array.from({ length: 30 }, (_, i) => uniqueKey(`spread-${i}`))
    const masters = new Set(keys.map((k) => cluster.masterOf(k).port))
    assert.equal(masters.size, 3, 'the keys land on all three masters')
    for (const key of keys) {
      const l = lock(key, 5_000)
      assert.equal(await l.acquire(), true)
      assert.equal(await b.acquire(key, 'other client', 5_000), false)
      assert.equal(await b.isLocked(key), true)
      const left = await b.remainingTime(key)
      assert.ok(left > 4_000 && left <= 5_000, `remaining ${left}`)
      await l.extend(10_000)
      assert.ok((await a.remainingTime(key)) > 5_000)
      assert.equal(await l.release(), true)
      assert.equal(await b.isLocked(key), false)
    }
    // Hash-tagged keys share a slot, and so a master.
    const [ran, value] = await lock('{tenant-7}:invoice').run(async () => {
      assert.equal(await b.acquire('{tenant-7}:invoice', 'other', 1_000), false)
      return 'tagged'
    })
    assert.deepEqual([ran, value], [true, 'tagged'])
  })

  test('fencing counters stay bounded on the cluster: at most one per hash slot in use, each in its slot', async () => {
    const prefix = `${uniqueKey('bounded')}:`
    setLockStore(store({ prefix }))
    const keys = Array.from({ length: 400 }, (_, i) => `invoice:${i}`)
    const last = new Map()
    for (let round = 0; round < 2; round++) {
      await Promise.all(
        keys.map((key) =>
          lock(key).run(async (l) => {
            assert.ok(l.fencingToken > (last.get(key) ?? 0), `${key}: tokens grow`)
            last.set(key, l.fencingToken)
          }),
        ),
      )
    }
    const left = cluster.keys(`${prefix}*`)
    const slots = new Set(cluster.slotsOf(keys.map((k) => `${prefix}${k}`)))
    assert.ok(left.length > 0 && left.length <= slots.size, `${left.length} keys left for ${slots.size} slots`)
    for (const counter of left) assert.match(counter, /:keel:fencing-counter:\{\d+\}$/)
    assert.equal(new Set(cluster.slotsOf(left)).size, left.length, 'one counter per slot')
  })

  test("a semaphore's and a read-write key's data share one slot; a prefix that would part them is refused", async () => {
    const cases = [
      ['app{tenant-1}:', true],
      ['app{:', true],
      ['app{}:', false],
    ]
    for (const [prefix, usable] of cases) {
      setLockStore(store({ prefix }))
      const permit = semaphore(uniqueKey('slots'), 2)
      const writer = writeLock(uniqueKey('slots'))
      if (usable) {
        assert.equal(await permit.acquire(), true, prefix)
        assert.equal(await writer.acquire(), true, prefix)
        assert.equal(await permit.release(), true)
        assert.equal(await writer.release(), true)
      } else {
        await assert.rejects(permit.acquire(), (e) => e instanceof TypeError && e.message.includes('different slots'), prefix)
        await assert.rejects(writer.acquire(), TypeError)
      }
    }
  })

  test('every node kills the store connections (CLIENT KILL): the next run() works and releases', async () => {
    const s = setLockStore(store())
    const key = uniqueKey('killed')
    assert.deepEqual(await lock(key).run(() => 1), [true, 1])
    for (let i = 0; i < 2; i++) {
      cluster.killClients()
      assert.deepEqual(await lock(key).run(() => 2), [true, 2])
      assert.equal(await s.isLocked(key), false)
    }
  })

  test('a release by another client is announced across the cluster: a waiter is woken long before its poll', async () => {
    const holder = store()
    setLockStore(store())
    const key = uniqueKey('wake')
    assert.equal(await holder.acquire(key, 'holder', 30_000), true)
    const started = Date.now()
    const waiting = lock(key, 5_000).acquire({ timeout: 20_000, retryDelay: 60_000 })
    await sleep(500) // the waiter subscribes meanwhile
    assert.equal(await holder.release(key, 'holder'), true)
    assert.equal(await waiting, true)
    const took = Date.now() - started
    assert.ok(took < 10_000, `woken after ${took} ms; the poll alone would take 60000`)
  })

  test("a master killed mid-run: its replica takes over, a replicated lock survives, the same store goes on", async () => {
    const a = store()
    const b = store()
    const key = uniqueKey('failover')
    setLockStore(a)
    const held = lock(key, 60_000)
    assert.equal(await held.acquire(), true)
    const before = held.fencingToken
    // Replication is asynchronous: wait until the replica has the lock.
    const owner = JSON.parse(held.serialize()).owner
    await cluster.replicated(key, owner)
    const killed = await cluster.killMasterOf(key)
    // During the failover operations fail with a store error (or succeed once
    // the replica is promoted); none hangs past its bound, none takes the lock.
    const started = Date.now()
    const during = await b.acquire(key, 'intruder', 60_000).then(
      (got) => ({ got }),
      (error) => ({ error }),
    )
    if (during.error) assert.match(during.error.code, /^ERR_LOCK_STORE_/, during.error.message)
    else assert.equal(during.got, false, 'the replicated lock is still held')
    assert.ok(Date.now() - started < 10_000)
    const promoted = await cluster.failedOver(key, killed)
    assert.notEqual(promoted, killed, 'a replica was promoted')
    // Eventually the promoted replica answers for the same stores.
    let held2
    for (let i = 0; i < 50; i++) {
      held2 = await b.isLocked(key).catch(() => undefined)
      if (held2 !== undefined) break
      await sleep(200)
    }
    assert.equal(held2, true, 'the lock reached the replica before the crash, and survived it')
    assert.equal(await b.acquire(key, 'intruder', 60_000), false)
    assert.equal(await held.release(), true, "the holder's release works on the new master")
    const after = await lock(key).run(async (l) => l.fencingToken)
    assert.equal(after[0], true)
    assert.ok(after[1] > before, `token ${after[1]} after ${before}`)
  })
})
