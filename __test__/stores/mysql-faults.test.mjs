// MySqlLockStore when the server fails it, on MariaDB servers this file
// starts: stopped (a crash) and back, restarted cleanly, its connections
// killed, out of connections, a statement stuck behind another session's row
// lock, a wrong password, a read-only server, nothing listening. Each failure
// has its error code (index.d.ts LockStoreErrorCode), arrives within the
// timeouts, and the same store works again once the fault is gone. Skipped,
// saying what to install, without MariaDB.

import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { setTimeout as sleep } from 'node:timers/promises'
import mysql from 'mysql2/promise'
import { lock, semaphore, readLock, LockStoreError, MySqlLockStore } from '@shaferllc/keel/core'
import { freePort, uniqueKey } from '../../support/servers.mjs'
import { startMariaDb } from '../../support/mariadb.mjs'
import { eventually } from '../helpers/eventually.mjs'
import { describeWith, lacking } from '../helpers/tools.mjs'
import { withStore } from '../helpers/stores.mjs'

const CODES = ['ERR_LOCK_STORE_CONNECTION', 'ERR_LOCK_STORE_TIMEOUT']

describeWith(['mariadb'], 'MySqlLockStore faults, on MariaDB servers of its own', () => {
  let server
  let admin
  const cleanups = []
  const store = (options = {}, url = server.url) => {
    const s = new MySqlLockStore({ url, connectTimeout: 1_000, commandTimeout: 1_000, ...options })
    cleanups.push(() => s.close())
    return s
  }
  const own = async (options) => {
    const s = await startMariaDb(options)
    cleanups.push(() => s.close())
    return s
  }
  /** A root mysql2 connection (made again after the server went away). */
  const connectAdmin = async () => {
    await admin?.end().catch(() => {})
    admin = await mysql.createConnection(server.url)
    admin.on('error', () => {})
  }
  const rows = async (sql, params = []) => (await admin.query(sql, params))[0]
  /** The ids of root's connections, but for this one and the server's own threads. */
  const rootConnections = async () =>
    (await rows("SELECT ID FROM information_schema.processlist WHERE USER = 'root' AND ID <> CONNECTION_ID() AND COMMAND <> 'Daemon'")).map((r) => Number(r.ID))
  /** Root's connections that are not among `others` (those open before the store was made). */
  const newConnections = async (others) => (await rootConnections()).filter((id) => !others.includes(id))

  before(async () => {
    server = await startMariaDb({ durable: true })
    await connectAdmin()
    // Not root, for the read-only server: SUPER (READ_ONLY ADMIN) writes through read_only.
    await admin.query("CREATE USER writer@localhost IDENTIFIED BY 'writer-pw'")
    await admin.query('GRANT ALL ON test.* TO writer@localhost')
  })
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {})
    await admin?.end().catch(() => {})
    await server?.close()
  })

  test('the server stopped: errors within connectTimeout + commandTimeout, fn never runs unlocked; started again, the same store works', async () => {
    const s = store()
    const key = uniqueKey('down')
    await withStore(s, async () => {
      assert.deepEqual(await lock(key).run(async () => 'ok'), [true, 'ok'])
      // run() resolves once its release is sent; this answer comes after it.
      assert.equal(await s.isLocked(key), false)
      await server.stop() // SIGKILL, as a crash
      try {
        let ranUnlocked = false
        const started = performance.now()
        const outcome = await lock(key).run(async () => (ranUnlocked = true), { timeout: 0 }).catch((e) => e)
        assert.equal(ranUnlocked, false)
        assert.ok(outcome instanceof LockStoreError && CODES.includes(outcome.code), String(outcome))
        assert.match(outcome.message, /^MySqlLockStore\.acquire: /)
        const took = performance.now() - started
        assert.ok(took < 2_500, `failed after ${took} ms, not within connectTimeout + commandTimeout`)
        // A waiter with time left rides it out.
        const waiting = lock(key, 10_000).acquire({ timeout: 15_000, retryDelay: 100 })
        await sleep(300)
        await server.start()
        assert.equal(await waiting, true, 'the waiter got the lock once the server was back')
      } finally {
        await server.start()
        await connectAdmin()
      }
      assert.deepEqual(await lock(uniqueKey('back')).run(async () => 'back'), [true, 'back'])
    })
  })

  test('each operation on a stopped server fails within connectTimeout + commandTimeout', async () => {
    const s = store({ poolSize: 2 })
    const key = uniqueKey('each')
    assert.equal(await s.acquire(key, 'o', 60_000), true)
    await server.stop()
    try {
      const ops = {
        acquire: () => s.acquire(uniqueKey('a'), 'o', 1_000),
        isLocked: () => s.isLocked(key),
        remainingTime: () => s.remainingTime(key),
        extend: () => s.extend(key, 'o', 60_000),
        release: () => s.release(key, 'o'),
        semaphore: () => withStore(s, () => semaphore(uniqueKey('s'), 2).acquire()),
      }
      for (const [name, op] of Object.entries(ops)) {
        const started = performance.now()
        const e = await op().then(() => assert.fail(`${name} succeeded on a stopped server`), (error) => error)
        const took = performance.now() - started
        assert.ok(CODES.includes(e.code), `${name}: ${e}`)
        assert.ok(took < 2_000 + 250, `${name} failed after ${took} ms`)
      }
    } finally {
      await server.start()
      await connectAdmin()
    }
    await eventually(async () => assert.equal(await s.release(key, 'o'), true, 'the lock held before the crash'), 5_000)
  })

  test('a clean restart: the next operations succeed at once, each sent again on a fresh connection', async () => {
    const others = await rootConnections()
    const s = store({ poolSize: 4 })
    const keys = Array.from({ length: 64 }, (_, i) => uniqueKey(`restart-${i}`))
    assert.deepEqual(await Promise.all(keys.map((k) => s.acquire(k, 'o', 60_000))), Array(64).fill(true))
    const before = await newConnections(others)
    assert.equal(before.length, 4, `four connections open: ${before}`)
    await server.restart()
    await connectAdmin()
    const outcomes = await Promise.allSettled(keys.map((k) => s.isLocked(k)))
    const failed = outcomes.filter((o) => o.status === 'rejected').map((o) => o.reason.message)
    assert.deepEqual(failed, [], `${failed.length} of 64 failed after the restart`)
    assert.deepEqual(outcomes.map((o) => o.value), Array(64).fill(true), 'the locks survived the restart')
    assert.deepEqual(await Promise.all(keys.map((k) => s.release(k, 'o'))), Array(64).fill(true))
  })

  test('connections killed from another session (KILL <id>): idle or with statements in flight, no operation fails', async () => {
    const others = await rootConnections()
    const s = store({ poolSize: 4, commandTimeout: 3_000 })
    await withStore(s, async () => {
      await Promise.all(Array.from({ length: 64 }, (_, i) => s.isLocked(`warm-${i}`)))
      const idle = await newConnections(others)
      assert.equal(idle.length, 4)
      for (const id of idle) await admin.query(`KILL ${id}`)
      const keys = Array.from({ length: 64 }, (_, i) => uniqueKey(`killed-${i}`))
      assert.deepEqual(await Promise.all(keys.map((k) => s.acquire(k, 'o', 60_000))), Array(64).fill(true))
      assert.deepEqual(await Promise.all(keys.map((k) => s.release(k, 'o'))), Array(64).fill(true))
      const fresh = await newConnections(others)
      assert.equal(fresh.length, 4)
      assert.ok(fresh.every((id) => !idle.includes(id)), 'every connection was opened again')
      // And with 400 runs in flight while each connection is killed.
      const storm = Array.from({ length: 400 }, (_, i) => uniqueKey(`storm-${i}`))
      const runs = storm.map((k) => lock(k, 10_000).run(async () => 'done'))
      await Promise.all(fresh.map((id) => admin.query(`KILL ${id}`)))
      const results = await Promise.allSettled(runs)
      const failed = results.filter((r) => r.status === 'rejected').map((r) => r.reason.message)
      assert.deepEqual(failed, [], `${failed.length} of 400 failed`)
      assert.deepEqual(results.map((r) => r.value), Array(400).fill([true, 'done']))
      // run() resolves once its release is sent: each key's next statement comes after it.
      assert.deepEqual(await Promise.all(storm.map((k) => s.isLocked(k))), Array(400).fill(false), 'every run released')
      const [{ n }] = await rows("SELECT COUNT(*) AS n FROM keel_locks WHERE k LIKE 'storm-%' AND owner <> ''")
      assert.equal(Number(n), 0, 'every run released')
    })
  })

  test('max_connections reached: ERR_LOCK_STORE_UNAVAILABLE at once, and a waiter gets the lock once a connection frees', async () => {
    const full = await own({ maxConnections: 10 })
    const fillers = []
    cleanups.push(() => Promise.all(fillers.splice(0).map((f) => f.end().catch(() => {}))))
    // As root, so the one connection MariaDB keeps for SUPER is taken too.
    for (;;) {
      try {
        fillers.push(await mysql.createConnection(full.url))
      } catch (e) {
        assert.match(e.message, /Too many connections/)
        break
      }
      assert.ok(fillers.length <= 11, 'the server kept taking connections')
    }
    assert.equal(fillers.length, 11, 'max_connections, and one more for SUPER')
    const s = store({ poolSize: 1, connectTimeout: 2_000, commandTimeout: 2_000 }, full.url)
    const key = uniqueKey('full')
    const started = performance.now()
    await assert.rejects(s.isLocked(key), (e) => {
      assert.equal(e.code, 'ERR_LOCK_STORE_UNAVAILABLE', e.message)
      assert.match(e.message, /^MySqlLockStore\.isLocked: was not ready at mysql:\/\/root@127\.0\.0\.1:\d+\/test: Too many connections \(1040\)$/)
      return true
    })
    assert.ok(performance.now() - started < 1_000, 'refused at once, not timed out')
    // One connection free: the store's operations get it.
    await fillers.pop().end()
    await eventually(async () => assert.equal(await s.acquire(key, 'first', 1_000), true))
    // Full again (that store has the connection). A waiter in another store
    // tries again at its retryDelay until connections free: three, its
    // store's and the two of its process's ear, which hears of a lock handed
    // to it (a freed connection the ear takes, it keeps, and the waiter's
    // acquires would still be refused until its timeout).
    const other = store({ poolSize: 1, connectTimeout: 2_000, commandTimeout: 2_000 }, full.url)
    await assert.rejects(other.isLocked(key), (e) => e.code === 'ERR_LOCK_STORE_UNAVAILABLE')
    await withStore(other, async () => {
      const waiting = lock(key, 10_000).acquire({ timeout: 15_000, retryDelay: 100 })
      await sleep(500)
      await Promise.all([fillers.pop().end(), fillers.pop().end(), fillers.pop().end()])
      assert.equal(await waiting, true, 'the waiter tried again until connections were free')
    })
  })

  test("a statement stuck behind another session's row lock: TIMEOUT at commandTimeout, the server ends it too, and the key works after", async (t) => {
    const s = store({ poolSize: 4, commandTimeout: 1_500 })
    const key = uniqueKey('stuck')
    assert.equal(await s.acquire(key, 'a', 60_000), true)
    assert.equal(await s.release(key, 'a'), true)
    const others = Array.from({ length: 16 }, (_, i) => uniqueKey(`beside-${i}`))
    await Promise.all(others.map((k) => s.isLocked(k))) // every connection open
    const blocker = await mysql.createConnection(server.url)
    try {
      await blocker.query('BEGIN')
      await blocker.query('SELECT owner FROM keel_locks WHERE id = UNHEX(SHA2(?, 256)) FOR UPDATE', [key])
      const started = performance.now()
      const stuck = s.acquire(key, 'b', 60_000).then(
        () => assert.fail('the acquire got through a row lock'),
        (e) => ({ e, ms: performance.now() - started }),
      )
      await sleep(100)
      // Keys sent after it: those on its connection wait behind it, the rest do not.
      const beside = others.map(async (k) => {
        const sent = performance.now()
        assert.equal(await s.acquire(k, 'o', 60_000), true, k)
        return performance.now() - sent
      })
      const { e, ms } = await stuck
      assert.ok(['ERR_LOCK_STORE_TIMEOUT', 'ERR_LOCK_STORE_UNAVAILABLE'].includes(e.code), e.message)
      assert.match(e.message, /^MySqlLockStore\.acquire: /)
      assert.ok(ms > 1_000 && ms < 3_000, `failed after ${ms} ms`)
      const waited = await Promise.all(beside)
      const blocked = waited.filter((w) => w > 1_000).length
      t.diagnostic(`${e.code} after ${Math.round(ms)} ms; of 16 other keys sent 100 ms after it, ${blocked} waited behind it until it timed out (then went through on a fresh connection), the others took at most ${Math.round(Math.max(...waited.filter((w) => w <= 1_000)))} ms`)
      assert.ok(blocked < 16, 'some keys, on other connections, were not blocked')
      assert.ok(waited.every((w) => w < 1_000 || w < ms + 500), 'none waited past the stuck one')
      // Past the server's innodb_lock_wait_timeout (ceil(1500 / 1000) = 2 s), it gave the statement up too.
      await sleep(2_300 - (performance.now() - started))
      const waiting = await rows("SELECT ID FROM information_schema.processlist WHERE INFO LIKE 'INSERT INTO keel_locks%'")
      assert.deepEqual(waiting, [], 'no statement of the store waits on the row any more')
    } finally {
      await blocker.query('COMMIT').catch(() => {})
      await blocker.end()
    }
    const [row] = await rows('SELECT owner FROM keel_locks WHERE id = UNHEX(SHA2(?, 256))', [key])
    assert.equal(row.owner.length, 0, 'the timed-out acquire took nothing')
    assert.equal(await s.acquire(key, 'c', 60_000), true)
    assert.equal(await s.release(key, 'c'), true)
  })

  test(
    'a timed-out acquire that the server runs late is given back after it ran, not before: no lock held by nobody',
    async () => {
      const s = store({ poolSize: 1, commandTimeout: 1_500 })
      const key = uniqueKey('late')
      assert.equal(await s.isLocked(key), false)
      // Another application's transaction read the (missing) row FOR UPDATE at
      // REPEATABLE READ: the gap is locked, an insert there waits, an UPDATE of
      // the missing row does not.
      const blocker = await mysql.createConnection(server.url)
      try {
        await blocker.query('SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ')
        await blocker.query('BEGIN')
        await blocker.query('SELECT owner FROM keel_locks WHERE id = UNHEX(SHA2(?, 256)) FOR UPDATE', [key])
        await withStore(s, async () => {
          const e = await lock(key, 30_000).acquire().catch((error) => error)
          assert.equal(e.code, 'ERR_LOCK_STORE_TIMEOUT', e.message)
        })
        // Let go while the server still runs the acquire (before its own 2 s
        // lock wait ends), once the give-back has had time to run.
        await sleep(200)
        await blocker.query('COMMIT')
      } finally {
        await blocker.end()
      }
      await sleep(300)
      const held = await rows('SELECT owner FROM keel_locks WHERE id = UNHEX(SHA2(?, 256)) AND owner <> ?', [key, ''])
      assert.deepEqual(held.map((r) => r.owner.toString()), [], 'the timed-out acquire left the key held by an owner nobody has')
      assert.equal(await s.isLocked(key), false)
    },
  )

  const CUT = 'a connection reset on the way with an acquire waiting at the server: its session is ended first thing on the next, so only the acquire sent again runs'
  if (!lacking(['ss'], CUT)) {
    test(CUT, async (t) => {
      const others = await rootConnections()
      const s = store({ poolSize: 1, commandTimeout: 5_000 })
      const key = uniqueKey('reset')
      assert.equal(await s.isLocked(key), false)
      const [id] = await newConnections(others)
      const [{ HOST: host }] = await rows('SELECT HOST FROM information_schema.processlist WHERE ID = ?', [id])
      const port = host.split(':').pop()
      const waitingInserts = async () => (await rows("SELECT ID FROM information_schema.processlist WHERE INFO LIKE 'INSERT INTO keel_locks%'")).length
      // Another application's transaction locked the (missing) row's gap: an insert there waits.
      const blocker = await mysql.createConnection(server.url)
      try {
        await blocker.query('SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ')
        await blocker.query('BEGIN')
        await blocker.query('SELECT owner FROM keel_locks WHERE id = UNHEX(SHA2(?, 256)) FOR UPDATE', [key])
        const acquiring = s.acquire(key, 'a', 60_000)
        await eventually(async () => assert.equal(await waitingInserts(), 1))
        // The store's socket is reset under it, as by a middlebox: the
        // server's session, waiting on the row, does not notice.
        const cut = spawnSync('ss', ['-K', 'dst', '127.0.0.1', 'dport', '=', `:${server.port}`, 'sport', '=', `:${port}`], { encoding: 'utf8' })
        if (!cut.stdout.includes(`:${port}`)) {
          await blocker.query('COMMIT')
          await acquiring.catch(() => {})
          return t.skip(`ss -K could not close the socket (it needs root and a kernel with CONFIG_INET_DIAG_DESTROY): ${cut.stderr.trim()}`)
        }
        // The acquire goes again on a fresh connection, behind the fence: the
        // old session's insert is gone well before its 5 s row-lock wait ends.
        await sleep(500)
        assert.equal(await waitingInserts(), 1, 'only the acquire sent again waits')
        await blocker.query('COMMIT')
        assert.equal(await acquiring, true)
      } finally {
        await blocker.end()
      }
      assert.equal(await s.release(key, 'a'), true)
      await sleep(200)
      assert.equal(await s.isLocked(key), false, 'nothing took the key after its release')
    })
  }

  test('a wrong password: ERR_LOCK_STORE_AUTH without the password, not tried again for a moment, then tried again', async () => {
    const guarded = await own({ password: 'right-horse' })
    const root = await mysql.createConnection(guarded.url)
    cleanups.push(() => root.end())
    const denied = async () => Number((await root.query("SHOW GLOBAL STATUS LIKE 'Access_denied_errors'"))[0][0].Value)
    const s = store({ poolSize: 4 }, guarded.url.replace('right-horse', 'hunter2'))
    const errors = []
    const started = performance.now()
    for (let i = 0; i < 60; i++) errors.push(await s.isLocked(`k${i}`).catch((e) => e))
    const took = performance.now() - started
    for (const e of errors) {
      assert.equal(e.code, 'ERR_LOCK_STORE_AUTH', e.message)
      assert.ok(!e.message.includes('hunter2') && !e.message.includes('right-horse'), e.message)
      assert.match(e.message, /^MySqlLockStore\.isLocked: was refused by mysql:\/\/root@127\.0\.0\.1:\d+\/test: Access denied for user 'root'@'localhost' \(using password: YES\) \(1045\)/)
    }
    assert.doesNotMatch(errors[0].message, /not tried again/)
    const repeats = errors.filter((e) => / \(not tried again for a moment\)$/.test(e.message)).length
    assert.ok(took > 1_000 || repeats === 59, `${repeats} of 59 fast repeats said so (in ${took} ms)`)
    assert.ok((await denied()) <= Math.ceil(took / 1_000) + 1, `${await denied()} logins tried for 60 operations in ${took} ms`)
    // After the moment, a login is tried again (and refused again).
    const before = await denied()
    await sleep(1_100)
    const again = await s.isLocked('k').catch((e) => e)
    assert.equal(again.code, 'ERR_LOCK_STORE_AUTH')
    assert.doesNotMatch(again.message, /not tried again/)
    assert.equal(await denied(), before + 1)
    const right = store({}, guarded.url)
    assert.equal(await right.acquire('k', 'o', 1_000), true)
  })

  test('a read-only server: acquire, release and extend reject with ERR_LOCK_STORE_MYSQL saying read-only; plain reads still work; writable again, it works', async () => {
    const s = store({}, server.url.replace('root@', 'writer:writer-pw@'))
    const key = uniqueKey('ro')
    assert.equal(await s.acquire(key, 'o', 60_000), true)
    await admin.query('SET GLOBAL read_only = 1')
    try {
      const readOnly = (name) => (e) => {
        assert.equal(e.code, 'ERR_LOCK_STORE_MYSQL', e.message)
        assert.match(e.message, new RegExp(`^MySqlLockStore\\.${name}: cannot write: the server is read-only \\(read_only, or a replica\\) at mysql://writer@127\\.0\\.0\\.1:\\d+/test: .*read-only.* \\(1290\\)$`))
        return true
      }
      await assert.rejects(s.acquire(uniqueKey('ro-new'), 'o', 60_000), readOnly('acquire'))
      await assert.rejects(s.extend(key, 'o', 60_000), readOnly('extend'))
      await assert.rejects(s.release(key, 'o'), readOnly('release'))
      await withStore(s, () => assert.rejects(semaphore(uniqueKey('ro-sem'), 2).acquire(), readOnly('acquire')))
      assert.equal(await s.isLocked(key), true)
      assert.ok((await s.remainingTime(key)) > 50_000)
      assert.equal(await s.isLocked(uniqueKey('ro-free')), false)
    } finally {
      await admin.query('SET GLOBAL read_only = 0')
    }
    assert.equal(await s.release(key, 'o'), true)
    assert.equal(await s.acquire(uniqueKey('rw-again'), 'o', 1_000), true)
  })

  test(
    "a read-only server: a semaphore's and a read lock's reads (isLocked, holders, getRemainingTime) still work",
    async () => {
      const s = store({}, server.url.replace('root@', 'writer:writer-pw@'))
      await withStore(s, async () => {
        const permit = semaphore(uniqueKey('ro-permits'), 2, 60_000)
        const reader = readLock(uniqueKey('ro-reader'), 60_000)
        assert.equal(await permit.acquire(), true)
        assert.equal(await reader.acquire(), true)
        await admin.query('SET GLOBAL read_only = 1')
        try {
          assert.equal(await permit.isLocked(), false)
          assert.equal(await permit.holders(), 1)
          assert.ok((await permit.getRemainingTime()) > 50_000)
          assert.equal(await reader.holders(), 1)
        } finally {
          await admin.query('SET GLOBAL read_only = 0')
        }
        await permit.release()
        await reader.release()
      })
    },
  )

  test('nothing listening on the port: ERR_LOCK_STORE_CONNECTION at once', async () => {
    const port = await freePort()
    const s = store({}, `mysql://root:hunter2@127.0.0.1:${port}/test`)
    const started = performance.now()
    await assert.rejects(s.isLocked('k'), (e) => {
      assert.ok(e instanceof LockStoreError)
      assert.equal(e.code, 'ERR_LOCK_STORE_CONNECTION', e.message)
      assert.equal(e.message, `MySqlLockStore.isLocked: could not connect to mysql://root@127.0.0.1:${port}/test: Connection refused (os error 111)`)
      return true
    })
    assert.ok(performance.now() - started < 1_000)
    await assert.rejects(s.acquire('k', 'o', 1_000), (e) => e.code === 'ERR_LOCK_STORE_CONNECTION')
  })
})
