// One process whose wall clock is wrong (run under libfaketime by
// stores/postgres-clock.test.mjs): it tries keys another process holds,
// through PostgresLockStore and through the docs' database store, and prints
// what each did, with how far off its clock is.
//   env: KEEL_TEST_DATABASE (a postgres:// URL), REAL_NOW (the parent's Date.now()
//   when it started this process), NATIVE_HELD, DOCS_HELD, FRESH (keys)

import { PostgresLockStore } from '@shaferllc/keel/core'

const { KEEL_TEST_DATABASE: url, REAL_NOW, NATIVE_HELD, DOCS_HELD, FRESH } = process.env
const skewMs = Date.now() - Number(REAL_NOW)

const native = new PostgresLockStore({ url })
const nativeTookHeld = await native.acquire(NATIVE_HELD, 'skewed-owner', 60_000)
const freshTaken = await native.acquire(FRESH, 'skewed-owner', 3_000)
const freshRemaining = await native.remainingTime(FRESH)
await native.close()

const { databaseLockStore } = await import('../fixtures/dist/docs-database.js')
const { closeConnections } = await import('../fixtures/dist/connection.js')
const docsTookHeld = await databaseLockStore().acquire(DOCS_HELD, 'skewed-owner', 60_000)
await closeConnections()

process.stdout.write(`${JSON.stringify({ skewMs, nativeTookHeld, freshTaken, freshRemaining, docsTookHeld })}\n`)
