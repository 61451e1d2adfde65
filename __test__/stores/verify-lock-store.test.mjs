// verifyLockStore catches broken stores: the two classic ones (a get-then-set
// acquire, a release that deletes without comparing owners), one that ignores
// the TTL, and stores that throw, answer the wrong types, never answer or lack
// methods; it reports, it never throws for a failing store. A store with
// read-write methods gets their checks too, and the broken ones fail them.
// That it passes every correct store is part of the store contract (contract.mjs).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { verifyLockStore, MemoryLockStore } from '@shaferllc/keel/core'
import { AsyncMapLockStore, MapLockStore, AsyncMapReadWriteStore, jsStoreOver } from '../helpers/js-stores.mjs'

const failed = (report) => report.checks.filter((c) => !c.ok).map((c) => c.name)
const detail = (report, part) => report.checks.find((c) => c.name.includes(part))?.detail

/**
 * The shared Map store with a round trip (an await) between each read and
 * write, like a networked one; `atomicAcquire: false` makes its acquire
 * get-then-set, `compareOnRelease: false` its release delete whoever holds the key.
 */
function mapStore({ atomicAcquire = true, compareOnRelease = true } = {}) {
  const map = new AsyncMapLockStore()
  const trip = () => sleep(1)
  const getThenSet = async (k, owner, ttlMs) => {
    const seen = map.entry(k) // get ...
    await trip()
    if (seen) return false
    map.held.set(k, { owner, expiresAt: Date.now() + ttlMs }) // ... then set: two callers both win
    return true
  }
  return jsStoreOver(map, {
    ...(atomicAcquire ? {} : { acquire: getThenSet }),
    async release(k, owner) {
      await trip()
      if (compareOnRelease) return map.release(k, owner)
      return map.entry(k) !== undefined && map.held.delete(k)
    },
    async extend(k, owner, ttlMs) {
      await trip()
      return map.extend(k, owner, ttlMs)
    },
  })
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
  const inner = mapStore()
  const forever = jsStoreOver(inner, { acquire: (k, o) => inner.acquire(k, o, 3_600_000) })
  const report = await verifyLockStore(forever)
  assert.equal(report.ok, false)
  assert.ok(failed(report).some((n) => n.startsWith('the TTL is honoured')), failed(report).join('; '))
})

