// The tests use only servers of their own (or the ones KEEL_TEST_REDIS_URL
// and KEEL_TEST_DATABASE_URL name), never the ones REDIS_URL and
// DATABASE_URL name: those may be a developer's app servers. With both
// pointing at a Redis and a PostgreSQL this file starts (the "developer's"),
// test files that open every kind of store, in this process and in child
// processes, run in a `node --test` of their own; then nothing was written
// there: no key, no schema, table, sequence or function, and no connection
// was made to the Redis at all.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import pg from 'pg'
import { Redis } from 'ioredis'
import { startRedis } from '../../support/servers.mjs'
import { startPostgres } from '../../support/postgres.mjs'
import { runNode } from '../helpers/node-test.mjs'

// Each opens its stores a different way: redisForTests and postgresForTests,
// openStore in this process and in children (KEEL_TEST_REDIS,
// KEEL_TEST_DATABASE), the docs' ioredis client and database store, child
// scripts that read the URL they are given, a test file's own servers.
const FILES = [
  '__test__/stores/fencing.test.mjs',
  '__test__/stores/interop.test.mjs',
  '__test__/stores/contract/docs-ioredis.test.mjs',
  '__test__/stores/contract/docs-database-postgres.test.mjs',
  '__test__/stores/postgres-clock.test.mjs',
  '__test__/stores/postgres-rights.test.mjs',
  '__test__/runtime/processes.test.mjs',
  '__test__/package/demo.test.mjs',
]

let redis
let postgres

before(async () => {
  redis = await startRedis()
  postgres = await startPostgres()
})

after(async () => {
  await redis?.close()
  await postgres?.close()
})

/** What a database holds outside PostgreSQL's own catalogs: schemas, relations, functions. */
async function objects(url) {
  const client = new pg.Client(url)
  await client.connect()
  try {
    const own = "NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%' AND n.nspname NOT LIKE 'pg_temp%'"
    const { rows } = await client.query(`
      SELECT 'schema ' || n.nspname AS object FROM pg_namespace n WHERE n.nspname ${own}
      UNION ALL
      SELECT c.relkind::text || ' ' || n.nspname || '.' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname ${own}
      UNION ALL
      SELECT 'function ' || n.nspname || '.' || p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname ${own}
      ORDER BY 1`)
    return rows.map((row) => row.object)
  } finally {
    await client.end()
  }
}

/** Client connections the Redis server has accepted so far. */
async function redisConnections(inspect) {
  return Number(/total_connections_received:(\d+)/.exec(await inspect.info('stats'))[1])
}

test("with REDIS_URL and DATABASE_URL naming a developer's servers, the tests write nothing there", async () => {
  const inspect = new Redis(redis.url)
  try {
    const before = { keys: await inspect.dbsize(), connections: await redisConnections(inspect), objects: await objects(postgres.url) }
    assert.deepEqual(before.objects, ['schema public'])

    const r = await runNode(['--test', '--test-concurrency=2', '--test-reporter=spec', ...FILES], {
      REDIS_URL: redis.url,
      DATABASE_URL: postgres.url,
      KEEL_TEST_REDIS_URL: undefined,
      KEEL_TEST_DATABASE_URL: undefined,
    })
    assert.equal(r.code, 0, r.output)
    assert.match(r.output, /ℹ fail 0/)

    assert.equal(await inspect.dbsize(), 0, `keys written to REDIS_URL's server: ${(await inspect.keys('*')).join(' ')}`)
    // This file's own connection is the only one the server has seen.
    assert.equal(await redisConnections(inspect), before.connections, "something connected to REDIS_URL's server")
    assert.deepEqual(await objects(postgres.url), before.objects, "objects made in DATABASE_URL's database")
  } finally {
    inspect.disconnect()
  }
})
