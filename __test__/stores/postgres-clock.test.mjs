// PostgresLockStore decides expiry by the database server's clock alone: a
// process whose whole wall clock runs 10 minutes fast (libfaketime moves
// Rust's clock and Date.now() alike; the monotonic clock is left alone) gets
// exact TTLs and cannot take a lock another process holds, where the docs'
// database store in the same process takes it early. Skipped, saying what
// to install, without libfaketime (helpers/tools.mjs).

import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { fileURLToPath } from 'node:url'
import { PostgresLockStore } from '@shaferllc/keel/core'
import { uniqueKey } from '../../support/servers.mjs'
import { postgresForTests } from '../../support/postgres.mjs'
import { runProcess } from '../helpers/processes.mjs'
import { describeWith } from '../helpers/tools.mjs'
import { TOOLS } from '../../support/tools.mjs'

const CHILD = fileURLToPath(new URL('../helpers/skewed-clock.mjs', import.meta.url))

describeWith(['faketime'], 'PostgresLockStore with a process whose clock is wrong (libfaketime)', () => {
  let server
  let native
  let docs
  let closeConnections

  before(async () => {
    server = await postgresForTests()
    process.env.KEEL_TEST_DATABASE = server.url
    native = new PostgresLockStore({ url: server.url })
    ;({ closeConnections } = await import('../fixtures/dist/connection.js'))
    const { databaseLockStore } = await import('../fixtures/dist/docs-database.js')
    const { createLocksTable } = await import('../fixtures/dist/connection.js')
    await createLocksTable()
    docs = databaseLockStore()
  })

  after(async () => {
    await native?.close()
    await closeConnections?.()
    await server?.close()
  })

  /** Runs the skewed child with `env`; resolves to what it printed. */
  const runSkewed = (offset, env) =>
    runProcess(TOOLS.faketime.find(), ['-f', offset, process.execPath, CHILD], {
      ...env,
      DONT_FAKE_MONOTONIC: '1',
      REAL_NOW: String(Date.now()),
    })

  test('a process 10 minutes fast: exact TTLs and no early takeover natively; the docs store takes a held lock', async () => {
    const nativeHeld = uniqueKey('native-held')
    const docsHeld = uniqueKey('docs-held')
    const fresh = uniqueKey('fresh')
    assert.equal(await native.acquire(nativeHeld, 'holder', 60_000), true)
    assert.equal(await docs.acquire(docsHeld, 'holder', 60_000), true)

    const seen = await runSkewed('+10m', { NATIVE_HELD: nativeHeld, DOCS_HELD: docsHeld, FRESH: fresh })

    assert.ok(seen.skewMs > 9 * 60_000, `the child's clock is ${seen.skewMs} ms off: libfaketime did not move it`)
    assert.equal(seen.nativeTookHeld, false, 'PostgresLockStore took a held lock early')
    assert.equal(seen.freshTaken, true)
    assert.ok(seen.freshRemaining > 2_000 && seen.freshRemaining <= 3_000, `a 3000 ms TTL shows ${seen.freshRemaining} ms left`)
    // The server's clock says so too: the row expires 3 s from the server's now.
    const left = await native.remainingTime(fresh)
    assert.ok(left > 1_500 && left <= 3_000, `the fresh lock has ${left} ms left by the server`)
    // The docs' store decides by Date.now(): 10 minutes fast, it finds the row expired.
    assert.equal(seen.docsTookHeld, true, "the docs' store in the skewed process should have taken the held lock early")
    assert.equal(await native.isLocked(nativeHeld), true)
  })

  test('a process 10 minutes slow cannot keep a lock past its TTL: the server expires it on time', async () => {
    const fresh = uniqueKey('slow-fresh')
    const seen = await runSkewed('-10m', { NATIVE_HELD: uniqueKey('unused'), DOCS_HELD: uniqueKey('unused'), FRESH: fresh })
    assert.ok(seen.skewMs < -9 * 60_000, `the child's clock is ${seen.skewMs} ms off`)
    assert.equal(seen.freshTaken, true)
    assert.ok(seen.freshRemaining > 2_000 && seen.freshRemaining <= 3_000, `a 3000 ms TTL shows ${seen.freshRemaining} ms left`)
    await new Promise((resolve) => setTimeout(resolve, 3_100))
    assert.equal(await native.isLocked(fresh), false)
    assert.equal(await native.acquire(fresh, 'next', 1_000), true)
  })
})
