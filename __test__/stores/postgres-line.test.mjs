// PostgresLockStore keeps a line (contract-line.mjs): the places are rows of
// `<table>_line`, and a hand-over is told by a pg_notify to the channel
// `keel_wake_<id>` of the process it went to, from inside the line's
// function. What the server runs is counted by pg_stat_statements (nested
// statements too): an acquire attempt is a top-level statement that inserts
// into the lock table; a hand-over told, the function's nested pg_notify; an
// announcement to every listener, a top-level release that notifies.
import { before, after } from 'node:test'
import pg from 'pg'
import { setLockStore, PostgresLockStore } from '@shaferllc/keel/core'
import { startPostgres } from '../../support/postgres.mjs'
import { lineContract } from './contract-line.mjs'

let server
let store
let inspect
let env
before(async () => {
  server = await startPostgres({ statements: true })
  env = { KEEL_TEST_STORE: 'postgres-store', KEEL_TEST_DATABASE: server.url }
  store = setLockStore(new PostgresLockStore({ url: server.url }))
  inspect = new pg.Client(server.url)
  await inspect.connect()
  await inspect.query('CREATE EXTENSION pg_stat_statements')
  // The store makes its objects with its first connection.
  await store.isLocked('warm')
})
after(async () => {
  await store?.close()
  await inspect?.end()
  await server?.close()
})

const count = async (sql, params = []) => Number((await inspect.query(sql, params)).rows[0].n)

async function observe() {
  await inspect.query('SELECT pg_stat_statements_reset()')
  const calls = (where) => count(`SELECT coalesce(sum(calls), 0) AS n FROM pg_stat_statements WHERE ${where}`)
  return {
    // Every key's: the statements are counted, not their parameters (each test's key is its own).
    attempts: () => calls(`toplevel AND query ILIKE '%INSERT INTO locks %'`),
    told: async () => ({
      handOvers: await calls(`NOT toplevel AND query ILIKE '%pg_notify%'`),
      // (A release that notifies; not a listener checking that it hears.)
      broadcasts: await calls(`toplevel AND query ILIKE '%pg_notify%' AND query ILIKE '%DELETE FROM%'`),
    }),
    stop: () => {},
  }
}

lineContract(() => ({
  env,
  store,
  places: (key) => count('SELECT count(*) AS n FROM locks_line WHERE key = $1 AND handed IS NULL', [key]),
  observe,
  leftovers: (key) => count('SELECT count(*) AS n FROM locks_line WHERE key = $1', [key]),
}))
