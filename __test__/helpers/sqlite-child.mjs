// A process on a SqliteLockStore file, for stores/sqlite-store.test.mjs.
//   argv[2]: what to do
//     churn    take and give back locks, semaphore permits and read locks on
//              a few keys as fast as it can, printing one line once started
//              (the test kills it in the middle of its writes)
//     skewed   (under libfaketime) try HELD, take FRESH for 3 s, and print
//              what it saw with how far its wall clock is off (REAL_NOW)
//     idle     take and give back one lock, leave the store open, and end
//     open     open the store (at START_AT, if given) and take a key, and print
//              what happened (a path it may not write; processes starting together)
//     writing  hold the file's write lock (BEGIN IMMEDIATE) for HOLD_MS, printing
//              one line once it has it (another process, as two copies of
//              SQLite in one process do not see each other's locks)
//     disk-full  (the file on a small disk of its own) hold a lock, fill the
//              disk, take new keys until one fails, make room, go on; print
//              what it saw and the file's integrity check
//   env: KEEL_TEST_SQLITE (the file), HELD, FRESH, REAL_NOW, HOLD_MS

import { closeSync, openSync, unlinkSync, writeSync } from 'node:fs'
import { dirname, join } from 'node:path'
import Database from 'better-sqlite3'
import { lock, semaphore, readLock, setLockStore, SqliteLockStore } from '@shaferllc/keel/core'

const path = process.env.KEEL_TEST_SQLITE
const print = (value) => process.stdout.write(`${JSON.stringify(value)}\n`)

switch (process.argv[2]) {
  case 'churn': {
    setLockStore(new SqliteLockStore(path))
    print({ started: true })
    for (let i = 0; ; i++) {
      const key = `churn:${i % 3}`
      await lock(key, 10_000).run(() => {})
      await semaphore(key, 2, 10_000).run(() => {})
      await readLock(key, 10_000).run(() => {})
    }
  }
  case 'skewed': {
    const store = new SqliteLockStore(path)
    const skewMs = Date.now() - Number(process.env.REAL_NOW)
    const tookHeld = await store.acquire(process.env.HELD, 'skewed-owner', 60_000)
    const freshTaken = await store.acquire(process.env.FRESH, 'skewed-owner', 3_000)
    const freshRemaining = await store.remainingTime(process.env.FRESH)
    await store.close()
    print({ skewMs, tookHeld, freshTaken, freshRemaining })
    break
  }
  case 'idle': {
    setLockStore(new SqliteLockStore(path))
    const [ran] = await lock('idle').run(() => {})
    print({ ran })
    break
  }
  case 'open': {
    // At START_AT (ms since the epoch), if given: processes started together open the file together.
    const startAt = Number(process.env.START_AT ?? 0)
    while (Date.now() < startAt) await new Promise((resolve) => setTimeout(resolve, 1))
    try {
      const store = new SqliteLockStore(path)
      print({ opened: true, acquired: await store.acquire('k', 'o', 1_000) })
    } catch (error) {
      print({ opened: false, name: error.name, code: error.code, message: error.message })
    }
    break
  }
  case 'writing': {
    const db = new Database(path)
    db.exec('BEGIN IMMEDIATE')
    print({ writing: true })
    await new Promise((resolve) => setTimeout(resolve, Number(process.env.HOLD_MS)))
    db.exec('COMMIT')
    db.close()
    break
  }
  case 'disk-full': {
    const store = new SqliteLockStore(path)
    const heldTaken = await store.acquire('held', 'holder', 60_000)
    // Every block the disk has left, in ever smaller writes.
    const filler = join(dirname(path), 'filler')
    const fd = openSync(filler, 'w')
    let fillError
    for (const size of [65_536, 4_096, 512, 1]) {
      try {
        for (;;) writeSync(fd, Buffer.alloc(size))
      } catch (error) {
        fillError = error.code
      }
    }
    closeSync(fd)
    let failure
    let takenWhileFull = 0
    for (let i = 0; i < 5_000 && !failure; i++) {
      try {
        if (await store.acquire(`k${i}`, 'o', 60_000)) takenWhileFull++
      } catch (error) {
        failure = { key: `k${i}`, name: error.name, code: error.code, message: error.message }
      }
    }
    const failedKeyLocked = failure ? await store.isLocked(failure.key) : null
    const heldLeft = await store.remainingTime('held')
    unlinkSync(filler)
    const takenWithRoom = failure ? await store.acquire(failure.key, 'o', 60_000) : null
    const heldReleased = await store.release('held', 'holder')
    await store.close()
    const db = new Database(path, { readonly: true })
    const integrity = db.pragma('integrity_check', { simple: true })
    db.close()
    print({ heldTaken, fillError, takenWhileFull, failure, failedKeyLocked, heldLeft, takenWithRoom, heldReleased, integrity })
    break
  }
  default:
    throw new Error(`sqlite-child: unknown task ${process.argv[2]}`)
}
