// SqliteLockStore beyond the store contract (contract/sqlite.test.mjs): its
// options, a path that cannot be its file (failing at once, naming it, and
// changing nothing), a file another user may not write (from the start, or
// made so while a store has it open), a full disk, holders killed in
// the middle of their writes (the file stays sound), worker threads of one
// process on one file, run()'s releases queued (written with the next
// operation, at the end of the turn, at close, by a worker terminated), a
// wall clock that is wrong (libfaketime), a reboot, close() with waiters,
// and a process that ends with its store open.

import { describe, test, before, after, mock } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'
import { setImmediate as realSetImmediate } from 'node:timers'
import { setTimeout as sleep } from 'node:timers/promises'
import Database from 'better-sqlite3'
import { lock, setLockStore, getLockStore, LockStoreError, SqliteLockStore } from '@shaferllc/keel/core'
import { runProcess, killHard } from '../helpers/processes.mjs'
import { node } from '../helpers/node.mjs'
import { describeWith } from '../helpers/tools.mjs'
import { eventually } from '../helpers/eventually.mjs'
import { holdHandOvers } from '../../lib/core/store-events.js'
import { TOOLS } from '../../support/tools.mjs'
import { writing } from '../helpers/sqlite-writing.mjs'

const CHILD = fileURLToPath(new URL('../helpers/sqlite-child.mjs', import.meta.url))
const child = (task, env) => runProcess(process.execPath, [CHILD, task], env)

let dir
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'keel-sqlite-'))
  chmodSync(dir, 0o755)
})
after(() => rmSync(dir, { recursive: true, force: true }))
const fileNamed = (name) => join(dir, name)

/**
 * Two stores on the file `name`, two processes as the file sees them:
 * `here` is the lock store while `use` runs.
 *
 * @param {string} name
 * @param {(stores: { here: SqliteLockStore, elsewhere: SqliteLockStore }) => Promise<void>} use
 */
async function onOneFile(name, use) {
  const path = fileNamed(name)
  const here = new SqliteLockStore(path)
  const elsewhere = new SqliteLockStore(path)
  const previous = getLockStore()
  setLockStore(here)
  try {
    await use({ here, elsewhere })
  } finally {
    setLockStore(previous)
    await here.close()
    await elsewhere.close()
  }
}

describe('options', () => {
  test('a path that is not a non-empty string, ":memory:" or a file: URI is a TypeError naming it', () => {
    for (const args of [[], [undefined], [42], [''], [':memory:'], ['file:locks.db'], [{}], [{ path: 7 }], [null]]) {
      assert.throws(() => new SqliteLockStore(...args), (e) => e instanceof TypeError && /new SqliteLockStore: (options\.)?path must be/.test(e.message), String(args[0]))
    }
  })

  test('other options are checked, an unknown one refused', () => {
    const path = fileNamed('options.db')
    assert.throws(() => new SqliteLockStore({ path, table: 'Locks' }), /options\.table must be a lower-case name/)
    assert.throws(() => new SqliteLockStore({ path, table: 'x'.repeat(51) }), /options\.table/)
    assert.throws(() => new SqliteLockStore({ path, poolSize: 4 }), /unknown option poolSize \(known: path, table, commandTimeout, sweepInterval\)/)
    assert.throws(() => new SqliteLockStore({ path, commandTimeout: -1 }), (e) => e instanceof RangeError && /options\.commandTimeout/.test(e.message))
    assert.throws(() => new SqliteLockStore({ path, sweepInterval: '1s' }), (e) => e instanceof TypeError && /options\.sweepInterval/.test(e.message))
    assert.deepEqual(readdirSync(dir).filter((f) => f.startsWith('options')), [], 'nothing made')
  })

  test('a relative path is taken from the working directory; a table of its own is another store on the same file', async () => {
    const store = new SqliteLockStore(relative(process.cwd(), join(dir, 'relative.db')))
    const other = new SqliteLockStore({ path: resolve(join(dir, 'relative.db')), table: 'other_locks' })
    assert.equal(await store.acquire('k', 'a', 10_000), true)
    assert.equal(await other.acquire('k', 'b', 10_000), true, 'another table')
    assert.equal(await new SqliteLockStore(join(dir, 'relative.db')).isLocked('k'), true)
    await store.close()
    await other.close()
  })
})

