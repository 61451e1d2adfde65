// Mutual exclusion across processes, on real servers, for every store that
// reaches beyond one process: RedisLockStore, the docs' ioredis store, and the
// docs' database store on SQLite and on PostgreSQL. Each test runs child
// processes (helpers/child.mjs) against the same server.

import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { lock, restoreLock, setLockStore } from '@shaferllc/keel/core'
import { redisForTests, postgresForTests, uniqueKey } from './helpers/servers.mjs'
import { STORES, openStore } from './helpers/stores.mjs'
import { runChild, startHolder, killHard } from './helpers/processes.mjs'

const PROCESSES = 4
const INCREMENTS = 25

const dir = mkdtempSync(join(tmpdir(), 'keel-processes-'))
const redis = await redisForTests()
const postgres = await postgresForTests()
process.env.REDIS_URL = redis.url
const envFor = (kind) => ({
  KEEL_TEST_STORE: kind,
  REDIS_URL: redis.url,
  KEEL_TEST_DATABASE: kind === 'postgres' ? postgres.url : `sqlite:${join(dir, 'locks.db')}`,
})

const opened = new Map()
async function useStore(kind) {
  Object.assign(process.env, envFor(kind))
  if (!opened.has(kind)) opened.set(kind, await openStore(kind))
  setLockStore(opened.get(kind).store)
}

after(async () => {
  for (const s of opened.values()) await s.close()
  await redis.close()
  await postgres.close()
  rmSync(dir, { recursive: true, force: true })
})

function counterFile() {
  const file = join(dir, `counter-${Math.random().toString(36).slice(2)}`)
  writeFileSync(file, '0')
  return file
}

test('control: without a lock, the same processes lose updates (so the counter test can fail)', async () => {
  const file = counterFile()
  await Promise.all(
    Array.from({ length: PROCESSES }, () => runChild(envFor('redis'), 'count-unlocked', file, String(INCREMENTS))),
  )
  const count = Number(readFileSync(file, 'utf8'))
  assert.ok(count < PROCESSES * INCREMENTS, `expected lost updates without a lock, got ${count}`)
})

for (const [kind, label] of Object.entries(STORES)) {
  test(`${label}: ${PROCESSES} processes x ${INCREMENTS} locked read-modify-writes lose nothing`, async () => {
    await useStore(kind)
    const file = counterFile()
    const key = uniqueKey('counter')
    const results = await Promise.all(
      Array.from({ length: PROCESSES }, () => runChild(envFor(kind), 'count', file, String(INCREMENTS), key)),
    )
    assert.deepEqual(
      results.map((r) => r.timeouts),
      Array(PROCESSES).fill(0),
    )
    assert.equal(Number(readFileSync(file, 'utf8')), PROCESSES * INCREMENTS)
    assert.equal(await lock(key).isLocked(), false, 'every holder released')
  })

  test(`${label}: serialize() in one process, restoreLock() + extend() + release() in another`, async () => {
    await useStore(kind)
    const key = uniqueKey('import')
    const { serialized } = await runChild(envFor(kind), 'take', key, '5000')
    assert.equal(await lock(key).isLocked(), true, 'the first process left it held')
    assert.equal(await lock(key).acquireImmediately(), false)
    const { remaining, released, lockedAfter } = await runChild(envFor(kind), 'restore', serialized, '60000')
    assert.ok(remaining > 5_000 && remaining <= 60_000, `extend() pushed the expiry out (remaining ${remaining})`)
    assert.equal(released, true)
    assert.equal(lockedAfter, false)
    assert.equal(await lock(key).isLocked(), false)
  })

  test(`${label}: a holder killed with SIGKILL frees the lock once its TTL passes, not before`, async () => {
    await useStore(kind)
    const key = uniqueKey('killed')
    const ttl = 1_200
    const { child, result } = await startHolder(envFor(kind), 'hold', key, String(ttl))
    await killHard(child)
    const l = lock(key, 5_000)
    assert.equal(await l.acquireImmediately(), false, 'held right after the kill')
    assert.ok(await l.acquire({ timeout: 10_000, retryDelay: 20 }), 'free once the TTL passed')
    const freedAfter = Date.now() - result.at
    // The store's clock started the TTL when the holder acquired; allow a little
    // for the two processes' clocks and whole-millisecond rounding.
    assert.ok(freedAfter >= ttl - 50, `freed after ${freedAfter} ms, before the ${ttl} ms TTL`)
    assert.ok(freedAfter < ttl + 2_000, `freed only after ${freedAfter} ms`)
    assert.equal(await l.release(), true)
  })

  test(`${label}: A's stale release after B took the expired lock is a no-op`, async () => {
    await useStore(kind)
    const key = uniqueKey('report')
    // A, in another process, takes the lock and outlives its TTL.
    const { serialized: a } = await runChild(envFor(kind), 'take', key, '300')
    await sleep(450)
    // B takes the expired lock.
    const b = lock(key, 30_000)
    assert.equal(await b.acquire(), true)
    // A's late release must not free B's lock.
    const { released } = await runChild(envFor(kind), 'release', a)
    assert.equal(released, false)
    assert.equal(await b.isExpired(), false)
    assert.equal(await lock(key).acquireImmediately(), false, 'nobody else walks in')
    await assert.rejects(restoreLock(a).extend(), { name: 'LockNotHeldError' })
    assert.equal(await b.release(), true)
  })
}
