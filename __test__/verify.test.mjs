// verifyLockStore: passes every store this package ships or documents (each
// against a real server), and catches the two classic broken stores (a
// get-then-set acquire, a release that deletes without comparing owners), a
// store that fails or never answers, and one that answers the wrong types;
// it reports, it never throws for a failing store.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { verifyLockStore, MemoryLockStore } from '@shaferllc/keel/core'
import { redisForTests, postgresForTests } from './helpers/servers.mjs'
import { STORES, openStore } from './helpers/stores.mjs'

const dir = mkdtempSync(join(tmpdir(), 'keel-verify-'))
const redis = await redisForTests()
const postgres = await postgresForTests()
process.env.REDIS_URL = redis.url
const opened = []
after(async () => {
  for (const s of opened) await s.close()
  await redis.close()
  await postgres.close()
  rmSync(dir, { recursive: true, force: true })
})

const failed = (report) => report.checks.filter((c) => !c.ok).map((c) => c.name)
const detail = (report, part) => report.checks.find((c) => c.name.includes(part))?.detail

test('MemoryLockStore passes every check', async () => {
  const report = await verifyLockStore(new MemoryLockStore())
  assert.equal(report.ok, true, JSON.stringify(report, null, 2))
  assert.equal(report.checks.length, 7)
  assert.ok(report.checks.every((c) => c.ok && typeof c.detail === 'string' && c.name.length > 0))
})

for (const [kind, label] of Object.entries(STORES)) {
  test(`${label} passes every check`, async () => {
    process.env.KEEL_TEST_DATABASE = kind === 'postgres' ? postgres.url : `sqlite:${join(dir, 'locks.db')}`
    const store = await openStore(kind)
    opened.push(store)
    const report = await verifyLockStore(store.store)
    assert.equal(report.ok, true, JSON.stringify(report, null, 2))
  })
}

/** A Map store with a round trip (an await) between each read and write, like a networked one. */
function mapStore({ atomicAcquire = true, compareOnRelease = true } = {}) {
  const held = new Map()
  const live = (k) => {
    const e = held.get(k)
    if (e && e.until <= Date.now()) held.delete(k)
    return held.get(k)
  }
  const trip = () => sleep(1)
  return {
    async acquire(k, owner, ttlMs) {
      if (atomicAcquire) {
        if (live(k)) return false
        held.set(k, { owner, until: Date.now() + ttlMs })
        return true
      }
      const seen = live(k) // get ...
      await trip()
      if (seen) return false
      held.set(k, { owner, until: Date.now() + ttlMs }) // ... then set: two callers both win
      return true
    },
    async release(k, owner) {
      await trip()
      const e = live(k)
      if (!e || (compareOnRelease && e.owner !== owner)) return false
      return held.delete(k)
    },
    async extend(k, owner, ttlMs) {
      await trip()
      const e = live(k)
      if (!e || e.owner !== owner) return false
      e.until = Date.now() + ttlMs
      return true
    },
    async isLocked(k) {
      return live(k) !== undefined
    },
    async remainingTime(k) {
      const e = live(k)
      return e ? e.until - Date.now() : null
    },
  }
}

test('a correct store with round trips passes (the broken ones below differ in one method)', async () => {
  const report = await verifyLockStore(mapStore())
  assert.equal(report.ok, true, JSON.stringify(report, null, 2))
})

test('a get-then-set acquire fails the atomic check, naming how many won', async () => {
  const report = await verifyLockStore(mapStore({ atomicAcquire: false }))
  assert.equal(report.ok, false)
  assert.ok(failed(report).includes('acquire is atomic: of racing owners exactly one wins'), failed(report).join('; '))
  assert.match(detail(report, 'atomic'), /round 1: (\d+) of 20 racing acquires of one key answered true/)
})

test('a release that deletes without comparing owners fails the ownership check', async () => {
  const report = await verifyLockStore(mapStore({ compareOnRelease: false }))
  assert.equal(report.ok, false)
  assert.deepEqual(failed(report), [
    "release acts only for the owner: another owner's release frees nothing",
    'the TTL is honoured, and isLocked is false once it passed',
  ])
  assert.match(detail(report, 'release acts'), /B's release of A's lock answered true/)
})

test('a store that ignores the TTL, or never lets go, fails the TTL check', async () => {
  const forever = { ...mapStore(), acquire: undefined }
  const inner = mapStore()
  forever.acquire = (k, o) => inner.acquire(k, o, 3_600_000)
  Object.assign(forever, { release: inner.release, extend: inner.extend, isLocked: inner.isLocked, remainingTime: inner.remainingTime })
  const report = await verifyLockStore(forever)
  assert.equal(report.ok, false)
  assert.ok(failed(report).some((n) => n.startsWith('the TTL is honoured')), failed(report).join('; '))
})

test('it never throws for a failing store: throws, rejects, wrong types, no answer, missing methods', async () => {
  const throwing = { acquire() { throw new Error('boom') }, release() { throw new Error('boom') }, extend() { throw new Error('boom') }, isLocked() { throw new Error('boom') }, remainingTime() { throw new Error('boom') } }
  const r1 = await verifyLockStore(throwing)
  assert.equal(r1.ok, false)
  assert.match(detail(r1, 'nobody holds'), /isLocked\(".*free"\) failed: boom/)

  const wrongTypes = { ...mapStore(), acquire: async () => 'OK', isLocked: async () => 1 }
  const r2 = await verifyLockStore(wrongTypes)
  assert.equal(r2.ok, false)
  assert.match(detail(r2, 'nobody holds'), /answered 1, not a boolean/)
  assert.match(detail(r2, 'atomic'), /answered "OK", not a boolean/)

  const silent = { ...mapStore(), isLocked: () => new Promise(() => {}) }
  const started = Date.now()
  const r3 = await verifyLockStore(silent, { callTimeout: 100 })
  assert.equal(r3.ok, false)
  assert.match(detail(r3, 'nobody holds'), /did not answer within 100 ms/)
  assert.ok(Date.now() - started < 10_000)

  const r4 = await verifyLockStore({ acquire() {}, release() {} })
  assert.deepEqual(r4, { ok: false, checks: [{ name: 'has the five LockStore methods', ok: false, detail: 'missing extend, isLocked, remainingTime' }] })

  await assert.rejects(verifyLockStore(null), TypeError)
  await assert.rejects(verifyLockStore(new MemoryLockStore(), { ttl: 5 }), /unknown option ttl/)
  await assert.rejects(verifyLockStore(new MemoryLockStore(), { ttlMs: 10 }), RangeError)
})
