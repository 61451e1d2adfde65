// Each native store pointed at another kind of server (a URL with another
// service's port): the error says the server did not speak the store's
// protocol, and what it seems to speak, not that the credentials were
// refused, the connection ended early, or the time ran out with no word
// why. `rediss://` for a Redis server without TLS says so within moments,
// not at the connect timeout. Real servers of each kind, started here, and
// small HTTP servers: one that waits in silence for a request (as most do),
// one that answers a silent client on its own (408) and closes, and a TCP
// server that closes every connection at once. A password in the URL never
// reaches a message. A server that says nothing at all still makes a
// timeout (it could be a frozen server of the right kind), whose message
// now says the server did not speak the protocol in that time. And the URL
// strictness of __test__/api/store-url does not cost a good URL: passwords
// with %-encoded @, space, %, : still log in, over TCP and through a socket
// path written with %2F.

import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { createServer as createHttpServer } from 'node:http'
import { createServer as createTcpServer } from 'node:net'
import { RedisLockStore, PostgresLockStore, MySqlLockStore } from '@shaferllc/keel/core'
import { startRedis, uniqueKey } from '../../support/servers.mjs'
import { startPostgres } from '../../support/postgres.mjs'
import { startMariaDb } from '../../support/mariadb.mjs'
import { lacking } from '../helpers/tools.mjs'
import { skipReason } from '../../support/tools.mjs'

// Every character a password may need %-encoded in a URL.
const PASSWORD = 'p@ss w%rd:/?#'
const SECRET = encodeURIComponent(PASSWORD)
// How long a store waits on a silent server here.
const CONNECT_TIMEOUT = 1_000

const mariadbMissing = skipReason(['mariadb'])
/** @type {Record<string, number>} ports of the servers, by kind */
const ports = {}
/** @type {Record<string, string>} the PostgreSQL and MariaDB servers' unix socket URLs (%2F in their paths) */
const socketUrls = {}
const closers = []

/** Listen on a free loopback port; the server is closed after the file. */
async function listen(server) {
  await new Promise((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve))
  closers.push(
    () =>
      new Promise((resolve) => {
        server.closeAllConnections?.()
        server.close(() => resolve())
      }),
  )
  return server.address().port
}

before(async () => {
  const redis = await startRedis({ args: ['--requirepass', PASSWORD] })
  closers.push(() => redis.close())
  ports.redis = redis.port
  const postgres = await startPostgres({ password: PASSWORD })
  closers.push(() => postgres.close())
  ports.postgres = postgres.port
  socketUrls.postgres = postgres.socketUrl
  if (!mariadbMissing) {
    const mariadb = await startMariaDb({ password: PASSWORD })
    closers.push(() => mariadb.close())
    ports.mysql = mariadb.port
    socketUrls.mysql = mariadb.socketUrl
  }
  // Waits for a request; answers one (a client's bytes) with 400 and closes.
  ports.http = await listen(createHttpServer((_, res) => res.end('hello')))
  // Answers a client that says nothing with 408 after 100 ms, and closes.
  ports.httpTimingOut = await listen(
    createHttpServer({ connectionsCheckingInterval: 25, headersTimeout: 100, requestTimeout: 150 }, (_, res) => res.end('hello')),
  )
  ports.closing = await listen(createTcpServer((socket) => socket.destroy()))
})

after(async () => {
  for (const close of closers.reverse()) await close()
})

const URLS = {
  redis: (port) => `redis://:${SECRET}@127.0.0.1:${port}`,
  rediss: (port) => `rediss://:${SECRET}@127.0.0.1:${port}`,
  postgres: (port) => `postgres://postgres:${SECRET}@127.0.0.1:${port}/postgres`,
  mysql: (port) => `mysql://root:${SECRET}@127.0.0.1:${port}/test`,
}

const STORES = {
  redis: (url) => new RedisLockStore({ url, connectTimeout: CONNECT_TIMEOUT, commandTimeout: CONNECT_TIMEOUT }),
  postgres: (url) => new PostgresLockStore({ url, connectTimeout: CONNECT_TIMEOUT, commandTimeout: CONNECT_TIMEOUT }),
  mysql: (url) => new MySqlLockStore({ url, connectTimeout: CONNECT_TIMEOUT, commandTimeout: CONNECT_TIMEOUT }),
}

/**
 * The first operation of a `kind` store at `url` rejects with `code`, a
 * message matching `message` and without the password, within `ms`.
 */
