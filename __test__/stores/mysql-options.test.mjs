// MySqlLockStore's options, as the JS layer checks them before the addon is
// called: a URL or { url, table, poolSize, connectTimeout, commandTimeout,
// sweepInterval, tls }; a bad one is a TypeError or RangeError naming the
// option, and a password in a URL is never repeated. Making a store connects
// to nothing, so no server is needed.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { MySqlLockStore } from '@shaferllc/keel/core'

const UNSET = 'KEEL_TEST_A_VARIABLE_NOBODY_SETS'
delete process.env[UNSET]

test('a URL or { url, table, poolSize, connectTimeout, commandTimeout, sweepInterval } makes a store', async () => {
  const made = [
    new MySqlLockStore(),
    new MySqlLockStore('mysql://app:secret@db.internal:3306/orders'),
    new MySqlLockStore({ url: 'mysql://app@h/db', table: 'app.keel_locks', poolSize: 1, sweepInterval: 10 }),
    new MySqlLockStore({ table: '_locks_2', poolSize: 100, connectTimeout: 1, commandTimeout: 250 }),
    new MySqlLockStore({ table: `${'d'.repeat(64)}.${'t'.repeat(50)}` }),
    new MySqlLockStore({ url: 'mysql://app@h/db?ssl-mode=VERIFY_IDENTITY', connectTimeout: 1_000 }),
  ]
  for (const store of made) assert.ok(store instanceof MySqlLockStore)
  for (const store of made) await store.close()
})

