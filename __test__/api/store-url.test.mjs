// A server store's URL given as undefined (an environment variable that is
// not set) is a TypeError naming url and saying how to get the default,
// never a silent connection to localhost; made with no argument, or with
// the option left out, a store uses the default server. A URL is taken only
// as written: whitespace around it, a control character in it, a bad
// %-escape or a %00 in a part the store decodes is a TypeError naming the
// part (never showing a password), where the URL readers underneath would
// have taken it quietly.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { RedisLockStore, PostgresLockStore, MySqlLockStore } from '@shaferllc/keel/core'

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

/** Each store, made from a URL as its first argument, and from { url } for the options object. */
const STORES = {
  RedisLockStore: { make: (url) => new RedisLockStore(url), base: 'redis://u:s3cret@127.0.0.1:6379/2' },
  PostgresLockStore: { make: (url) => new PostgresLockStore(url), base: 'postgres://u:s3cret@127.0.0.1:5432/db' },
  PostgresLockStoreListen: {
    make: (url) => new PostgresLockStore({ url: 'postgres://u@127.0.0.1:5432/db', listenUrl: url }),
    base: 'postgres://u:s3cret@127.0.0.1:5432/db',
  },
  MySqlLockStore: { make: (url) => new MySqlLockStore(url), base: 'mysql://u:s3cret@127.0.0.1:3306/db' },
}

/**
 * `make()` throws a TypeError whose message matches `why` and never holds `secret`.
 *
 * @param {() => unknown} make
 * @param {RegExp} why
 * @param {string} label
 */
const refusedAs = (make, why, label, secret = 's3cret') =>
  assert.throws(
    make,
    (e) => {
      assert.ok(e instanceof TypeError, `${label}: a TypeError, got ${e}`)
      assert.match(e.message, why, label)
      assert.ok(!e.message.includes(secret), `${label}: the password is in the message: ${e.message}`)
      return true
    },
    label,
  )

test('whitespace around a URL, or a control character in it, is a TypeError for every store (and listenUrl)', () => {
  for (const [name, { make, base }] of Object.entries(STORES)) {
    const where = name === 'PostgresLockStoreListen' ? /listenUrl / : /url /
    const cases = [
      [` ${base}`, /begins with whitespace/],
      [`\t${base}`, /begins with whitespace/],
      [`${base} `, /ends with whitespace/],
      [`${base}\n`, /ends with whitespace \(a newline read with it\?\)/],
      [`${base}\r\n`, /ends with whitespace/],
      [`${base}\u00a0`, /ends with whitespace/],
      [base.replace('127.0.0.1', '127.0.\t0.1'), /has a control character \(U\+0009\) in it/],
      [base.replace('127.0.0.1', '127.0.0.1\n'), /has a control character \(U\+000A\) in it/],
      [base.replace('s3cret', 's3c\u0000ret'), /has a control character \(U\+0000\) in it/],
      [base.replace('s3cret', 's3c\u007fret'), /has a control character \(U\+007F\) in it/],
    ]
    for (const [url, why] of cases) {
      refusedAs(() => make(url), new RegExp(`${where.source}.*${why.source}`), `${name} ${JSON.stringify(url)}`, 's3c')
    }
  }
})

test('a bad %-escape in any part a store decodes is a TypeError naming the part, never showing the password', () => {
  const bad = /has an invalid %-escape \(a % not followed by two hex digits; a % itself is written %25\)/
  const cases = {
    RedisLockStore: [
      ['redis://u:s3cret%ZZ@127.0.0.1:6379', 'the password'],
      ['redis://u:s3cret%@127.0.0.1:6379', 'the password'],
      ['redis://u:s3cret%4@127.0.0.1:6379', 'the password'],
      ['redis://u%ZZ:s3cret@127.0.0.1:6379', 'the user name'],
      ['redis://:s3cret@red%ZZis.internal:6379', 'the host'],
      ['redis://:s3cret@127.0.0.1:6379/%ZZ', 'the database'],
      ['redis://:s3cret@127.0.0.1:6379?db=%G1', 'the parameter "db"'],
      ['redis+unix:///tmp/re%ZZdis.sock', 'the socket path'],
      ['redis+unix:///tmp/redis.sock?pass=s3cret%ZZ', 'the parameter "pass"'],
    ],
    PostgresLockStore: [
      ['postgres://u:s3cret%ZZ@127.0.0.1/db', 'the password'],
      ['postgres://u:s3cret%@127.0.0.1/db', 'the password'],
      ['postgres://u%ZZ:s3cret@127.0.0.1/db', 'the user name'],
      ['postgres://u:s3cret@db%ZZ.internal/db', 'the host'],
      ['postgres://u:s3cret@%2Frun%ZZ/db', 'the host'],
      ['postgres://u:s3cret@[::1]:54%ZZ/db', 'the port'],
      ['postgres://u:s3cret@127.0.0.1/d%ZZb', 'the database name'],
      ['postgres://u@127.0.0.1/db?application_name=a%ZZ', 'the parameter "application_name"'],
      ['postgres://u@127.0.0.1/db?password=s3cret%ZZ', 'the parameter "password"'],
      ['postgres://u@127.0.0.1/db?sslmode=re%ZZquire', 'the parameter "sslmode"'],
    ],
    PostgresLockStoreListen: [['postgres://u:s3cret%ZZ@127.0.0.1/db', 'the password']],
    MySqlLockStore: [
      ['mysql://u:s3cret%ZZ@127.0.0.1/db', 'the password'],
      ['mysql://u:s3cret%@127.0.0.1/db', 'the password'],
      ['mysql://u%ZZ:s3cret@127.0.0.1/db', 'the user name'],
      ['mysql://u:s3cret@my%ZZsql.internal/db', 'the host'],
      ['mysql://u:s3cret@127.0.0.1/d%ZZb', 'the database name'],
      ['mysql://u:s3cret@localhost/db?socket=%2Frun%ZZ', 'the parameter "socket"'],
    ],
  }
  for (const [name, urls] of Object.entries(cases)) {
    for (const [url, part] of urls) {
      const option = name === 'PostgresLockStoreListen' ? 'listenUrl' : 'url'
      const why = new RegExp(`${option} "[^"]*": ${part} ${bad.source}`)
      refusedAs(() => STORES[name].make(url), why, `${name} ${url}`)
    }
  }
})