describe('a path that cannot be the store\'s file', () => {
  const refusal = (path) => {
    try {
      new SqliteLockStore(path)
    } catch (error) {
      return error
    }
    assert.fail(`${path} opened`)
  }

  test('a missing folder, a folder, a file that is not a database: a LockStoreError naming the path, nothing changed', () => {
    const missing = join(dir, 'nowhere', 'locks.db')
    let e = refusal(missing)
    assert.ok(e instanceof LockStoreError, String(e))
    assert.equal(e.code, 'ERR_LOCK_STORE_SQLITE')
    assert.match(e.message, new RegExp(`^new SqliteLockStore: ${missing}: the folder .*nowhere does not exist$`))
    e = refusal(dir)
    assert.match(e.message, /this is a folder, not a file/)
    const notes = fileNamed('notes.txt')
    const text = 'not a database\n'.repeat(500)
    writeFileSync(notes, text)
    e = refusal(notes)
    assert.equal(e.code, 'ERR_LOCK_STORE_SQLITE')
    assert.match(e.message, /notes\.txt: the file is not a SQLite database/)
    assert.equal(readFileSync(notes, 'utf8'), text)
    assert.deepEqual(readdirSync(dir).filter((f) => f.startsWith('notes')), ['notes.txt'], 'no journal beside it')
  })

  test('a file or folder this user may not write: refused at once, naming the path', async (t) => {
    if (process.platform === 'win32') return t.skip('file modes are POSIX')
    const readOnlyFolder = fileNamed('read-only-folder')
    mkdirSync(readOnlyFolder, { mode: 0o555 })
    chmodSync(readOnlyFolder, 0o555)
    const readOnlyFile = fileNamed('read-only.db')
    new Database(readOnlyFile).close()
    chmodSync(readOnlyFile, 0o444)
    for (const path of [join(readOnlyFolder, 'locks.db'), readOnlyFile]) await refusedToAnotherProcess(path)
  })

  test('made read-only after it opened: the open store goes on; the next process is refused, naming the path', async (t) => {
    if (process.platform === 'win32') return t.skip('file modes are POSIX')
    const folder = fileNamed('made-read-only')
    mkdirSync(folder)
    const path = join(folder, 'locks.db')
    const store = new SqliteLockStore(path)
    try {
      assert.equal(await store.acquire('before', 'o', 60_000), true)
      for (const file of readdirSync(folder)) chmodSync(join(folder, file), 0o444)
      chmodSync(folder, 0o555)
      assert.equal(await store.acquire('after', 'o', 60_000), true)
      assert.equal(await store.release('before', 'o'), true)
      assert.equal(await store.isLocked('before'), false)
      await refusedToAnotherProcess(path)
    } finally {
      await store.close()
      chmodSync(folder, 0o755)
    }
  })
})

