// MySqlLockStore keeps a line (contract-line.mjs): the places are rows of
// `<table>_line`, and a hand-over is told to the process it went to by
// ending the sleep of that process's ear (a KILL QUERY of the session that
// holds its user lock, from inside the line's procedure). What the server
// runs is seen in its general log (statements clients sent, not those a
// procedure runs): an acquire attempt is an executed INSERT into the lock
// table. A hand-over told is a KILL the server ran (Com_kill counts those
// of procedures too); MySQL has nothing that reaches every listener at once,
// so nothing is ever told to all.
import { before, after, test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import mysql from 'mysql2/promise'
import { setLockStore, MySqlLockStore } from '@shaferllc/keel/core'
import { startMariaDb } from '../../support/mariadb.mjs'
import { uniqueKey } from '../../support/servers.mjs'
import { lineContract } from './contract-line.mjs'
import { lacking } from '../helpers/tools.mjs'
import { node } from '../helpers/node.mjs'
import { eventually } from '../helpers/eventually.mjs'

const CHILD = fileURLToPath(new URL('../helpers/child.mjs', import.meta.url))

if (!lacking(['mariadb'], 'MySqlLockStore line')) {
  let server
  let store
  let inspect
  let env
  before(async () => {
    server = await startMariaDb()
    env = { KEEL_TEST_STORE: 'mysql-store', KEEL_TEST_MYSQL: server.url }
    store = setLockStore(new MySqlLockStore({ url: server.url }))
    inspect = await mysql.createConnection(server.url)
    // The store makes its objects with its first connection.
    await store.isLocked('warm')
  })
  after(async () => {
    await store?.close()
    await inspect?.end()
    await server?.close()
  })

  const count = async (sql, params = []) => Number((await inspect.query(sql, params))[0][0].n)
  const kills = async () => Number((await inspect.query("SHOW GLOBAL STATUS LIKE 'Com_kill'"))[0][0].Value)

  async function observe() {
    await inspect.query("SET GLOBAL log_output = 'TABLE', general_log = 1")
    await inspect.query('TRUNCATE mysql.general_log')
    const killsBefore = await kills()
    return {
      // Every key's (each test's key is its own).
      attempts: () => count(`SELECT COUNT(*) AS n FROM mysql.general_log WHERE command_type = 'Execute' AND argument LIKE 'INSERT INTO keel_locks %'`),
      told: async () => ({ handOvers: (await kills()) - killsBefore, broadcasts: 0 }),
      stop: () => inspect.query('SET GLOBAL general_log = 0'),
    }
  }

  const places = (key) => count('SELECT COUNT(*) AS n FROM keel_locks_line WHERE k = ? AND handed IS NULL', [Buffer.from(key)])

  lineContract(() => ({
    env,
    store,
    places,
    observe,
    leftovers: (key) => count('SELECT COUNT(*) AS n FROM keel_locks_line WHERE k = ?', [Buffer.from(key)]),
  }))

  test('line: a release by a user who may not wake the waiting process still hands the lock over, and the waiter finds it', async () => {
    // Another user, with the store's rights on its objects and no more: it
    // may not KILL a query of root's sessions (error 1095), so the hand-over
    // cannot end the wait of root's ear.
    const [routines] = await inspect.query("SELECT routine_name AS r FROM information_schema.routines WHERE routine_schema = 'test' AND routine_name LIKE 'keel\\_locks\\_%'")
    await inspect.query("CREATE USER IF NOT EXISTS plain@localhost IDENTIFIED BY 'plain-pw'")
    for (const t of ['keel_locks', 'keel_locks_holds', 'keel_locks_keys', 'keel_locks_line']) {
      await inspect.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON test.${t} TO plain@localhost`)
    }
    for (const { r } of routines) await inspect.query(`GRANT EXECUTE ON PROCEDURE test.${r} TO plain@localhost`)
    const plain = new MySqlLockStore({ url: server.url.replace('root@', 'plain:plain-pw@') })
    const key = uniqueKey('not-woken')
    try {
      assert.equal(await plain.acquire(key, 'plain-holder', 30_000), true)
      // A waiter in another process, as root, whose polls are a minute apart (its place is renewed every 200 ms).
      const child = spawn(...node([CHILD, 'queue', key, '20000', '60000']), { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] })
      let out = ''
      child.stdout.on('data', (d) => (out += d))
      const exited = new Promise((resolve) => child.once('exit', resolve))
      await eventually(async () => assert.equal(await places(key), 1, 'the waiter took its place'), 10_000)
      const released = Date.now()
      assert.equal(await plain.release(key, 'plain-holder'), true)
      // Handed over (held for the waiter), not left free: the hand-over ran though its wake was refused.
      assert.equal(await plain.isLocked(key), true, 'the lock went to the waiter')
      assert.equal(await exited, 0)
      const got = JSON.parse(out.trim().split('\n').pop())
      assert.equal(got.acquired, true)
      assert.ok(got.at - released < 1_000, `the waiter got in ${got.at - released} ms after the release`)
    } finally {
      await plain.close()
    }
  })
}