test('options: bad ones name the option', () => {
  const cases = [
    [42, TypeError, /new MySqlLockStore: expected a mysql:\/\/ URL or an options object/],
    [null, TypeError, /expected a mysql:\/\/ URL/],
    [['mysql://h'], TypeError, /expected a mysql:\/\/ URL/],
    [{ url: 3306 }, TypeError, /options\.url must be a string, got 3306/],
    [{ host: 'x' }, TypeError, /unknown option host \(known: url, table, poolSize, connectTimeout, commandTimeout, sweepInterval, tls\)/],
    [{ listenUrl: 'mysql://h/db' }, TypeError, /unknown option listenUrl \(known: url, /],
    [{ prefix: 'locks:', tabel: 'x' }, TypeError, /unknown options prefix, tabel \(known: /],
    [{ table: 'Locks' }, TypeError, /options\.table must be a lower-case MySQL name/],
    [{ table: 'app.Locks' }, TypeError, /options\.table must be a lower-case MySQL name/],
    [{ table: 'keel-locks' }, TypeError, /options\.table/],
    [{ table: 'keel locks' }, TypeError, /options\.table/],
    [{ table: '2locks' }, TypeError, /options\.table/],
    [{ table: 'app.2locks' }, TypeError, /options\.table/],
    [{ table: 'locks; DROP TABLE x' }, TypeError, /options\.table/],
    [{ table: '`locks`' }, TypeError, /options\.table/],
    [{ table: 'a.b.c' }, TypeError, /options\.table/],
    [{ table: '.locks' }, TypeError, /options\.table/],
    [{ table: 'app.' }, TypeError, /options\.table/],
    [{ table: '' }, TypeError, /options\.table/],
    [{ table: 'lock$' }, TypeError, /options\.table/],
    [{ table: 'a'.repeat(51) }, TypeError, /options\.table .*at most 50 characters/],
    [{ table: `${'d'.repeat(65)}.locks` }, TypeError, /options\.table .*at most 64/],
    [{ table: 42 }, TypeError, /options\.table .*got 42/],
    [{ table: null }, TypeError, /options\.table .*got null/],
    [{ poolSize: 0 }, RangeError, /options\.poolSize must be an integer from 1 to 100, got 0/],
    [{ poolSize: 101 }, RangeError, /options\.poolSize must be an integer from 1 to 100, got 101/],
    [{ poolSize: 1.5 }, RangeError, /options\.poolSize/],
    [{ poolSize: '4' }, RangeError, /options\.poolSize/],
    [{ poolSize: Number.NaN }, RangeError, /options\.poolSize/],
    [{ commandTimeout: '1s' }, TypeError, /options\.commandTimeout must be a number of milliseconds/],
    [{ connectTimeout: 0 }, RangeError, /options\.connectTimeout must be a finite number > 0/],
    [{ connectTimeout: Infinity }, RangeError, /options\.connectTimeout/],
    [{ sweepInterval: -1 }, RangeError, /options\.sweepInterval/],
    [{ tls: 'pem' }, TypeError, /new MySqlLockStore: options\.tls must be an object like \{ ca, cert, key \}/],
    [{ tls: { ca: 1 } }, TypeError, /new MySqlLockStore: options\.tls\.ca must be PEM text/],
    [{ tls: { cert: '-----BEGIN CERTIFICATE-----' } }, TypeError, /new MySqlLockStore: options\.tls\.cert and options\.tls\.key go together/],
    [{ tls: { rejectUnauthorized: false } }, TypeError, /new MySqlLockStore: unknown options\.tls field rejectUnauthorized/],
  ]
  for (const [input, type, message] of cases) {
    assert.throws(() => new MySqlLockStore(input), (e) => e instanceof type && message.test(e.message), JSON.stringify(input))
  }
})

test('a bad option beside a URL with a password does not repeat the password', () => {
  const url = 'mysql://app:hunter2@h'
  const bad = [
    { url, table: 'Locks' },
    { url, poolSize: 0 },
    { url, commandTimeout: '5s' },
    { url, tls: { ca: 1 } },
    { url, host: 'x' },
  ]
  for (const options of bad) {
    assert.throws(
      () => new MySqlLockStore(options),
      (e) => (e instanceof TypeError || e instanceof RangeError) && !e.message.includes('hunter2'),
      JSON.stringify(options),
    )
  }
})

test('new MySqlLockStore(undefined) and { url: undefined } are a TypeError naming url, never the default server', () => {
  const refused = (make, names, remedy) =>
    assert.throws(make, (e) => {
      assert.ok(e instanceof TypeError, `a TypeError, got ${e}`)
      assert.match(e.message, names)
      assert.match(e.message, /is undefined/)
      assert.match(e.message, remedy)
      return true
    })
  refused(
    () => new MySqlLockStore(process.env[UNSET]),
    /^new MySqlLockStore: url /,
    /call new MySqlLockStore\(\) with no argument for the default server, mysql:\/\/root@127\.0\.0\.1:3306\/test/,
  )
  refused(
    () => new MySqlLockStore({ url: process.env[UNSET], table: 'app_locks' }),
    /^new MySqlLockStore: options\.url is undefined/,
    /leave url out of the options for the default server, mysql:\/\/root@127\.0\.0\.1:3306\/test/,
  )
})

test('MySqlLockStore.schema checks the table name as the constructor does', () => {
  for (const table of ['Locks', 'keel-locks', 'a'.repeat(51), 42]) {
    assert.throws(
      () => MySqlLockStore.schema(table),
      (e) => e instanceof TypeError && /^MySqlLockStore\.schema: table must be a lower-case MySQL name/.test(e.message),
      JSON.stringify(table),
    )
  }
  assert.match(MySqlLockStore.schema(), /keel_locks/)
  assert.match(MySqlLockStore.schema('app.keel_locks'), /keel_locks/)
})

test('the URL is read as the store is made: a bad one says why, without its password', () => {
  const cases = [
    ['redis://app:hunter2@h/db', /new MySqlLockStore: url "redis:\/\/app:\*\*\*@h\/db" is not a mysql:\/\/ URL/],
    ['mysql://app:hunter2@h/db?ssl-mode=sometimes', /has ssl-mode=sometimes; use DISABLED, PREFERRED, REQUIRED, VERIFY_CA or VERIFY_IDENTITY/],
    ['mysql://app:hunter2@h/db?charset=latin1', /has the parameter "charset", which this store does not know \(known: ssl-mode, socket\)/],
    ['mysql://app:hunter2@h', /names no database \(mysql:\/\/host\/database\), and table "keel_locks" does not name one either/],
    ['mysql://app:hunter2@h/a/b', /has a path of more than one part/],
    ['mysql://app:hunter2@h/db?socket=%2Ftmp%2Fs&ssl-mode=REQUIRED', /asks for TLS over a unix socket/],
  ]
  for (const [url, message] of cases) {
    assert.throws(() => new MySqlLockStore(url), (e) => e instanceof TypeError && message.test(e.message) && !e.message.includes('hunter2'), url)
  }
  assert.throws(
    () => new MySqlLockStore({ url: 'mysql://h/db?ssl-mode=DISABLED', tls: { ca: 'x' } }),
    /options\.tls/,
  )
})