/** A process (another user where this one is root: root writes anywhere) fails to open `path`, told why and where. */
async function refusedToAnotherProcess(path) {
  const asUser = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : undefined
  const seen = await new Promise((resolve, reject) => {
    const c = spawn(process.execPath, [CHILD, 'open'], { env: { ...process.env, KEEL_TEST_SQLITE: path }, ...asUser, stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    c.stdout.on('data', (d) => (out += d))
    c.once('error', reject)
    c.once('exit', () => resolve(JSON.parse(out)))
  })
  assert.equal(seen.opened, false, `${path}: ${JSON.stringify(seen)}`)
  assert.equal(seen.name, 'LockStoreError')
  assert.equal(seen.code, 'ERR_LOCK_STORE_SQLITE')
  assert.ok(seen.message.startsWith(`new SqliteLockStore: ${path}: `) || seen.message.includes(path), seen.message)
}

describe('the disk', () => {
  test('full: a write fails naming the path and takes nothing; the store goes on once there is room', async (t) => {
    if (process.platform !== 'linux') return t.skip('a small disk of its own: a tmpfs in a Linux mount namespace')
    // The child mounts a 1 MB tmpfs in a mount namespace of its own (a user
    // namespace too where this is not root): nothing to unmount, even if it dies.
    const asRoot = process.getuid() === 0
    if (!asRoot && spawnSync('unshare', ['-rm', 'true']).status !== 0) {
      return t.skip('a small disk of its own: this user may not make a mount namespace (run as root, or allow unprivileged user namespaces)')
    }
    const mountPoint = fileNamed('small-disk')
    mkdirSync(mountPoint)
    const script = 'mount -t tmpfs -o size=1m keel-small-disk "$1" && exec "$2" "$3" disk-full'
    const seen = await runProcess(
      'unshare',
      [asRoot ? '-m' : '-rm', '--propagation', 'private', 'sh', '-c', script, 'sh', mountPoint, process.execPath, CHILD],
      { KEEL_TEST_SQLITE: join(mountPoint, 'locks.db') },
    )
    assert.equal(seen.heldTaken, true)
    assert.equal(seen.fillError, 'ENOSPC')
    assert.ok(seen.failure, `no write failed with the disk full (${seen.takenWhileFull} taken)`)
    assert.equal(seen.failure.name, 'LockStoreError')
    assert.equal(seen.failure.code, 'ERR_LOCK_STORE_SQLITE')
    assert.ok(seen.failure.message.includes(join(mountPoint, 'locks.db')) && /full/.test(seen.failure.message), seen.failure.message)
    assert.equal(seen.failedKeyLocked, false, 'the failed acquire took nothing')
    assert.ok(seen.heldLeft > 50_000, `the lock held before goes on being held (${seen.heldLeft} ms left)`)
    assert.equal(seen.takenWithRoom, true)
    assert.equal(seen.heldReleased, true)
    assert.equal(seen.integrity, 'ok')
  })
})

describe('processes and threads on one file', () => {
  test('holders SIGKILLed in the middle of their writes leave the file sound, and the store goes on', async () => {
    const path = fileNamed('killed.db')
    for (let round = 0; round < 3; round++) {
      const c = spawn(...node([CHILD, 'churn']), { env: { ...process.env, KEEL_TEST_SQLITE: path }, stdio: ['ignore', 'pipe', 'inherit'] })
      await new Promise((resolve) => c.stdout.once('data', resolve))
      await sleep(50 + Math.random() * 200)
      await killHard(c)
      const db = new Database(path, { readonly: true })
      assert.equal(db.pragma('integrity_check', { simple: true }), 'ok')
      db.close()
    }
    const store = new SqliteLockStore(path)
    // The killed holders' locks lapse with their TTLs; a key they never used is free now.
    assert.equal(await store.acquire('after-the-kills', 'me', 1_000), true)
    await store.close()
  })

  test('4 processes starting together on a new file all open it', async () => {
    for (let round = 0; round < 5; round++) {
      const path = fileNamed(`together-${round}.db`)
      const startAt = String(Date.now() + 300)
      const seen = await Promise.all(Array.from({ length: 4 }, () => child('open', { KEEL_TEST_SQLITE: path, START_AT: startAt })))
      assert.deepEqual(
        seen.map((s) => [s.opened, s.message]),
        Array(4).fill([true, undefined]),
        `round ${round}`,
      )
    }
  })

  test('4 worker threads opening a new file together: 4 x 50 locked read-modify-writes lose nothing', async () => {
    const path = fileNamed('workers.db')
    const shared = new Int32Array(new SharedArrayBuffer(16)) // [count, inside, overlaps, ready]
    const body = `
      const { workerData: { path, shared } } = require('node:worker_threads')
      const { lock, setLockStore, SqliteLockStore } = require(${JSON.stringify(fileURLToPath(new URL('../../index.js', import.meta.url)))})
      // Every thread opens the file (not there yet) at the same moment.
      Atomics.add(shared, 3, 1)
      while (Atomics.load(shared, 3) < 4);
      const store = setLockStore(new SqliteLockStore(path))
      ;(async () => {
        for (let i = 0; i < 50; i++) {
          const [ran] = await lock('counter', 10_000).run(async () => {
            if (Atomics.add(shared, 1, 1) !== 0) Atomics.add(shared, 2, 1)
            const seen = shared[0]
            await new Promise((r) => setImmediate(r))
            shared[0] = seen + 1
            Atomics.sub(shared, 1, 1)
          }, { timeout: 30_000 })
          if (!ran) throw new Error('not acquired within 30 s')
        }
        await store.close()
      })()`
    await Promise.all(
      Array.from({ length: 4 }, () => new Promise((resolve, reject) => {
        const w = new Worker(body, { eval: true, workerData: { path, shared } })
        w.once('error', reject)
        w.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`worker exited with ${code}`))))
      })),
    )
    assert.deepEqual([...shared], [200, 0, 0, 4])
  })

  test('a process that used the store and left it open ends by itself', async () => {
    const started = performance.now()
    assert.deepEqual(await child('idle', { KEEL_TEST_SQLITE: fileNamed('idle.db') }), { ran: true })
    assert.ok(performance.now() - started < 10_000)
  })
})