test('a %00 in a user, password, database, host, path or parameter is a TypeError naming the part', () => {
  const nul = /has a NUL character \(%00\) in it/
  const cases = {
    RedisLockStore: [
      ['redis://u:s3cret%00@127.0.0.1:6379', 'the password'],
      ['redis://u%00v:s3cret@127.0.0.1:6379', 'the user name'],
      ['redis+unix:///tmp/redis%00.sock', 'the socket path'],
      ['redis+unix:///tmp/redis.sock?pass=s3cret%00', 'the parameter "pass"'],
      ['redis+unix:///tmp/redis.sock?user=u%00v', 'the parameter "user"'],
    ],
    PostgresLockStore: [
      ['postgres://u:s3cret%00@127.0.0.1/db', 'the password'],
      ['postgres://u%00v:s3cret@127.0.0.1/db', 'the user name'],
      ['postgres://u:s3cret@127.0.0.1/te%00st', 'the database name'],
      ['postgres://u:s3cret@%2Frun%00/db', 'the host'],
      ['postgres://u@127.0.0.1/db?application_name=a%00b', 'the parameter "application_name"'],
      ['postgres://u@127.0.0.1/db?options=-c%20a%3Db%00', 'the parameter "options"'],
    ],
    PostgresLockStoreListen: [['postgres://u:s3cret@127.0.0.1/te%00st', 'the database name']],
    MySqlLockStore: [
      ['mysql://u:s3cret%00@127.0.0.1/db', 'the password'],
      ['mysql://u%00v:s3cret@127.0.0.1/db', 'the user name'],
      // Read as the database `te` before this: the server takes a name up to its NUL.
      ['mysql://u:s3cret@127.0.0.1/te%00st', 'the database name'],
      ['mysql://u:s3cret@localhost/db?socket=%2Frun%2Fmysqld.sock%00', 'the parameter "socket"'],
    ],
  }
  for (const [name, urls] of Object.entries(cases)) {
    for (const [url, part] of urls) {
      const option = name === 'PostgresLockStoreListen' ? 'listenUrl' : 'url'
      const why = new RegExp(`${option} "[^"]*": ${part} ${nul.source}`)
      refusedAs(() => STORES[name].make(url), why, `${name} ${url}`)
    }
  }
})

test('good %-escapes, IPv6 hosts and socket paths are still taken', async () => {
  const made = [
    // A password with @, a space, % and : in it, each %-encoded.
    new RedisLockStore('redis://u:p%40ss%20w%25rd%3A@127.0.0.1:6379'),
    new RedisLockStore('redis://:p%40ss@[::1]:6379/3'),
    new RedisLockStore('redis://u:p%40ss@127.0.0.1:6379?db=4'),
    new RedisLockStore('redis+unix:///tmp/redis.sock?db=2&pass=p%40ss'),
    new RedisLockStore(['redis://:p%40ss@127.0.0.1:7000', 'redis://:p%40ss@[::1]:7001']),
    new PostgresLockStore('postgres://u:p%40ss%20w%25rd%3A@127.0.0.1:5432/my%20db'),
    new PostgresLockStore('postgres://u:p%40ss@[::1]:5432/db?application_name=a%20b&sslmode=disable'),
    new PostgresLockStore('postgres://u@%2Frun%2Fpostgresql:5432/db'),
    new PostgresLockStore('postgresql://u@[::1]:5432,127.0.0.1:5433/db'),
    new PostgresLockStore({ url: 'postgres://u@h/db', listenUrl: 'postgres://u:p%40ss@[::1]/db' }),
    new MySqlLockStore('mysql://u:p%40ss%20w%25rd%3A@127.0.0.1:3306/my_db'),
    new MySqlLockStore('mysql://u:p%40ss@[::1]:3306/db'),
    new MySqlLockStore('mysql://u@localhost/db?socket=%2Frun%2Fmysqld%2Fmysqld.sock'),
    new MySqlLockStore('mariadb://u@[fe80::1]/db?ssl-mode=DISABLED'),
  ]
  for (const store of made) await store.close()
})
