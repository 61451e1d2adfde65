// One process whose wall clock is wrong (run under libfaketime by
// stores/mysql-clock.test.mjs), sharing locks with the test's process
// through MySqlLockStore: it tries a key the test holds, takes keys of its
// own (a plain lock through the store, a lock and a semaphore permit through
// the handles), lets a short one lapse, and prints what it saw, with how far
// off its clock is and, for each TTL, what it read right after taking it.
//   env: KEEL_TEST_MYSQL (a mysql:// URL), REAL_NOW (the parent's Date.now()
//   when it started this process), HELD, FRESH, HANDLE, PERMIT, SHORT (keys)

import { setTimeout as sleep } from 'node:timers/promises'
import { MySqlLockStore, lock, semaphore, setLockStore } from '@shaferllc/keel/core'

const { KEEL_TEST_MYSQL: url, REAL_NOW, HELD, FRESH, HANDLE, PERMIT, SHORT } = process.env
const skewMs = Date.now() - Number(REAL_NOW)

const store = setLockStore(new MySqlLockStore({ url }))
const seen = { skewMs }

// The test's lock: held, with the time left as the server counts it.
seen.tookHeld = await store.acquire(HELD, 'skewed-owner', 60_000)
seen.heldLocked = await store.isLocked(HELD)
seen.heldRemaining = await store.remainingTime(HELD)

// Its own: the TTLs it gave, as the server counts them.
seen.freshTaken = await store.acquire(FRESH, 'skewed-owner', 5_000)
seen.freshRemaining = await store.remainingTime(FRESH)

const handle = lock(HANDLE, 5_000)
seen.handleTaken = await handle.acquire()
seen.handleRemaining = await handle.getRemainingTime()
seen.handleExpired = await handle.isExpired()
seen.handle = handle.serialize()

const permit = semaphore(PERMIT, 2, 5_000)
seen.permitTaken = await permit.acquire()
seen.permitRemaining = await permit.getRemainingTime()
seen.permit = permit.serialize()

// A 1 s lock, 1.5 s later (timers run on the monotonic clock, which is
// right): gone by the server's clock, whatever this process's says.
seen.shortTaken = await store.acquire(SHORT, 'skewed-owner', 1_000)
await sleep(1_500)
seen.shortExtended = await store.extend(SHORT, 'skewed-owner', 1_000)
seen.shortLocked = await store.isLocked(SHORT)
seen.shortRemaining = await store.remainingTime(SHORT)
seen.shortReleased = await store.release(SHORT, 'skewed-owner')

await store.close()
process.stdout.write(`${JSON.stringify(seen)}\n`)