describe('the line', () => {
  test('a lock handed over reaches this thread twice (told, and in a first attempt\'s answer) and is taken once', async () => {
    await onOneFile('handed-twice.db', async ({ elsewhere }) => {
      assert.equal(await elsewhere.acquire('k', 'elsewhere', 60_000), true)
      const controller = new AbortController()
      const waiting = lock('k').acquire({ timeout: 10_000, retryDelay: 60_000, signal: controller.signal })
      await sleep(50) // its attempt was refused: this thread's place is in line
      // The release hands the lock to this thread's place, its waiter gives
      // up, and a new caller's first attempt is answered with that same lock.
      // The hand-over's message is held back, as a busy thread would hold it,
      // and the waiter gives up as it is held, before its next renewal could
      // take the lock (lib/core/protocol.js LINE_RENEW_MS).
      const gaveUp = assert.rejects(waiting, { name: 'AbortError' })
      const messages = holdHandOvers((key) => key === 'k' && queueMicrotask(() => controller.abort()))
      assert.equal(await elsewhere.release('k', 'elsewhere'), true)
      await eventually(() => assert.equal(messages.countOf('k'), 1))
      await gaveUp
      const second = lock('k', 60_000)
      assert.equal(await second.acquire({ timeout: 5_000 }), true, 'the lock handed to this thread, in the answer')
      assert.equal(await second.release(), true)
      // Held elsewhere again, with a waiter here, when the message comes at last.
      assert.equal(await elsewhere.acquire('k', 'elsewhere-again', 60_000), true)
      const third = lock('k')
      let got
      const gets = third.acquire({ timeout: 400, retryDelay: 60_000 }).then((ran) => (got = ran))
      await sleep(50)
      messages.deliver()
      await sleep(50)
      assert.equal(got, undefined, 'the late message gives nobody the lock held elsewhere')
      assert.equal(await gets, false, 'it waits its timeout out')
      assert.equal(await elsewhere.release('k', 'elsewhere-again'), true)
    })
  })
})

