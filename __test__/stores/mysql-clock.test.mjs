// MySqlLockStore decides expiry by the MySQL server's clock alone: a process
// whose whole wall clock is 10 minutes off (libfaketime moves Rust's clock
// and Date.now() alike; the monotonic clock is left alone) shares locks with
// this one correctly. It cannot take a lock held here; a TTL it gives is that
// TTL here and to itself, whether it takes the lock through the store or
// through the lock and semaphore handles; its locks expire when the server
// says, neither 10 minutes early nor late. Skipped, saying what to install,
// without libfaketime or MariaDB (helpers/tools.mjs).

import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { fileURLToPath } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'
import { MySqlLockStore, restoreLock, setLockStore } from '@shaferllc/keel/core'
import { uniqueKey } from '../../support/servers.mjs'
import { mariadbForTests } from '../../support/mariadb.mjs'
import { runProcess } from '../helpers/processes.mjs'
import { describeWith } from '../helpers/tools.mjs'
import { TOOLS } from '../../support/tools.mjs'

const CHILD = fileURLToPath(new URL('../helpers/mysql-skewed-clock.mjs', import.meta.url))

describeWith(['mariadb', 'faketime'], 'MySqlLockStore with a process whose clock is wrong (libfaketime)', () => {
  let server
  let store

  before(async () => {
    server = await mariadbForTests()
    store = setLockStore(new MySqlLockStore({ url: server.url }))
  })

  after(async () => {
    await store?.close()
    await server?.close()
  })

  /** Runs the skewed child on fresh keys (`HELD` is `held`); resolves to `{ seen, keys }`. */
  const runSkewed = async (offset, held = uniqueKey('mysql-unused')) => {
    const keys = {
      HELD: held,
      FRESH: uniqueKey('mysql-fresh'),
      HANDLE: uniqueKey('mysql-handle'),
      PERMIT: uniqueKey('mysql-permit'),
      SHORT: uniqueKey('mysql-short'),
    }
    const seen = await runProcess(TOOLS.faketime.find(), ['-f', offset, process.execPath, CHILD], {
      ...keys,
      KEEL_TEST_MYSQL: server.url,
      DONT_FAKE_MONOTONIC: '1',
      REAL_NOW: String(Date.now()),
    })
    return { seen, keys, ended: performance.now() }
  }

  /** A TTL of 5 s, read right after it was given (the child's own view). */
  const fiveSeconds = (ms, what) => assert.ok(ms > 4_000 && ms <= 5_000, `${what}: a 5000 ms TTL shows ${ms} ms left`)

  /** What the child saw of its own locks, whichever way its clock is off. */
  const sawItsOwnRight = (seen) => {
    assert.equal(seen.freshTaken, true)
    fiveSeconds(seen.freshRemaining, 'store.remainingTime in the skewed process')
    assert.equal(seen.handleTaken, true)
    fiveSeconds(seen.handleRemaining, 'lock().getRemainingTime() in the skewed process')
    assert.equal(seen.handleExpired, false, 'a lock just taken is not expired in the skewed process')
    assert.equal(seen.permitTaken, true)
    fiveSeconds(seen.permitRemaining, 'semaphore().getRemainingTime() in the skewed process')
    // The 1 s lock, 1.5 s on: lapsed by the server's clock.
    assert.equal(seen.shortTaken, true)
    assert.equal(seen.shortExtended, false, 'a lapsed lock was extended')
    assert.equal(seen.shortLocked, false)
    assert.equal(seen.shortRemaining, null)
    assert.equal(seen.shortReleased, false)
  }

  /**
   * The child's locks, seen here: the time left is what is left of 5 s since
   * the child took them (it ended `ended`), and they expire then, by the
   * server's clock: still held just before, free just after.
   */
  const expireOnTime = async ({ seen, keys, ended }) => {
    const sinceEnd = () => performance.now() - ended
    const left = await store.remainingTime(keys.FRESH)
    assert.ok(left !== null && left > 1_000 && left <= 5_000 - sinceEnd() + 50, `the child's 5 s lock has ${left} ms left here`)
    const handle = restoreLock(seen.handle)
    const handleLeft = await handle.getRemainingTime()
    assert.ok(handleLeft !== null && handleLeft > 1_000 && handleLeft <= 5_000, `its lock handle has ${handleLeft} ms left here`)
    const permit = restoreLock(seen.permit)
    const permitRead = performance.now()
    const permitLeft = await permit.getRemainingTime()
    assert.ok(permitLeft !== null && permitLeft > 1_000 && permitLeft <= 5_000, `its permit has ${permitLeft} ms left here`)
    assert.equal(await permit.holders(), 1)
    assert.equal(await store.acquire(keys.FRESH, 'here', 5_000), false, "the child's lock is taken here early")
    // The handle's lock is given back from here, as its owner: it was held.
    assert.equal(await handle.release(), true)
    // Just before the server's expiry: still held; just after: free.
    const at = performance.now()
    await sleep(Math.max(0, left - 400))
    assert.equal(await store.isLocked(keys.FRESH), true, `expired early: ${performance.now() - at} ms of ${left}`)
    await sleep(Math.max(0, left - (performance.now() - at)) + 150)
    assert.equal(await store.isLocked(keys.FRESH), false, `still held ${performance.now() - at} ms into ${left} ms`)
    assert.equal(await store.acquire(keys.FRESH, 'here', 1_000), true)
    // The permit, taken a moment after, lapses on its own time.
    await sleep(Math.max(0, permitRead + permitLeft + 150 - performance.now()))
    assert.equal(await permit.holders(), 0, 'the permit outlived its TTL')
    assert.equal(await permit.release(), false)
  }

  test('a process 10 minutes fast cannot take a lock held here; its TTLs are exact, here and to itself', async () => {
    const held = uniqueKey('mysql-held')
    assert.equal(await store.acquire(held, 'holder', 60_000), true)
    const run = await runSkewed('+10m', held)
    const { seen } = run
    assert.ok(seen.skewMs > 9 * 60_000, `the child's clock is ${seen.skewMs} ms off: libfaketime did not move it`)
    assert.equal(seen.tookHeld, false, 'the skewed process took a held lock early')
    assert.equal(seen.heldLocked, true)
    assert.ok(seen.heldRemaining > 30_000 && seen.heldRemaining <= 60_000, `a 60 s lock held here shows ${seen.heldRemaining} ms left there`)
    sawItsOwnRight(seen)
    await expireOnTime(run)
    assert.equal(await store.isLocked(held), true)
    assert.equal(await store.release(held, 'holder'), true)
  })

  test('a process 10 minutes slow cannot keep a lock past its TTL: the server expires it on time', async () => {
    const run = await runSkewed('-10m')
    const { seen } = run
    assert.ok(seen.skewMs < -9 * 60_000, `the child's clock is ${seen.skewMs} ms off`)
    assert.equal(seen.tookHeld, true, 'a free key is taken whatever the clock')
    sawItsOwnRight(seen)
    await expireOnTime(run)
  })
})
