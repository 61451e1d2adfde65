// The same behaviour from every store: MemoryLockStore, RedisLockStore, and
// the docs' ioredis and database stores (SQLite and PostgreSQL), each against
// a real server. What a user sees through lock() must not depend on the store.

import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { lock, restoreLock, setLockStore, MemoryLockStore, LockNotHeldError } from '@shaferllc/keel/core'
import { redisForTests, postgresForTests, uniqueKey } from './helpers/servers.mjs'
import { STORES, openStore } from './helpers/stores.mjs'

const dir = mkdtempSync(join(tmpdir(), 'keel-contract-'))
const redis = await redisForTests()
const postgres = await postgresForTests()
process.env.REDIS_URL = redis.url

const opened = new Map()
async function use(kind) {
  if (kind === 'memory') return setLockStore(new MemoryLockStore())
  process.env.KEEL_TEST_DATABASE = kind === 'postgres' ? postgres.url : `sqlite:${join(dir, 'locks.db')}`
  if (!opened.has(kind)) opened.set(kind, await openStore(kind))
  return setLockStore(opened.get(kind).store)
}

after(async () => {
  for (const s of opened.values()) await s.close()
  await redis.close()
  await postgres.close()
  rmSync(dir, { recursive: true, force: true })
})

for (const [kind, label] of Object.entries({ memory: 'MemoryLockStore', ...STORES })) {
  test(`${label}: acquire, isLocked, getRemainingTime, extend, release`, async () => {
    await use(kind)
    const key = uniqueKey('invoice')
    const l = lock(key, 2_000)
    assert.equal(await l.isLocked(), false)
    assert.equal(await l.getRemainingTime(), null)
    assert.equal(await l.acquire(), true)
    assert.equal(await l.isLocked(), true)
    const left = await l.getRemainingTime()
    assert.ok(left > 1_000 && left <= 2_000, `remaining ${left}`)
    assert.equal(await lock(key).acquireImmediately(), false, 'a second owner is refused')
    await l.extend(20_000)
    assert.ok((await l.getRemainingTime()) > 10_000)
    assert.equal(await l.isExpired(), false)
    assert.equal(await l.release(), true)
    assert.equal(await l.release(), false, 'a second release is a no-op')
    assert.equal(await l.isLocked(), false)
    await assert.rejects(l.extend(), LockNotHeldError)
  })

  test(`${label}: run() holds the lock for the callback and frees it after, even on a throw`, async () => {
    await use(kind)
    const key = uniqueKey('send')
    const [ran, value] = await lock(key).run(async () => {
      assert.equal(await lock(key).isLocked(), true)
      return 'sent'
    })
    assert.deepEqual([ran, value], [true, 'sent'])
    assert.equal(await lock(key).isLocked(), false)
    await assert.rejects(
      lock(key).run(async () => {
        throw new Error('boom')
      }),
      { message: 'boom' },
    )
    assert.equal(await lock(key).isLocked(), false)
  })

  test(`${label}: a waiter gets the lock when the holder releases, and gives up at its timeout`, async () => {
    await use(kind)
    const key = uniqueKey('migrate')
    const holder = lock(key, 10_000)
    assert.equal(await holder.acquire(), true)
    const started = Date.now()
    assert.equal(await lock(key).acquire({ timeout: 150, retryDelay: 20 }), false)
    assert.ok(Date.now() - started >= 140, 'waited for its timeout')
    const waiting = lock(key).acquire({ timeout: 5_000, retryDelay: 10 })
    await sleep(60)
    await holder.release()
    assert.equal(await waiting, true)
  })

  test(`${label}: an expired lock is free, and its old owner can neither extend nor release it`, async () => {
    await use(kind)
    const key = uniqueKey('expiring')
    const a = lock(key, 200)
    assert.equal(await a.acquire(), true)
    await sleep(350)
    assert.equal(await lock(key).isLocked(), false)
    assert.equal(await lock(key).getRemainingTime(), null)
    const b = lock(key, 10_000)
    assert.equal(await b.acquire(), true)
    assert.equal(await a.release(), false)
    await assert.rejects(a.extend(), LockNotHeldError)
    assert.equal(await a.isExpired(), true)
    assert.equal(await b.isLocked(), true)
    assert.equal(await b.release(), true)
  })

  test(`${label}: keys are exact: unicode, long, and similar keys do not collide`, async () => {
    await use(kind)
    const base = uniqueKey('k')
    const keys = [`${base}`, `${base} `, `${base}:é`, `${base}:🔒`, `${base}:${'x'.repeat(2_000)}`]
    const locks = keys.map((k) => lock(k, 5_000))
    for (const l of locks) assert.equal(await l.acquire(), true, l.key.slice(0, 30))
    for (const l of locks) assert.equal(await l.release(), true)
  })

  test(`${label}: a fractional TTL is held for whole milliseconds, rounded up`, async () => {
    await use(kind)
    const key = uniqueKey('fraction')
    const l = lock(key, 1_500.5)
    assert.equal(await l.acquire(), true)
    assert.equal(await lock(key).acquireImmediately(), false)
    const left = await l.getRemainingTime()
    assert.ok(left > 1_000 && left <= 1_501, `remaining ${left}`)
    await l.extend(2_500.2)
    assert.ok((await l.getRemainingTime()) > 2_000)
    assert.deepEqual(await lock(key, 0.5).run(() => 'ran'), [false, undefined])
    assert.equal(await l.release(), true)
    assert.deepEqual(await lock(key, 0.5).run(() => 'ran'), [true, 'ran'])
  })

  test(`${label}: a serialized lock restored in the same process acts as the same owner`, async () => {
    await use(kind)
    const key = uniqueKey('import')
    const l = lock(key, 5_000)
    await l.acquire()
    const copy = restoreLock(l.serialize())
    await copy.extend(9_000)
    assert.ok((await l.getRemainingTime()) > 5_000)
    assert.equal(await copy.release(), true)
    assert.equal(await l.isLocked(), false)
  })
}
