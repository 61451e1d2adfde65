// MySqlLockStore beyond the store contract (contract/mysql.test.mjs), on
// MariaDB servers this file starts, looked at through mysql2: keys are exact
// (found by the SHA-256 of their bytes, kept as bytes), acquire is one atomic
// statement, fencing tokens grow across processes, a clean restart and a
// crash, every time is the server's (a process with a wrong clock:
// mysql-clock.test.mjs), released rows keep their token and the
// sweep deletes only what it may, a user without CREATE rights works once the
// objects are made, stores in two processes exclude each other, and close()
// lets a process exit. Skipped, saying what to install, without MariaDB.

import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'
import mysql from 'mysql2/promise'
import { lock, semaphore, readLock, writeLock, restoreLock, MySqlLockStore } from '@shaferllc/keel/core'
import { uniqueKey } from '../../support/servers.mjs'
import { startMariaDb } from '../../support/mariadb.mjs'
import { eventually } from '../helpers/eventually.mjs'
import { runChild, startHolder, killHard } from '../helpers/processes.mjs'
import { describeWith } from '../helpers/tools.mjs'
import { withStore } from '../helpers/stores.mjs'

const CHILD = fileURLToPath(new URL('../helpers/child.mjs', import.meta.url))
/** A key's row id: the SHA-256 of its UTF-8 bytes. */
const idOf = (key) => createHash('sha256').update(key, 'utf8').digest()

