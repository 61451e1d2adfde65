// A server store's URL given as undefined (an environment variable that is
// not set) is a TypeError naming url and saying how to get the default,
// never a silent connection to localhost; made with no argument, or with
// the option left out, a store uses the default server.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { RedisLockStore, PostgresLockStore } from '@shaferllc/keel/core'

const UNSET = 'KEEL_TEST_A_VARIABLE_NOBODY_SETS'
delete process.env[UNSET]

/**
 * @param {() => unknown} make
 * @param {RegExp} names what the message must name
 * @param {RegExp} remedy how it says to get the default
 */
const refused = (make, names, remedy) =>
  assert.throws(make, (e) => {
    assert.ok(e instanceof TypeError, `a TypeError, got ${e}`)
    assert.match(e.message, names)
    assert.match(e.message, /is undefined/)
    assert.match(e.message, remedy)
    return true
  })

test('new RedisLockStore(undefined), as from an unset variable, is a TypeError naming url', () => {
  const remedy = /call new RedisLockStore\(\) with no argument for the default server, redis:\/\/127\.0\.0\.1:6379/
  refused(() => new RedisLockStore(undefined), /^new RedisLockStore: url /, remedy)
  refused(() => new RedisLockStore(process.env[UNSET]), /^new RedisLockStore: url /, remedy)
})

test('RedisLockStore options with url or cluster present but undefined are a TypeError naming the option', () => {
  const remedy = (name) => new RegExp(`leave ${name} out of the options for the default server, redis://127\\.0\\.0\\.1:6379`)
  refused(() => new RedisLockStore({ url: process.env[UNSET] }), /options\.url is undefined/, remedy('url'))
  refused(() => new RedisLockStore({ url: undefined, prefix: 'app:' }), /options\.url is undefined/, remedy('url'))
  refused(() => new RedisLockStore({ cluster: process.env[UNSET]?.split(' ') }), /options\.cluster is undefined/, remedy('cluster'))
  refused(() => new RedisLockStore({ url: undefined, cluster: undefined }), /options\.url is undefined/, remedy('url'))
})

test('RedisLockStore: one of url and cluster given, the other undefined, picks the one given', async () => {
  // The usual way to choose between one server and a cluster by configuration.
  const one = new RedisLockStore({ url: 'redis://127.0.0.1:1', cluster: process.env[UNSET]?.split(' ') })
  const many = new RedisLockStore({ url: process.env[UNSET], cluster: ['redis://127.0.0.1:1', 'redis://127.0.0.1:2'] })
  for (const store of [one, many]) await store.close()
})

test('new PostgresLockStore(undefined) and { url: undefined } are a TypeError naming url', () => {
  refused(
    () => new PostgresLockStore(process.env[UNSET]),
    /^new PostgresLockStore: url /,
    /call new PostgresLockStore\(\) with no argument for the default server, postgres:\/\/postgres@127\.0\.0\.1:5432\/postgres/,
  )
  refused(
    () => new PostgresLockStore({ url: process.env[UNSET], table: 'app_locks' }),
    /^new PostgresLockStore: options\.url is undefined/,
    /leave url out of the options for the default server, postgres:\/\/postgres@127\.0\.0\.1:5432\/postgres/,
  )
})

test('no argument, or the option left out, still means the default server (nothing connects until the first operation)', async () => {
  const made = [
    new RedisLockStore(),
    new RedisLockStore({ prefix: 'app:' }),
    new PostgresLockStore(),
    new PostgresLockStore({ table: 'app_locks' }),
    // listenUrl left undefined means url's server, not a default one: allowed.
    new PostgresLockStore({ url: 'postgres://app@db.internal/app', listenUrl: process.env[UNSET] }),
  ]
  for (const store of made) await store.close()
})
