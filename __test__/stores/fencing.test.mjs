// Fencing tokens beyond the store contract (contract.mjs checks that they
// grow per key, across expiry and handles, for every store that gives them):
// through RedisLockStore they grow in acquisition order across processes,
// after a lock lapsed and after the server restarts (with persistence), every
// acquisition carries one under load, and one counter is all that stays; a JS
// store opts in with fencingToken(key, owner), and without it the token is null.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { lock, setLockStore, MemoryLockStore, RedisLockStore } from '@shaferllc/keel/core'
import { startRedis, uniqueKey } from '../../support/servers.mjs'
import { jsStoreOver } from '../helpers/js-stores.mjs'

const exec = promisify(execFile)
const servers = []
after(async () => {
  for (const s of servers) await s.close()
})
const increasing = (tokens) => tokens.every((t, i) => i === 0 || t > tokens[i - 1])

async function redisServer(args = []) {
  const server = await startRedis({ args })
  servers.push(server)
  return server
}

test('Redis: strictly growing in acquisition order across 3 processes sharing a key', async () => {
  const server = await redisServer()
  const key = uniqueKey('fenced')
  const script = `
    const { lock, setLockStore, RedisLockStore } = require('@shaferllc/keel/core');
    const { Redis } = require('ioredis');
    const store = setLockStore(new RedisLockStore(process.env.KEEL_TEST_REDIS));
    const log = new Redis(process.env.KEEL_TEST_REDIS);
    (async () => {
      for (let i = 0; i < 20; i++) {
        const [ran] = await lock(process.env.KEY, 5000).run(async (l) => {
          // Under the lock, so the list's order is the order of the holds.
          await log.rpush(process.env.KEY + ':log', String(l.fencingToken));
        }, { timeout: 20000 });
        if (!ran) throw new Error('timed out');
      }
      await store.close();
      log.disconnect();
    })();`
  const env = { ...process.env, KEEL_TEST_REDIS: server.url, KEY: key }
  await Promise.all([1, 2, 3].map(() => exec(process.execPath, ['-e', script], { env, timeout: 60_000 })))
  const inspect = new Redis(server.url)
  const logged = (await inspect.lrange(`${key}:log`, 0, -1)).map(Number)
  inspect.disconnect()
  assert.equal(logged.length, 60)
  assert.ok(increasing(logged), `not strictly increasing: ${logged.join(' ')}`)
})

test('Redis: a lapsed lock and a restarted server (with persistence) still give larger tokens', async () => {
  const server = await redisServer(['--appendonly', 'yes', '--appendfsync', 'always'])
  const key = uniqueKey('restart')
  let store = setLockStore(new RedisLockStore({ url: server.url, commandTimeout: 2_000 }))
  const tokens = []
  const take = async (ttl) => {
    const l = lock(key, ttl)
    assert.equal(await l.acquire({ timeout: 5_000 }), true)
    tokens.push(l.fencingToken)
    return l
  }
  await (await take(5_000)).release()
  await take(50) // left to lapse
  await sleep(100)
  await take(50)
  await store.close()
  await server.stop()
  await server.start()
  store = setLockStore(new RedisLockStore({ url: server.url, commandTimeout: 2_000 }))
  await sleep(100)
  await (await take(5_000)).release()
  await store.close()
  assert.equal(tokens.length, 4)
  assert.ok(increasing(tokens), tokens.join(' '))
})