describe("run()'s release, queued", () => {
  const INDEX = fileURLToPath(new URL('../../index.js', import.meta.url))

  test("is written with the store's next operation, or at the end of the loop's turn", async () => {
    await onOneFile('queued.db', async ({ here, elsewhere }) => {
      assert.deepEqual(await lock('k', 60_000).run(() => 'done'), [true, 'done'])
      assert.equal(await elsewhere.isLocked('k'), true, 'queued, within this turn')
      await new Promise((resolve) => setImmediate(resolve))
      assert.equal(await elsewhere.isLocked('k'), false, 'written by the end of the turn')
      await lock('k', 60_000).run(() => {})
      assert.equal(await here.isLocked('k'), false, "written before the store's next operation")
      assert.equal(await elsewhere.isLocked('k'), false)
      // A loop of cycles on one key, and on several: each release is written
      // with the next acquire, and the last one at the end of the turn.
      for (let i = 0; i < 100; i++) await lock(`k${i % 3}`, 60_000).run(() => {})
      await new Promise((resolve) => setImmediate(resolve))
      for (const key of ['k0', 'k1', 'k2']) assert.equal(await elsewhere.isLocked(key), false, key)
      // A waiter here is woken at once, and its attempt writes the release first.
      let second
      const first = lock('w', 60_000).run(async () => {
        second = lock('w', 60_000).run(() => 'second', { timeout: 5_000, retryDelay: 60_000 })
        await sleep(20)
      })
      const started = performance.now()
      assert.deepEqual(await first, [true, undefined])
      assert.deepEqual(await second, [true, 'second'])
      assert.ok(performance.now() - started < 1_000, 'the waiter here did not wait for its poll')
    })
  })

  test("under a test's fake timers, the end of the turn still writes it", async () => {
    await onOneFile('queued-fake-timers.db', async ({ elsewhere }) => {
      mock.timers.enable({ apis: ['setImmediate', 'setTimeout'] })
      try {
        for (const key of ['a', 'b']) {
          await lock(key, 60_000).run(() => {})
          await new Promise((resolve) => realSetImmediate(resolve))
          assert.equal(await elsewhere.isLocked(key), false, `${key}: written at the end of the turn`)
        }
      } finally {
        mock.timers.reset()
      }
    })
  })

  test('close() right after run() writes it', async () => {
    const path = fileNamed('queued-close.db')
    const here = new SqliteLockStore(path)
    const elsewhere = new SqliteLockStore(path)
    const previous = getLockStore()
    setLockStore(here)
    try {
      await lock('k', 60_000).run(() => {})
      await here.close()
      assert.equal(await elsewhere.isLocked('k'), false)
    } finally {
      setLockStore(previous)
      await elsewhere.close()
    }
  })

  test('a worker terminated right after run() leaves the lock free', async () => {
    const path = fileNamed('queued-worker.db')
    const body = `
      const { workerData: { path }, parentPort } = require('node:worker_threads')
      const { lock, setLockStore, SqliteLockStore } = require(${JSON.stringify(INDEX)})
      setLockStore(new SqliteLockStore(path))
      lock('k', 60_000).run(() => {}).then(([ran]) => {
        parentPort.postMessage(ran)
        // Busy until terminated: this turn of its loop never ends.
        for (;;);
      })`
    const worker = new Worker(body, { eval: true, workerData: { path } })
    const ran = await new Promise((resolve, reject) => {
      worker.once('message', resolve)
      worker.once('error', reject)
    })
    assert.equal(ran, true)
    await worker.terminate()
    const store = new SqliteLockStore(path)
    try {
      assert.equal(await store.isLocked('k'), false, 'held for the rest of its minute')
    } finally {
      await store.close()
    }
  })

  test('one that fails is told by a LockReleaseWarning naming the key; the next goes through', async () => {
    const path = fileNamed('queued-failing.db')
    const here = new SqliteLockStore({ path, commandTimeout: 200 })
    const previous = getLockStore()
    setLockStore(here)
    const warnings = []
    const onWarning = (w) => w.name === 'LockReleaseWarning' && warnings.push(w)
    process.on('warning', onWarning)
    let writer
    try {
      // Another process writes for longer than the release may wait. (Not
      // another connection of this one: two copies of SQLite in one process
      // do not see each other's locks.)
      const ran = await lock('k', 60_000).run(async () => {
        writer = await writing(path, 1_000)
      })
      assert.deepEqual(ran, [true, undefined])
      await eventually(() => assert.equal(warnings.length, 1))
      assert.match(warnings[0].message, /^Lock "k": release after run\(\) failed \(.*ERR_LOCK_STORE_TIMEOUT/s)
      assert.match(warnings[0].message, /stays held until its TTL passes/)
      assert.equal(await here.isLocked('k'), true, 'still held')
      if (writer.exitCode === null) await new Promise((resolve) => writer.once('exit', resolve))
      await lock('other', 60_000).run(() => {})
      await new Promise((resolve) => setImmediate(resolve))
      const elsewhere = new SqliteLockStore(path)
      assert.equal(await elsewhere.isLocked('other'), false, 'written at the end of the turn')
      await elsewhere.close()
      assert.equal(warnings.length, 1)
    } finally {
      process.off('warning', onWarning)
      writer?.kill()
      setLockStore(previous)
      await here.close()
    }
  })
})

describe('time', () => {
  test('close() answers the waiters at once, with ERR_LOCK_STORE_CLOSED', async () => {
    const store = new SqliteLockStore(fileNamed('close.db'))
    const previous = getLockStore()
    setLockStore(store)
    try {
      assert.equal(await store.acquire('held', 'someone', 60_000), true)
      const waiting = lock('held').acquire({ timeout: 10_000, retryDelay: 5_000 })
      await sleep(50)
      const started = performance.now()
      await store.close()
      await assert.rejects(waiting, (e) => e instanceof LockStoreError && e.code === 'ERR_LOCK_STORE_CLOSED')
      assert.ok(performance.now() - started < 1_000, 'at once, not at the next poll')
    } finally {
      setLockStore(previous)
    }
  })

  test('a reboot lets every lock go, and fencing tokens jump past what a power cut could take back', async () => {
    const path = fileNamed('reboot.db')
    const store = new SqliteLockStore(path)
    setLockStore(store)
    const held = lock('held', 3_600_000)
    assert.equal(await held.acquire(), true)
    const before = held.fencingToken
    await store.close()
    const db = new Database(path)
    db.prepare("UPDATE keel_locks_state SET value = 'another boot' WHERE name = 'boot'").run()
    db.close()
    const after = setLockStore(new SqliteLockStore(path))
    const again = lock('held')
    assert.equal(await again.acquire(), true, 'held in another boot: let go')
    assert.ok(again.fencingToken > before + 2 ** 32, `${before} then ${again.fencingToken}`)
    await again.release()
    await after.close()
  })
})

describeWith(['faketime'], 'SqliteLockStore with a process whose wall clock is wrong (libfaketime)', () => {
  for (const offset of ['+10m', '-10m']) {
    test(`a process ${offset}: a held lock stays held, a new one gets its whole TTL`, async () => {
      const path = fileNamed(`skew${offset}.db`)
      const store = new SqliteLockStore(path)
      assert.equal(await store.acquire('held', 'holder', 60_000), true)
      const seen = await runProcess(TOOLS.faketime.find(), ['-f', offset, process.execPath, CHILD, 'skewed'], {
        KEEL_TEST_SQLITE: path,
        HELD: 'held',
        FRESH: 'fresh',
        DONT_FAKE_MONOTONIC: '1',
        REAL_NOW: String(Date.now()),
      })
      assert.ok(Math.abs(seen.skewMs) > 9 * 60_000, `the child's clock is ${seen.skewMs} ms off: libfaketime did not move it`)
      assert.equal(seen.tookHeld, false)
      assert.equal(seen.freshTaken, true)
      assert.ok(seen.freshRemaining > 2_000 && seen.freshRemaining <= 3_000, `remaining ${seen.freshRemaining}`)
      assert.ok((await store.remainingTime('fresh')) > 1_000, 'and here too')
      await store.close()
    })
  }
})
