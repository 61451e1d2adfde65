// Waiting for a held lock, beyond what the store contract checks for every
// store (stores/contract.mjs: arrival order, woken by a release, no
// starvation, timeouts): MemoryLockStore handing a lapsing lock to a waiter;
// RedisLockStore woken by a release in another process (announced by
// pub/sub, followed only while waiting), or finding an unannounced one by its
// poll; stores that fail, answer late or never answer while waiters queue;
// and processes that wait, then exit.

import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { spawnSync } from 'node:child_process'
import { Redis } from 'ioredis'
import { lock, setLockStore, MemoryLockStore, RedisLockStore } from '@shaferllc/keel/core'
import { redisForTests, uniqueKey } from '../../support/servers.mjs'
import { runChild, startHolder, killHard } from '../helpers/processes.mjs'
import { eventually } from '../helpers/eventually.mjs'
import { MapLockStore, jsStoreOver } from '../helpers/js-stores.mjs'

const redis = await redisForTests()
const inspect = new Redis(redis.url)
const stores = []
const redisStore = () => {
  const s = new RedisLockStore(redis.url)
  stores.push(s)
  return s
}
after(async () => {
  for (const s of stores) await s.close()
  inspect.disconnect()
  await redis.close()
})

const SLOW_POLL = { retryDelay: 60_000 } // a waiter woken within the test was woken by the release

/** The shared Map store with its acquire replaced by `acquire(map, key, owner, ttlMs)`, which may call on to `map`. */
function mapStore(acquire) {
  const map = new MapLockStore()
  return { held: map.held, store: jsStoreOver(map, { acquire: (k, o, t) => acquire(map, k, o, t) }) }
}

/** A slow store: acquire looks at the lock, then answers 40 ms later. */
const slowStore = () =>
  mapStore(async (map, k, o, t) => {
    const free = !map.isLocked(k)
    await sleep(40)
    return free && map.acquire(k, o, t)
  }).store

test('MemoryLockStore: a waiter takes a lock that lapses at its TTL as it lapses, without a release', async () => {
  setLockStore(new MemoryLockStore())
  await lock('lapsing', 120).acquire()
  const started = Date.now()
  assert.equal(await lock('lapsing').acquire({ timeout: 5_000, ...SLOW_POLL }), true)
  const waited = Date.now() - started
  assert.ok(waited >= 100 && waited < 600, `waited ${waited} ms`)
})

test('MemoryLockStore: a newcomer does not jump the queue, even with acquireImmediately()', async () => {
  setLockStore(new MemoryLockStore())
  const holder = lock('queue')
  await holder.acquire()
  const waiting = lock('queue').acquire({ timeout: 5_000 })
  await holder.release() // handed to the waiter
  assert.equal(await lock('queue').acquireImmediately(), false)
  assert.equal(await waiting, true)
})

test('RedisLockStore: a release in another process hands the lock to a waiter here at once (told by pub/sub)', async () => {
  setLockStore(redisStore())
  const key = uniqueKey('announced')
  const env = { KEEL_TEST_STORE: 'redis', KEEL_TEST_REDIS: redis.url }
  const { serialized } = await runChild(env, 'take', key, '30000')
  const waiting = lock(key).acquire({ timeout: 20_000, ...SLOW_POLL })
  // While it waits, this process has its place in the key's line and follows its own channel.
  await eventually(async () => assert.equal(await inspect.zcard(`keel:waiting:{k:${key}}`), 1))
  assert.equal((await inspect.pubsub('CHANNELS', 'keel:wake:*')).length, 1)
  const released = Date.now()
  const result = await runChild(env, 'release', serialized)
  assert.equal(result.released, true)
  assert.equal(await waiting, true)
  assert.ok(Date.now() - released < 2_000, `woken ${Date.now() - released} ms after the release`)
  assert.equal(await inspect.zcard(`keel:waiting:{k:${key}}`), 0, 'out of line once it has the lock')
})

test("RedisLockStore: a release nobody announces (the docs' ioredis store) is found by the poll", async () => {
  setLockStore(redisStore())
  const key = uniqueKey('silent')
  const env = { KEEL_TEST_STORE: 'ioredis', KEEL_TEST_REDIS: redis.url }
  const { serialized } = await runChild(env, 'take', key, '30000')
  const waiting = lock(key).acquire({ timeout: 10_000, retryDelay: 50 })
  await sleep(100)
  assert.equal((await runChild(env, 'release', serialized)).released, true)
  assert.equal(await waiting, true)
})

test('RedisLockStore: a holder killed in another process: the waiter here gets the lock once the TTL passes', async () => {
  setLockStore(redisStore())
  const key = uniqueKey('killed-holder')
  const env = { KEEL_TEST_STORE: 'redis', KEEL_TEST_REDIS: redis.url }
  const { child } = await startHolder(env, 'hold', key, '500')
  await killHard(child)
  const started = Date.now()
  assert.equal(await lock(key).acquire({ timeout: 5_000, retryDelay: 25 }), true)
  assert.ok(Date.now() - started < 2_000)
})