describeWith(['mariadb'], 'MySqlLockStore on a MariaDB server of its own', () => {
  let server
  let inspect
  const stores = []
  const store = (options = {}) => {
    const s = new MySqlLockStore({ url: server.url, connectTimeout: 5_000, commandTimeout: 5_000, ...options })
    stores.push(s)
    return s
  }
  /** A mysql2 connection to look at the tables with (made again after a restart). */
  const connectInspector = async () => {
    await inspect?.end().catch(() => {})
    inspect = await mysql.createConnection(server.url)
    inspect.on('error', () => {})
  }
  const rows = async (sql, params = []) => (await inspect.query(sql, params))[0]
  const serverNowMs = async () => Number((await rows('SELECT CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) AS ms'))[0].ms)
  const env = () => ({ KEEL_TEST_STORE: 'mysql-store', KEEL_TEST_MYSQL: server.url })

  before(async () => {
    // Commits wait for their redo log: a crash loses nothing committed.
    server = await startMariaDb({ durable: true })
    await connectInspector()
  })

  after(async () => {
    for (const s of stores) await s.close()
    await inspect?.end().catch(() => {})
    await server?.close()
  })

  test('keys are exact: case, trailing spaces, Unicode normalisation and emoji make distinct locks', async () => {
    const s = store()
    const p = uniqueKey('exact')
    const pairs = [
      [`${p}:Invoice`, `${p}:invoice`],
      [`${p}:a`, `${p}:a `],
      [`${p}:${'é'.normalize('NFC')}`, `${p}:${'é'.normalize('NFD')}`],
      [`${p}:🔒`, `${p}:🔓`],
    ]
    for (const [a, b] of pairs) {
      assert.notEqual(a, b)
      assert.equal(await s.acquire(a, 'first', 30_000), true, a)
      assert.equal(await s.acquire(b, 'second', 30_000), true, `${JSON.stringify(b)} is not ${JSON.stringify(a)}`)
      assert.equal(await s.isLocked(b), true)
      assert.equal(await s.release(a, 'first'), true)
      assert.equal(await s.isLocked(b), true, 'releasing one left the other held')
      assert.equal(await s.release(b, 'second'), true)
    }
    // Each key its own row, holding the key's own bytes.
    const keys = pairs.flat()
    const found = await rows('SELECT k FROM keel_locks WHERE id IN (?)', [keys.map(idOf)])
    assert.equal(found.length, keys.length)
    assert.deepEqual(found.map((r) => r.k.toString('hex')).sort(), keys.map((k) => Buffer.from(k).toString('hex')).sort())
  })

  test('an emoji key, a 1 KB key and a 1 MB key: acquire, isLocked, remainingTime, release; k holds their UTF-8 bytes', async () => {
    const s = store()
    const p = uniqueKey('big')
    const keys = [`${p}:🔒🧑‍💻`, `${p}:${'é'.repeat(510)}`, `${p}:${'ab€'.repeat(209_716)}`]
    assert.ok(Buffer.byteLength(keys[1]) > 1_000 && Buffer.byteLength(keys[2]) > 1_048_576)
    for (const key of keys) {
      assert.equal(await s.acquire(key, 'o', 30_000), true)
      assert.equal(await s.acquire(key, 'p', 30_000), false)
      assert.equal(await s.isLocked(key), true)
      assert.ok((await s.remainingTime(key)) > 25_000)
      const [row] = await rows('SELECT k, owner FROM keel_locks WHERE id = ?', [idOf(key)])
      assert.ok(row.k.equals(Buffer.from(key, 'utf8')), `k holds ${row.k.length} bytes, not the key's ${Buffer.byteLength(key)}`)
      assert.equal(row.owner.toString(), 'o')
      assert.equal(await s.release(key, 'o'), true)
      assert.equal(await s.isLocked(key), false)
    }
  })

  test('acquire is one atomic statement: of 50 racing acquires on 10 stores, one takes a free key and one an expired row', async () => {
    const racing = Array.from({ length: 10 }, () => store({ poolSize: 4 }))
    // Every store connected first, so the acquires race on the server, not in connecting.
    await Promise.all(racing.map((s) => s.isLocked(uniqueKey('warm'))))
    const free = uniqueKey('race-free')
    const won = await Promise.all(Array.from({ length: 50 }, (_, i) => racing[i % 10].acquire(free, `o${i}`, 30_000)))
    assert.equal(won.filter(Boolean).length, 1, `${won.filter(Boolean).length} took it`)
    assert.equal((await rows('SELECT owner FROM keel_locks WHERE id = ?', [idOf(free)]))[0].owner.toString(), `o${won.indexOf(true)}`)
    const expired = uniqueKey('race-expired')
    await inspect.query("INSERT INTO keel_locks (id, k, owner, expires_at, token) VALUES (?, ?, 'gone', 1, 5)", [idOf(expired), Buffer.from(expired)])
    const took = await Promise.all(Array.from({ length: 50 }, (_, i) => racing[i % 10].acquire(expired, `o${i}`, 30_000)))
    assert.equal(took.filter(Boolean).length, 1, `${took.filter(Boolean).length} took the expired row`)
    const [row] = await rows('SELECT owner, token FROM keel_locks WHERE id = ?', [idOf(expired)])
    assert.equal(row.owner.toString(), `o${took.indexOf(true)}`)
    assert.ok(Number(row.token) > 5)
  })

  test('fencing tokens strictly grow per key across 3 child processes taking turns with this one', async () => {
    const key = uniqueKey('fenced')
    const tokens = []
    await withStore(store(), async () => {
      for (let i = 0; i < 3; i++) {
        const { serialized, fencingToken } = await runChild(env(), 'take', key, '30000')
        tokens.push(fencingToken)
        assert.equal(await lock(key).acquireImmediately(), false, 'the child still holds it')
        assert.equal(await restoreLock(serialized).release(), true)
        await lock(key).run(async (held) => tokens.push(held.fencingToken))
      }
    })
    assert.equal(tokens.length, 6)
    assert.ok(tokens.every((t) => Number.isSafeInteger(t) && t > 0), JSON.stringify(tokens))
    assert.ok(tokens.every((t, i) => i === 0 || t > tokens[i - 1]), `not increasing: ${tokens}`)
  })

  test('fencing tokens keep growing for locks, permits, readers and writers across a clean restart and a crash', async () => {
    const kinds = {
      lock: { key: uniqueKey('f-lock'), child: [], make: (k) => lock(k, 30_000), family: null },
      semaphore: { key: uniqueKey('f-sem'), child: ['semaphore:3'], make: (k) => semaphore(k, 3, 30_000), family: 's' },
      read: { key: uniqueKey('f-read'), child: ['read'], make: (k) => readLock(k, 30_000), family: 'r' },
      write: { key: uniqueKey('f-write'), child: ['write'], make: (k) => writeLock(k, 30_000), family: 'r' },
    }
    const tokens = Object.fromEntries(Object.keys(kinds).map((kind) => [kind, []]))
    /** One turn per kind: taken in a child, given back here, then taken here. */
    const turn = async (withChild) => {
      for (const [kind, { key, child, make }] of Object.entries(kinds)) {
        if (withChild) {
          const { serialized, fencingToken } = await runChild(env(), 'take', key, '30000', ...child)
          tokens[kind].push(fencingToken)
          assert.equal(await restoreLock(serialized).release(), true, `${kind}: given back`)
        }
        const [ran] = await make(key).run(async (held) => tokens[kind].push(held.fencingToken))
        assert.ok(ran, kind)
      }
    }
    /** Pushes every key's stored token a day past the clock: later tokens grow from the row, not the clock. */
    const bump = async () => {
      const day = 86_400_000_000
      for (const { key, family } of Object.values(kinds)) {
        const [table, where] = family ? ['keel_locks_keys', 'AND family = ?'] : ['keel_locks', '']
        const [r] = await inspect.query(`UPDATE ${table} SET token = token + ? WHERE id = ? ${where}`, [day, idOf(key), ...(family ? [family] : [])])
        assert.equal(r.affectedRows, 1)
      }
      return Object.fromEntries(Object.entries(kinds).map(([kind]) => [kind, tokens[kind].at(-1) + day]))
    }
    await withStore(store(), async () => {
      await turn(true)
      await turn(false)
      const beforeRestart = await bump()
      await server.restart()
      await connectInspector()
      await eventually(() => turn(false), 15_000)
      for (const kind of Object.keys(kinds)) assert.ok(tokens[kind].at(-1) > beforeRestart[kind], `${kind} after the restart`)
      await turn(true)
      const beforeCrash = await bump()
      await server.stop() // SIGKILL: a crash
      await server.start()
      await connectInspector()
      await eventually(() => turn(false), 15_000)
      for (const kind of Object.keys(kinds)) assert.ok(tokens[kind].at(-1) > beforeCrash[kind], `${kind} after the crash`)
      await turn(true)
    })
    for (const [kind, list] of Object.entries(tokens)) {
      assert.ok(list.every((t) => Number.isSafeInteger(t)), `${kind}: ${list}`)
      assert.ok(list.every((t, i) => i === 0 || t > list[i - 1]), `${kind} not increasing: ${list}`)
    }
  })

  test("every time is the server's: remainingTime is the TTL, a 200 ms lock lapses on time, extend moves the expiry", async () => {
    const s = store()
    const key = uniqueKey('times')
    assert.equal(await s.acquire(key, 'a', 5_000), true)
    const left = await s.remainingTime(key)
    assert.ok(left > 4_000 && left <= 5_000, `remaining ${left}`)
    const [row] = await rows('SELECT expires_at FROM keel_locks WHERE id = ?', [idOf(key)])
    const byServer = Number(row.expires_at) - (await serverNowMs())
    assert.ok(byServer > 4_000 && byServer <= 5_000, `expires_at is ${byServer} ms from the server's now`)
    assert.equal(await s.extend(key, 'a', 60_000), true)
    assert.ok((await s.remainingTime(key)) > 55_000)
    const [moved] = await rows('SELECT expires_at FROM keel_locks WHERE id = ?', [idOf(key)])
    assert.ok(Number(moved.expires_at) - Number(row.expires_at) > 50_000, 'the row expires later')

    const brief = uniqueKey('brief')
    assert.equal(await s.acquire(brief, 'a', 200), true)
    assert.equal(await s.acquire(brief, 'b', 5_000), false)
    assert.equal(await s.extend(brief, 'b', 5_000), false)
    await sleep(300)
    assert.equal(await s.isLocked(brief), false)
    assert.equal(await s.remainingTime(brief), null)
    assert.equal(await s.extend(brief, 'a', 5_000), false, 'a lapsed lock is not extended')
    assert.equal(await s.acquire(brief, 'b', 5_000), true)
  })

  test("a released lock's row stays, owner '' and its token kept, and the next acquire's token is larger", async () => {
    const s = store()
    const key = uniqueKey('kept')
    await withStore(s, async () => {
      const first = lock(key, 30_000)
      assert.equal(await first.acquire(), true)
      const token = first.fencingToken
      assert.equal(await first.release(), true)
      const [row] = await rows('SELECT k, owner, expires_at, token FROM keel_locks WHERE id = ?', [idOf(key)])
      assert.equal(row.owner.length, 0, `owner is ${row.owner}`)
      assert.equal(Number(row.token), token, 'the token stays in the row')
      assert.ok(Number(row.expires_at) <= (await serverNowMs()))
      assert.equal(await s.isLocked(key), false)
      const second = lock(key, 30_000)
      assert.equal(await second.acquire(), true)
      assert.ok(Number(row.token) > 0 && second.fencingToken > Number(row.token), `${second.fencingToken} after ${row.token}`)
      assert.equal((await rows('SELECT COUNT(*) AS n FROM keel_locks WHERE id = ?', [idOf(key)]))[0].n, 1)
      await second.release()
    })
  })

  test('the sweep deletes lapsed holds and rows an hour past expiry, 500 at a time, and leaves the rest', async () => {
    const table = 'swept'
    const s = store({ table, sweepInterval: 10 })
    await withStore(s, async () => {
      assert.equal(await s.acquire(uniqueKey('first'), 'o', 60_000), true) // makes the tables (and sweeps them, empty)
      const now = await serverNowMs()
      const recent = uniqueKey('lapsed-a-minute-ago')
      await inspect.query(`INSERT INTO ${table} (id, k, owner, expires_at, token) VALUES (?, ?, 'gone', ?, 7)`, [idOf(recent), Buffer.from(recent), now - 60_000])
      const live = uniqueKey('live')
      assert.equal(await s.acquire(live, 'o', 60_000), true)
      const released = uniqueKey('released')
      assert.equal(await s.acquire(released, 'o', 60_000), true)
      assert.equal(await s.release(released, 'o'), true)
      // Holds: a permit that lapses, one that does not; key rows an hour old (no holds) and fresh.
      const lapsing = semaphore(uniqueKey('sem-lapsing'), 2, 150)
      const lasting = semaphore(uniqueKey('sem-lasting'), 2, 60_000)
      assert.equal(await lapsing.acquire(), true)
      assert.equal(await lasting.acquire(), true)
      const stale = uniqueKey('stale-key-row')
      await inspect.query(`INSERT INTO ${table}_keys (id, family, k, token) VALUES (?, 's', ?, ?)`, [idOf(stale), Buffer.from(stale), now * 1000 - 3_700_000_000])
      // Made last: the acquires above may each have started a sweep.
      const old = Array.from({ length: 1_200 }, (_, i) => [idOf(`old:${i}`), Buffer.from(`old:${i}`), 'gone', now - 3_700_000, 7])
      await inspect.query(`INSERT INTO ${table} (id, k, owner, expires_at, token) VALUES ?`, [old])
      await sleep(200)
      const count = async (where, params = []) => Number((await rows(`SELECT COUNT(*) AS n FROM ${where}`, params))[0].n)
      assert.equal(await count(`${table}_holds`), 2)
      assert.equal(await count(`${table} WHERE k LIKE 'old:%'`), 1_200)
      assert.equal(await s.acquire(uniqueKey('trigger'), 'o', 60_000), true)
      // One sweep: one batch of the old rows.
      await eventually(async () => assert.equal(await count(`${table} WHERE k LIKE 'old:%'`), 700))
      await sleep(100)
      assert.equal(await count(`${table} WHERE k LIKE 'old:%'`), 700, 'no sweep ran without an acquire')
      await eventually(async () => {
        await s.acquire(uniqueKey('trigger'), 'o', 60_000)
        assert.equal(await count(`${table} WHERE k LIKE 'old:%'`), 0)
      })
      for (const key of [recent, live, released]) assert.equal(await count(`${table} WHERE id = ?`, [idOf(key)]), 1, key)
      assert.equal(await count(`${table}_holds WHERE id = ?`, [idOf(lapsing.key)]), 0, 'the lapsed permit is swept')
      assert.equal(await count(`${table}_holds WHERE id = ?`, [idOf(lasting.key)]), 1, 'the live permit stays')
      assert.equal(await count(`${table}_keys WHERE id = ?`, [idOf(stale)]), 0, 'the hour-old key row is swept')
      assert.equal(await count(`${table}_keys WHERE id = ?`, [idOf(lasting.key)]), 1)
      assert.equal(await lasting.release(), true)
    })
  })

  test('a store used only for semaphores and read-write locks sweeps too (its acquires start the sweep)', async () => {
    const table = 'swept_holds'
    const s = store({ table, sweepInterval: 10 })
    await withStore(s, async () => {
      assert.equal(await s.isLocked(uniqueKey('makes-the-tables')), false) // a read: no sweep
      const now = await serverNowMs()
      const lapsed = Array.from({ length: 20 }, (_, i) => [idOf(`lapsed:${i}`), 's', idOf(`o${i}`), Buffer.from(`o${i}`), now - 60_000])
      await inspect.query(`INSERT INTO ${table}_holds (id, kind, oid, owner, expires_at) VALUES ?`, [lapsed])
      await sleep(50)
      const count = async () => Number((await rows(`SELECT COUNT(*) AS n FROM ${table}_holds WHERE expires_at < ?`, [now]))[0].n)
      assert.equal(await count(), 20, 'no sweep without an acquire')
      await eventually(async () => {
        const reader = readLock(uniqueKey('trigger'), 60_000)
        assert.equal(await reader.acquire(), true)
        await reader.release()
        assert.equal(await count(), 0)
      })
      const permit = semaphore(uniqueKey('after'), 2, 60_000)
      assert.equal(await permit.acquire(), true)
      assert.equal(await permit.release(), true)
    })
  })

  test('statements are prepared once per connection; a server that will not prepare them (max_prepared_stmt_count reached) gets them as text, and every kind works', async () => {
    const executed = async () => Number((await rows("SHOW GLOBAL STATUS LIKE 'Com_stmt_execute'"))[0].Value)
    const exercise = async (s) => {
      await withStore(s, async () => {
        const key = uniqueKey('prepared-or-not')
        const first = lock(key, 30_000)
        assert.equal(await first.acquire(), true)
        assert.equal(await lock(key, 30_000).acquire(), false, 'a second owner is refused')
        assert.equal(await first.isLocked(), true)
        assert.ok((await first.getRemainingTime()) > 29_000)
        await first.extend(40_000)
        assert.ok((await first.getRemainingTime()) > 39_000)
        const token = first.fencingToken
        assert.equal(await first.release(), true)
        const second = lock(key, 30_000)
        assert.equal(await second.acquire(), true)
        assert.ok(second.fencingToken > token, `${second.fencingToken} after ${token}`)
        assert.equal(await second.release(), true)
        const permits = uniqueKey('permits')
        const [a, b, c] = [semaphore(permits, 2, 5_000), semaphore(permits, 2, 5_000), semaphore(permits, 2, 5_000)]
        assert.equal(await a.acquire(), true)
        assert.equal(await b.acquire(), true)
        assert.equal(await c.acquire(), false)
        assert.equal(await a.release(), true)
        assert.equal(await c.acquire(), true)
        await Promise.all([b.release(), c.release()])
        const rw = uniqueKey('rw')
        const reader = readLock(rw, 5_000)
        assert.equal(await reader.acquire(), true)
        assert.equal(await writeLock(rw, 5_000).acquire(), false)
        assert.equal(await reader.release(), true)
        assert.deepEqual(await writeLock(rw, 5_000).run(async () => 'written'), [true, 'written'])
      })
    }
    const before = await executed()
    await exercise(store({ poolSize: 2 }))
    const prepared = (await executed()) - before
    assert.ok(prepared >= 20, `${prepared} prepared statements ran`)
    const [{ most }] = await rows('SELECT @@global.max_prepared_stmt_count AS most')
    await inspect.query('SET GLOBAL max_prepared_stmt_count = 0')
    try {
      const asText = await executed()
      await exercise(store({ poolSize: 2 }))
      assert.equal((await executed()) - asText, 0, 'nothing was prepared, all went as text')
      // Room for half of one connection's statements: the rest go as text.
      const [{ Value: inUse }] = await rows("SHOW GLOBAL STATUS LIKE 'Prepared_stmt_count'")
      await inspect.query(`SET GLOBAL max_prepared_stmt_count = ${Number(inUse) + 5}`)
      const some = await executed()
      await exercise(store({ poolSize: 1 }))
      assert.ok((await executed()) - some > 0, 'some went prepared')
    } finally {
      await inspect.query(`SET GLOBAL max_prepared_stmt_count = ${Number(most)}`)
    }
  })

  test("a user without CREATE rights: works with the objects MySqlLockStore.schema() made; without them, an error naming it", async () => {
    const table = 'made_ahead'
    // As a DBA runs it: through the client, the table named with its database,
    // twice (run again after an upgrade, say). The procedure has the name a
    // store on the URL's database, the table named without it, looks for.
    const script = MySqlLockStore.schema(`test.${table}`)
    assert.equal(MySqlLockStore.schema(table), script.replaceAll('test.', ''), 'the same objects, only the database named')
    await server.source(script)
    await server.source(script)
    const procedures = [...script.matchAll(/CREATE PROCEDURE .*?test\.(\w+)\(/g)].map((m) => m[1])
    assert.deepEqual(
      procedures.map((p) => p.replace(/_[0-9a-f]{8}$/, '')),
      [`${table}_hold`, `${table}_line`, `${table}_ear`],
    )
    const tables = [table, `${table}_holds`, `${table}_keys`, `${table}_line`]
    assert.deepEqual(
      (await rows(`SELECT table_name AS t FROM information_schema.tables WHERE table_schema = 'test' AND table_name LIKE '${table}%' ORDER BY 1`)).map((r) => r.t),
      tables,
    )
    for (const procedure of procedures) {
      assert.equal((await rows(`SELECT COUNT(*) AS n FROM information_schema.routines WHERE routine_schema = 'test' AND routine_name = '${procedure}'`))[0].n, 1)
    }
    await inspect.query("CREATE USER locker@localhost IDENTIFIED BY 'locker-pw'")
    for (const t of tables) {
      await inspect.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON test.${t} TO locker@localhost`)
    }
    for (const procedure of procedures) {
      await inspect.query(`GRANT EXECUTE ON PROCEDURE test.${procedure} TO locker@localhost`)
    }
    const url = server.url.replace('root@', 'locker:locker-pw@')
    const locker = store({ url, table })
    await withStore(locker, async () => {
      assert.deepEqual(await lock(uniqueKey('plain'), 5_000).run(async () => 'locked'), [true, 'locked'])
      const permits = uniqueKey('permits')
      const [a, b] = [semaphore(permits, 2, 5_000), semaphore(permits, 2, 5_000)]
      assert.equal(await a.acquire(), true)
      assert.equal(await b.acquire(), true)
      assert.equal(await semaphore(permits, 2, 5_000).acquireImmediately(), false)
      await Promise.all([a.release(), b.release()])
      const rw = uniqueKey('rw')
      assert.deepEqual(await readLock(rw, 5_000).run(async () => 'read'), [true, 'read'])
      assert.deepEqual(await writeLock(rw, 5_000).run(async () => 'written'), [true, 'written'])
    })
    const missing = store({ url, table: 'never_made', connectTimeout: 2_000, commandTimeout: 2_000 })
    await assert.rejects(missing.isLocked('k'), (e) => {
      assert.equal(e.code, 'ERR_LOCK_STORE_MYSQL', e.message)
      assert.match(e.message, /^MySqlLockStore\.isLocked: /)
      assert.match(e.message, /never_made/)
      assert.match(e.message, /the procedures never_made_hold_[0-9a-f]{8}, never_made_line_[0-9a-f]{8} and never_made_ear_[0-9a-f]{8} /, 'which procedures it looked for')
      assert.match(e.message, /MySqlLockStore\.schema\("never_made"\)/)
      assert.ok(!e.message.includes('locker-pw'), e.message)
      return true
    })
    assert.equal((await rows("SELECT COUNT(*) AS n FROM information_schema.tables WHERE table_name LIKE 'never_made%'"))[0].n, 0)
  })

  test('interop: stores in two processes on one table exclude each other, both ways', async () => {
    const mine = store()
    const key = uniqueKey('interop')
    const { child, result } = await startHolder(env(), 'hold', key, '30000')
    try {
      assert.equal(await mine.acquire(key, 'here', 30_000), false, 'the child process holds it')
      assert.equal(await mine.isLocked(key), true)
      assert.ok((await mine.remainingTime(key)) > 25_000)
    } finally {
      await killHard(child)
    }
    // Killed, its lock stays until its TTL; given back from its string, it is free.
    assert.equal(await mine.acquire(key, 'here', 30_000), false)
    await withStore(mine, async () => assert.equal(await restoreLock(result.serialized).release(), true))
    assert.equal(await mine.acquire(key, 'here', 30_000), true)
    assert.equal((await runChild(env(), 'try', key, '30000')).acquired, false, 'this process holds it')
    assert.equal(await mine.release(key, 'here'), true)
    assert.equal((await runChild(env(), 'try', key, '30000')).acquired, true)
  })

  test('close(): later operations reject with ERR_LOCK_STORE_CLOSED', async () => {
    const s = new MySqlLockStore({ url: server.url })
    assert.equal(await s.acquire(uniqueKey('closing'), 'o', 1_000), true)
    await s.close()
    for (const op of [() => s.isLocked('k'), () => s.acquire('k', 'o', 1_000), () => s.release('k', 'o')]) {
      await assert.rejects(op(), (e) => e.code === 'ERR_LOCK_STORE_CLOSED' && /^MySqlLockStore\.\w+: the store is closed/.test(e.message))
    }
  })

  test('a process exits by itself after its work: with the store closed, and left open and idle', async () => {
    /** Runs child.mjs to its end; killed (and failed) if it has not exited within `ms`. */
    const exitsWithin = (extra, ms, ...args) =>
      new Promise((resolve, reject) => {
        const started = performance.now()
        const child = spawn(process.execPath, [CHILD, ...args], { env: { ...process.env, ...env(), ...extra }, stdio: ['ignore', 'pipe', 'pipe'] })
        let out = ''
        child.stdout.on('data', (d) => (out += d))
        child.stderr.on('data', (d) => (out += d))
        const timer = setTimeout(() => child.kill('SIGKILL'), ms)
        child.once('exit', (code, signal) => {
          clearTimeout(timer)
          if (code === 0) resolve({ result: JSON.parse(out.trim().split('\n').pop()), ms: performance.now() - started })
          else reject(new Error(`the child did not exit by itself within ${ms} ms (${code ?? signal}):\n${out}`))
        })
      })
    const closed = await exitsWithin({}, 5_000, 'try', uniqueKey('exits'), '60000')
    assert.equal(closed.result.acquired, true)
    const open = await exitsWithin({ KEEL_TEST_LEAVE_OPEN: '1' }, 5_000, 'try', uniqueKey('exits-open'), '60000')
    assert.equal(open.result.acquired, true)
  })
})