async function fails(kind, url, { code, message, ms = CONNECT_TIMEOUT + 1_500 }, label) {
  const store = STORES[kind](url)
  const started = Date.now()
  try {
    await assert.rejects(store.acquire(uniqueKey('wrong'), 'owner', 5_000), (e) => {
      assert.equal(e.name, 'LockStoreError', `${label}: ${e}`)
      assert.equal(e.code, code, `${label}: ${e.message}`)
      assert.match(e.message, message, label)
      for (const secret of [PASSWORD, SECRET, 'w%rd', 'w%25rd']) {
        assert.ok(!e.message.includes(secret), `${label}: the password is in the message: ${e.message}`)
      }
      return true
    })
  } finally {
    await store.close()
  }
  const took = Date.now() - started
  assert.ok(took < ms, `${label}: took ${took} ms, expected under ${ms}`)
}

/** Each case needs the servers it names; a MariaDB one is skipped without MariaDB. */
function cases(name, list, body) {
  test(name, async (t) => {
    for (const [server, ...rest] of list) {
      const needsMariaDb = server === 'mysql' || rest.includes('mysql')
      await t.test(`${server}`, { skip: needsMariaDb && mariadbMissing }, () => body(server, ...rest))
    }
  })
}

cases(
  'RedisLockStore at a PostgreSQL, MySQL or HTTP port: did not answer as a Redis server, and what answered',
  [
    ['postgres', /\(it closed the connection without a word\)/],
    ['mysql', /\(it greets as a MySQL or MariaDB server does\)/],
    ['http', /\(it answers as an HTTP server does\)/],
    ['closing', /\(it closed the connection without a word\)/],
  ],
  (server, what) =>
    fails(
      'redis',
      URLS.redis(ports[server]),
      {
        code: 'ERR_LOCK_STORE_CONNECTION',
        message: new RegExp(
          `^RedisLockStore\\.acquire: redis://:\\*\\*\\*@127\\.0\\.0\\.1:\\d+ accepted the connection but did not answer as a Redis server ${what.source}: is this the right host and port\\?$`,
        ),
        ms: 1_000,
      },
      server,
    ),
)

test('rediss:// to a Redis server without TLS says the TLS handshake went unanswered, within moments, not at the timeout', async () => {
  // A Redis server without TLS says nothing to a TLS hello (unless the hello
  // happens to hold a newline: then it answers with an error line); either
  // way the store tells, long before its connect timeout.
  const store = new RedisLockStore({ url: URLS.rediss(ports.redis), connectTimeout: 10_000, commandTimeout: 10_000 })
  const started = Date.now()
  try {
    for (let i = 0; i < 3; i++) {
      await assert.rejects(store.isLocked('k'), (e) => {
        assert.equal(e.code, 'ERR_LOCK_STORE_CONNECTION', e.message)
        assert.match(
          e.message,
          /^RedisLockStore\.isLocked: could not set up TLS with rediss:\/\/:\*\*\*@127\.0\.0\.1:\d+: the server did not answer the TLS handshake \((it speaks plain text: it answered PING on a plain connection, as a Redis server without TLS does|it answered in something other than TLS)\); if it is a Redis server without TLS, use a redis:\/\/ URL$/,
        )
        assert.ok(!e.message.includes(SECRET), e.message)
        return true
      })
    }
  } finally {
    await store.close()
  }
  const took = Date.now() - started
  assert.ok(took < 3_000, `three tries took ${took} ms (the connect timeout is 10 s)`)
})

cases(
  'rediss:// to a PostgreSQL, MySQL or HTTP port: the TLS handshake went unanswered',
  [
    ['postgres', /it closed the connection/],
    ['mysql', /it answered in something other than TLS/],
    ['http', /it answered in something other than TLS|it closed the connection/],
  ],
  (server, what) =>
    fails(
      'redis',
      URLS.rediss(ports[server]),
      {
        code: 'ERR_LOCK_STORE_CONNECTION',
        message: new RegExp(`the server did not answer the TLS handshake \\((${what.source})\\); if it is a Redis server without TLS, use a redis://`),
        ms: 1_000,
      },
      server,
    ),
)