test('a waiting acquire keeps the process alive until it ends, and then lets it exit', () => {
  const script = `
    const { lock } = require('@shaferllc/keel/core')
    lock('k').acquire().then(async () => {
      const got = await lock('k').acquire({ timeout: 300, retryDelay: 100000 })
      console.log(got)
    })
  `
  const started = Date.now()
  const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 10_000 })
  assert.equal(r.stdout.trim(), 'false', r.stderr)
  const took = Date.now() - started
  assert.ok(took >= 300 && took < 5_000, `exited after ${took} ms`)
})

test('a store that fails while a waiter retries rejects that waiter with its error; the next is served', async () => {
  let failNext = false
  const boom = new Error('store went away')
  setLockStore(
    mapStore((map, k, o, t) => {
      if (failNext) {
        failNext = false
        throw boom
      }
      return map.acquire(k, o, t)
    }).store,
  )
  const holder = lock('flaky')
  await holder.acquire()
  const first = lock('flaky').acquire({ timeout: 5_000, ...SLOW_POLL })
  const second = lock('flaky').acquire({ timeout: 5_000, ...SLOW_POLL })
  failNext = true
  await holder.release()
  await assert.rejects(first, (e) => e === boom)
  assert.equal(await second, true)
})

test("a release that lands while the first waiter's attempt is in flight still wakes it", async () => {
  setLockStore(slowStore())
  const holder = lock('slow')
  await holder.acquire()
  const first = lock('slow').acquire({ timeout: 30, ...SLOW_POLL })
  const second = lock('slow').acquire({ timeout: 10_000, ...SLOW_POLL })
  // `first` times out at 30 ms, so `second` starts an attempt that will answer "held"...
  assert.equal(await first, false)
  await sleep(10)
  // ...and the release arrives while it is in flight.
  const released = Date.now()
  await holder.release()
  assert.equal(await second, true)
  assert.ok(Date.now() - released < 1_000, `woken ${Date.now() - released} ms after the release`)
})

/** A store over a Map whose acquire can be made to hang (never settle) or to answer late. */
function stallingStore() {
  const control = { mode: 'normal' }
  const { held, store } = mapStore((map, k, o, t) => {
    if (control.mode === 'hang') return new Promise(() => {})
    if (control.mode === 'late') return sleep(300).then(() => map.acquire(k, o, t))
    return map.acquire(k, o, t)
  })
  return Object.assign(control, { held, store })
}

test('a store that never answers: acquire({ timeout }) still gives up on time', async () => {
  const c = stallingStore()
  setLockStore(c.store)
  c.mode = 'hang'
  const started = Date.now()
  assert.equal(await lock('hung').acquire({ timeout: 120 }), false)
  const waited = Date.now() - started
  assert.ok(waited >= 110 && waited < 1_000, `waited ${waited} ms`)
})

test('an answer that comes after the caller gave up is given back, not kept', async () => {
  const c = stallingStore()
  setLockStore(c.store)
  c.mode = 'late'
  assert.equal(await lock('late').acquire({ timeout: 100 }), false)
  await sleep(350) // the store took it at 300 ms
  assert.equal(c.held.size, 0, 'the late acquisition was released')
})

test('a queued waiter whose attempt never settles gives up on time, and the next one is served', async () => {
  const c = stallingStore()
  setLockStore(c.store)
  const holder = lock('stuck')
  await holder.acquire()
  const first = lock('stuck').acquire({ timeout: 150, ...SLOW_POLL })
  const second = lock('stuck').acquire({ timeout: 5_000, ...SLOW_POLL })
  c.mode = 'hang'
  await holder.release() // wakes `first`, whose attempt now hangs
  c.mode = 'normal'
  assert.equal(await first, false)
  assert.equal(await second, true)
})

test('a process waiting on a store that never answers still exits once its timeout passes', () => {
  const script = `
    const { lock, setLockStore } = require('@shaferllc/keel/core')
    const never = () => new Promise(() => {})
    setLockStore({ acquire: never, release: never, extend: never, isLocked: never, remainingTime: never })
    lock('k').acquire({ timeout: 200 }).then((got) => console.log(got))
  `
  const started = Date.now()
  const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 10_000 })
  assert.equal(r.stdout.trim(), 'false', r.stderr)
  assert.ok(Date.now() - started < 5_000)
})

test("a release that lands while a newcomer's first attempt is in flight wakes it too", async () => {
  setLockStore(slowStore())
  const holder = lock('slow-newcomer')
  await holder.acquire()
  const waiting = lock('slow-newcomer').acquire({ timeout: 10_000, ...SLOW_POLL })
  await sleep(10) // its first attempt has looked (held) and not yet answered
  const released = Date.now()
  await holder.release()
  assert.equal(await waiting, true)
  assert.ok(Date.now() - released < 1_000, `woken ${Date.now() - released} ms after the release`)
})