test('it never throws for a failing store: throws, rejects, wrong types, no answer, missing methods', async () => {
  const throwing = { acquire() { throw new Error('boom') }, release() { throw new Error('boom') }, extend() { throw new Error('boom') }, isLocked() { throw new Error('boom') }, remainingTime() { throw new Error('boom') } }
  const r1 = await verifyLockStore(throwing)
  assert.equal(r1.ok, false)
  assert.match(detail(r1, 'nobody holds'), /isLocked\(".*free"\) failed: boom/)

  const wrongTypes = jsStoreOver(mapStore(), { acquire: async () => 'OK', isLocked: async () => 1 })
  const r2 = await verifyLockStore(wrongTypes)
  assert.equal(r2.ok, false)
  assert.match(detail(r2, 'nobody holds'), /answered 1, not a boolean/)
  assert.match(detail(r2, 'atomic'), /answered "OK", not a boolean/)

  const silent = jsStoreOver(mapStore(), { isLocked: () => new Promise(() => {}) })
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

test('a store with the read-write methods gets their checks, and passes when it keeps them', async () => {
  const plain = await verifyLockStore(new MapLockStore())
  assert.deepEqual(plain.checks.filter((c) => c.name.startsWith('read-write')), [], 'none for a store without them')
  const report = await verifyLockStore(new AsyncMapReadWriteStore())
  assert.equal(report.ok, true, JSON.stringify(report, null, 2))
  assert.equal(report.checks.filter((c) => c.name.startsWith('read-write: ')).length, 5)
})

test('a store with some read-write methods is told which it lacks, and their checks stop there', async () => {
  const partial = Object.assign(new AsyncMapReadWriteStore(), { readersWait: undefined, withdrawWriter: undefined })
  const report = await verifyLockStore(partial)
  assert.equal(report.ok, false)
  assert.deepEqual(failed(report), ['read-write: has all eight read-write methods'])
  assert.match(detail(report, 'eight'), /but not readersWait, withdrawWriter/)
  assert.equal(report.checks.at(-1).name, 'read-write: has all eight read-write methods')
})

test('broken read-write stores fail the check that catches them', async () => {
  // A reader let in while a writer waits: a stream of readers could keep the writer out forever.
  const pastTheMark = new AsyncMapReadWriteStore()
  pastTheMark.acquireRead = async function (key, owner, ttlMs) {
    const group = this.group(key)
    if (group.writer !== null) return false
    group.readers.set(owner, Date.now() + ttlMs)
    return true
  }
  const r1 = await verifyLockStore(pastTheMark)
  assert.ok(failed(r1).includes('read-write: readers share; a refused writer keeps new readers out; a writer is alone'), failed(r1).join('; '))
  assert.match(detail(r1, 'readers share'), /R3 took a read hold while a writer waited/)

  // A writer admitted beside readers.
  const blind = new AsyncMapReadWriteStore()
  blind.acquireWrite = async function (key, owner, ttlMs) {
    const group = this.group(key)
    if (group.writer !== null) return false
    group.writer = { owner, expiresAt: Date.now() + ttlMs }
    return true
  }
  const r2 = await verifyLockStore(blind)
  assert.match(detail(r2, 'readers share'), /W took the write hold while readers held the key/)
  assert.match(detail(r2, 'racing writers and readers'), /writer\(s\) and \d+ reader\(s\) got in together/)

  // A reader let in beside a writer when no mark stands (it looks only at the mark), and a
  // mark that getting in does not clear.
  const beside = new AsyncMapReadWriteStore()
  beside.acquireRead = async function (key, owner, ttlMs) {
    const group = this.group(key)
    if (group.waitingUntil > 0) return false
    group.readers.set(owner, Date.now() + ttlMs)
    return true
  }
  const r4 = await verifyLockStore(beside)
  assert.match(detail(r4, 'act only for the owner'), /a reader got in beside the writer A/)
  const sticky = new AsyncMapReadWriteStore()
  const enter = sticky.acquireWrite
  sticky.acquireWrite = async function (key, owner, ttlMs) {
    const mark = this.group(key).waitingUntil
    const took = await enter.call(this, key, owner, ttlMs)
    this.group(key).waitingUntil = Math.max(this.group(key).waitingUntil, mark)
    return took
  }
  const r5 = await verifyLockStore(sticky)
  assert.match(detail(r5, 'readers share'), /getting in must clear the writer's mark/)

  // An extend that moves every reader's hold.
  const sweeping = new AsyncMapReadWriteStore()
  const extendHold = sweeping.extendHold
  sweeping.extendHold = async function (key, owner, ttlMs) {
    const extended = await extendHold.call(this, key, owner, ttlMs)
    if (extended) for (const reader of this.group(key).readers.keys()) this.group(key).readers.set(reader, Date.now() + ttlMs)
    return extended
  }
  const r6 = await verifyLockStore(sweeping)
  assert.match(detail(r6, 'act only for the owner'), /an extend moved another reader's hold/)

  // A mark that never lapses holds readers back after its writer is gone.
  const stuck = new AsyncMapReadWriteStore()
  const acquireWrite = stuck.acquireWrite
  stuck.acquireWrite = async function (key, owner, ttlMs) {
    return acquireWrite.call(this, key, owner, ttlMs === 300 ? 3_600_000 : ttlMs)
  }
  const r3 = await verifyLockStore(stuck)
  assert.ok(failed(r3).includes("read-write: holds and a refused writer's mark lapse at their TTL"), failed(r3).join('; '))
})
