// SqliteLockStore keeps a line (contract-line.mjs): the places are rows of
// `<table>_line`, and a hand-over is told to the process it went to alone,
// by a datagram to that process's ear. With no server between the
// processes, what they did is counted in them (child.mjs reports it): a
// hand-over told is one a waiting process heard, an announcement anything
// else it heard from the others, and the acquire attempts are those its
// waiters sent the store, as the tracing channel counts them. The file
// itself is read through a connection of its own (better-sqlite3).
import { before, after } from 'node:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { setLockStore, getLockStore, SqliteLockStore } from '@shaferllc/keel/core'
import { lineContract, observeReports } from './contract-line.mjs'

let dir
let store
let previous
let file
let env
before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'keel-sqlite-line-'))
  const path = join(dir, 'locks.db')
  env = { KEEL_TEST_STORE: 'sqlite-store', KEEL_TEST_SQLITE: path, KEEL_TEST_REPORT_HEARD: '1' }
  previous = getLockStore()
  store = setLockStore(new SqliteLockStore(path))
  file = new Database(path, { readonly: true, timeout: 5_000 })
})
after(async () => {
  file?.close()
  setLockStore(previous)
  await store?.close()
  rmSync(dir, { recursive: true, force: true })
})

const count = (sql, ...params) => file.prepare(sql).get(...params).n

lineContract(() => ({
  env,
  store,
  places: async (key) => count('SELECT count(*) AS n FROM keel_locks_line WHERE key = ? AND handed IS NULL', key),
  observe: observeReports,
  // A place, and the note of where its process's ear is.
  leftovers: async (key) =>
    count('SELECT count(*) AS n FROM keel_locks_line WHERE key = ?', key) + count('SELECT count(*) AS n FROM keel_locks_ears WHERE key = ?', key),
}))