cases(
  'PostgresLockStore at a MySQL or HTTP port: the server did not speak PostgreSQL\'s protocol (a connection error, not a refused login)',
  [
    ['mysql', '', /it greets as a MySQL or MariaDB server does/],
    ['mysql', '?sslmode=require', /it greets as a MySQL or MariaDB server does/],
    ['http', '', /it answers as an HTTP server does/],
    ['http', '?sslmode=require', /it answers as an HTTP server does/],
    ['closing', '', /it closed the connection without a word/],
    ['closing', '?sslmode=prefer', /it closed the connection without a word/],
  ],
  (server, query, what) =>
    fails(
      'postgres',
      URLS.postgres(ports[server]) + query,
      {
        code: 'ERR_LOCK_STORE_CONNECTION',
        message: new RegExp(
          `^PostgresLockStore\\.acquire: could not talk to postgres://postgres@127\\.0\\.0\\.1:\\d+/postgres: the server did not speak PostgreSQL's protocol \\(${what.source}\\): is this PostgreSQL's port\\?$`,
        ),
        ms: 1_000,
      },
      `${server}${query}`,
    ),
)

cases(
  'PostgresLockStore at a Redis port, which says nothing to it: the timeout says the server did not speak PostgreSQL\'s protocol',
  [['redis', ''], ['redis', '?sslmode=require']],
  (server, query) =>
    fails(
      'postgres',
      URLS.postgres(ports[server]) + query,
      {
        // Silence alone cannot tell a server of another kind from a frozen
        // PostgreSQL server: a timeout still, saying what was seen.
        code: 'ERR_LOCK_STORE_TIMEOUT',
        message: new RegExp(
          `^PostgresLockStore\\.acquire: timed out connecting to postgres://postgres@127\\.0\\.0\\.1:\\d+/postgres: within ${CONNECT_TIMEOUT} ms; connected, but the server did not speak PostgreSQL's protocol in that time \\(a PostgreSQL server that is up answers at once; a Redis server says nothing to a PostgreSQL client\\): is this PostgreSQL's port\\?$`,
        ),
      },
      `${server}${query}`,
    ),
)

cases(
  'MySqlLockStore at a port whose server answers or closes: the server did not speak MySQL\'s protocol',
  [
    ['httpTimingOut', /it answers as an HTTP server does/],
    ['closing', /it closed the connection without a word/],
  ],
  (server, what) =>
    fails(
      'mysql',
      URLS.mysql(ports[server]),
      {
        code: 'ERR_LOCK_STORE_CONNECTION',
        message: new RegExp(
          `^MySqlLockStore\\.acquire: could not talk to mysql://root@127\\.0\\.0\\.1:\\d+/test: the server did not speak MySQL's protocol \\(${what.source}\\): is this MySQL's port\\?$`,
        ),
        ms: 1_000,
      },
      server,
    ),
)

cases(
  'MySqlLockStore at an HTTP, Redis or PostgreSQL port, which say nothing to it: the timeout says the server did not speak MySQL\'s protocol',
  [['http'], ['redis'], ['postgres']],
  (server) =>
    fails(
      'mysql',
      URLS.mysql(ports[server]),
      {
        code: 'ERR_LOCK_STORE_TIMEOUT',
        message: new RegExp(
          `^MySqlLockStore\\.acquire: timed out connecting to mysql://root@127\\.0\\.0\\.1:\\d+/test: within ${CONNECT_TIMEOUT} ms; connected, but the server did not speak MySQL's protocol in that time \\(a MySQL server that is up greets at once; .*\\): is this MySQL's port\\?$`,
        ),
      },
      server,
    ),
)

test('a password with %-encoded @, space, %, :, /, ? and # logs in to each server, over TCP and a socket path with %2F', async (t) => {
  const urls = [
    ['redis', 'tcp', () => URLS.redis(ports.redis)],
    ['postgres', 'tcp', () => URLS.postgres(ports.postgres)],
    ['postgres', 'socket', () => socketUrls.postgres],
    ['mysql', 'tcp', () => URLS.mysql(ports.mysql)],
    ['mysql', 'socket', () => socketUrls.mysql],
  ]
  for (const [kind, over, url] of urls) {
    await t.test(`${kind} over ${over}`, { skip: kind === 'mysql' && mariadbMissing }, async () => {
      assert.match(url(), /%2F|127\.0\.0\.1/)
      const store = STORES[kind](url())
      try {
        const key = uniqueKey('escaped')
        assert.equal(await store.acquire(key, 'owner', 5_000), true)
        assert.equal(await store.release(key, 'owner'), true)
      } finally {
        await store.close()
      }
    })
  }
})

if (mariadbMissing) lacking(['mariadb'], 'the cases with a MariaDB server')