test('a JS store opts in with fencingToken(key, owner); without it the token is null', async () => {
  const memory = new MemoryLockStore()
  const counters = new Map()
  const given = new Map()
  const base = jsStoreOver(memory, {
    acquire: async (k, o, t) => {
      const ok = await memory.acquire(k, o, t)
      if (ok) {
        counters.set(k, (counters.get(k) ?? 0n) + 1n)
        given.set(o, counters.get(k))
      }
      return ok
    },
  })
  setLockStore(base)
  assert.deepEqual(await lock('plain').run(async (l) => l.fencingToken), [true, null])

  setLockStore({ ...base, fencingToken: async (k, o) => given.get(o) })
  const [, first] = await lock('js').run(async (l) => l.fencingToken)
  const [, second] = await lock('js').run(async (l) => l.fencingToken)
  assert.equal(typeof first, 'bigint')
  assert.ok(second > first)

  setLockStore({ ...base, fencingToken: (k, o) => Number(given.get(o)) })
  const [, sync] = await lock('js').run(async (l) => l.fencingToken)
  assert.equal(sync, 3)

  // A store whose fencingToken fails or answers garbage: the acquire fails, and the lock is given
  // back, whether the acquire would have waited or not.
  for (const fencingToken of [() => 'seven', async () => -1, () => { throw new Error('no token') }, async () => { throw new Error('no token') }]) {
    setLockStore({ ...base, fencingToken })
    for (const options of [undefined, { timeout: 1_000 }]) {
      await assert.rejects(lock('bad').acquire(options), /fencingToken must return a non-negative integer|no token/)
      await sleep(5)
      assert.equal(await memory.isLocked('bad'), false, 'given back')
    }
  }
})

test('Redis: every acquisition carries its token, under load and a stalled JS thread, with direct store calls mixed in', async () => {
  const server = await redisServer()
  const store = setLockStore(new RedisLockStore(server.url))
  try {
    const handles = Array.from({ length: 5_000 }, (_, i) => lock(`many:${i}`, 60_000))
    const taken = handles.map((h) => h.acquire())
    // Direct acquires nobody asks a token of, in the same batches.
    const direct = Array.from({ length: 5_000 }, (_, i) => store.acquire(`direct:${i}`, `owner-${i}`, 60_000))
    const stallUntil = Date.now() + 100
    while (Date.now() < stallUntil); // replies pile up while the JS thread is busy
    assert.ok((await Promise.all(taken)).every(Boolean))
    assert.ok((await Promise.all(direct)).every(Boolean))
    const tokens = handles.map((h) => h.fencingToken)
    assert.equal(tokens.filter((t) => t === null).length, 0, 'no hold without its token')
    assert.equal(new Set(tokens).size, tokens.length, 'one token per acquisition')
    await Promise.all(handles.map((h) => h.release()))
  } finally {
    await store.close()
  }
})

test('Redis: what stays once every lock is released is one counter, however many keys were locked', async () => {
  const server = await redisServer()
  const store = setLockStore(new RedisLockStore(server.url))
  const inspect = new Redis(server.url)
  try {
    const tokens = new Map()
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < 2_000; i += 200) {
        await Promise.all(
          Array.from({ length: 200 }, (_, j) =>
            lock(`invoice:${i + j}`).run(async (l) => {
              const before = tokens.get(l.key) ?? 0
              assert.ok(l.fencingToken > before, `${l.key}: ${l.fencingToken} > ${before}`)
              tokens.set(l.key, l.fencingToken)
            }),
          ),
        )
      }
    }
    assert.equal(tokens.size, 2_000)
    // run() ends once its release is written; the store's next command,
    // behind them all, is answered once the server has run every one.
    assert.equal(await store.isLocked('invoice:0'), false)
    assert.deepEqual(await inspect.keys('*'), ['keel:fencing-counter'])
    assert.equal(await inspect.ttl('keel:fencing-counter'), -1, 'the counter never expires')
    // A huge key leaves nothing of its size behind.
    const huge = `k${'x'.repeat(1_000_000)}`
    await lock(huge).run(() => {})
    assert.equal(await store.isLocked(huge), false)
    assert.equal(await inspect.dbsize(), 1)
    // A prefixed store keeps its counter under its prefix.
    const prefixed = setLockStore(new RedisLockStore({ url: server.url, prefix: 'app:' }))
    await lock('p').run(() => {})
    await prefixed.close() // once the release is answered
    assert.deepEqual((await inspect.keys('*')).sort(), ['app:keel:fencing-counter', 'keel:fencing-counter'])
  } finally {
    inspect.disconnect()
    await store.close()
  }
})
