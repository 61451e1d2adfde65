// store.ping() on each store with a server, against servers started here
// (each needing a password): it resolves once the server answered, opening a
// connection first; it rejects with the LockStoreError an operation would
// get, naming `<Store>.ping` and never the password: a wrong password
// (ERR_LOCK_STORE_AUTH), nothing listening (ERR_LOCK_STORE_CONNECTION, at
// once), a server that accepts and says nothing (ERR_LOCK_STORE_TIMEOUT at
// the connect timeout, not later), a closed store (ERR_LOCK_STORE_CLOSED).
// A store made while its server is down pings it again once it is back.
// Redis over a unix socket too.

import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { createServer } from 'node:net'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { RedisLockStore, PostgresLockStore, MySqlLockStore, LockStoreError, lock, setLockStore } from '@shaferllc/keel/core'
import { freePort, startRedis, uniqueKey } from '../../support/servers.mjs'
import { startPostgres } from '../../support/postgres.mjs'
import { startMariaDb } from '../../support/mariadb.mjs'
import { lacking } from '../helpers/tools.mjs'

const PASSWORD = 'ping-secret'
// How long a store waits for a server that says nothing, here.
const CONNECT_TIMEOUT = 800

const KINDS = {
  redis: {
    Store: RedisLockStore,
    url: (port, password) => `redis://:${password}@127.0.0.1:${port}`,
    start: () => startRedis({ args: ['--requirepass', PASSWORD] }),
    tools: [],
  },
  postgres: {
    Store: PostgresLockStore,
    url: (port, password) => `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    start: () => startPostgres({ password: PASSWORD }),
    tools: [],
  },
  mysql: {
    Store: MySqlLockStore,
    url: (port, password) => `mysql://root:${password}@127.0.0.1:${port}/test`,
    start: () => startMariaDb({ password: PASSWORD }),
    tools: ['mariadb'],
  },
}

/** A port that accepts connections and never says a word. */
let silentPort
const silent = createServer((socket) => socket.on('data', () => {}))

before(async () => {
  await new Promise((resolve) => silent.listen(0, '127.0.0.1', resolve))
  silentPort = silent.address().port
})
after(() => {
  silent.closeAllConnections?.()
  silent.close()
})

/** Runs `ping()` on a store of `Store` made from `options`, closed after; the outcome and how long it took. */
async function pingOnce(Store, options) {
  const store = new Store({ connectTimeout: CONNECT_TIMEOUT, ...options })
  const started = performance.now()
  try {
    return { answer: await store.ping(), ms: performance.now() - started }
  } catch (error) {
    return { error, ms: performance.now() - started }
  } finally {
    await store.close()
  }
}

/** `error` is the store's LockStoreError with `code`, from ping, without the password. */
function assertPingError(error, Store, code) {
  assert.ok(error instanceof LockStoreError, `a LockStoreError, not ${error}`)
  assert.equal(error.code, code, error.message)
  assert.match(error.message, new RegExp(`^${Store.name}\\.ping: `))
  assert.ok(!error.message.includes(PASSWORD), error.message)
}

for (const [kind, { Store, url, start, tools }] of Object.entries(KINDS)) {
  const name = `${Store.name}.ping()`
  if (lacking(tools, name)) continue

  test(name, async (t) => {
    const server = await start()
    t.after(() => server.close())

    await t.test('resolves once the server answered, and the store then works', async () => {
      const store = new Store(url(server.port, PASSWORD))
      t.after(() => store.close())
      assert.equal(await store.ping(), undefined)
      setLockStore(store)
      const [ran] = await lock(uniqueKey('after-ping')).run(() => 'ran')
      assert.equal(ran, true)
    })

    await t.test('a wrong password: ERR_LOCK_STORE_AUTH', async () => {
      const { error } = await pingOnce(Store, { url: url(server.port, 'wrong-secret') })
      assertPingError(error, Store, 'ERR_LOCK_STORE_AUTH')
    })

    await t.test('nothing listening: ERR_LOCK_STORE_CONNECTION, before the connect timeout', async () => {
      const { error, ms } = await pingOnce(Store, { url: url(await freePort(), PASSWORD) })
      assertPingError(error, Store, 'ERR_LOCK_STORE_CONNECTION')
      assert.ok(ms < CONNECT_TIMEOUT, `refused after ${ms} ms`)
    })

    await t.test('a server that says nothing: ERR_LOCK_STORE_TIMEOUT at the connect timeout', async () => {
      const { error, ms } = await pingOnce(Store, { url: url(silentPort, PASSWORD) })
      assertPingError(error, Store, 'ERR_LOCK_STORE_TIMEOUT')
      assert.ok(ms >= CONNECT_TIMEOUT - 20, `gave up after ${ms} ms`)
      // The bound is the connect timeout; the margin is for a busy machine.
      assert.ok(ms < CONNECT_TIMEOUT + 2_000, `gave up only after ${ms} ms`)
    })

    await t.test('a closed store: ERR_LOCK_STORE_CLOSED', async () => {
      const store = new Store(url(server.port, PASSWORD))
      await store.ping()
      await store.close()
      await assert.rejects(store.ping(), (error) => {
        assertPingError(error, Store, 'ERR_LOCK_STORE_CLOSED')
        return true
      })
    })

    await t.test('a store made while its server is down: rejects, then resolves once the server is back', async () => {
      await server.stop()
      const store = new Store({ url: url(server.port, PASSWORD), connectTimeout: CONNECT_TIMEOUT })
      t.after(() => store.close())
      await assert.rejects(store.ping(), (error) => {
        assertPingError(error, Store, 'ERR_LOCK_STORE_CONNECTION')
        return true
      })
      await server.start()
      assert.equal(await store.ping(), undefined)
    })
  })
}

test('RedisLockStore.ping() over a unix socket; a socket nobody listens on: ERR_LOCK_STORE_CONNECTION', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'keel-ping-'))
  const socket = join(dir, 'redis.sock')
  const server = await startRedis({ args: ['--unixsocket', socket, '--unixsocketperm', '700', '--requirepass', PASSWORD] })
  t.after(async () => {
    await server.close()
    rmSync(dir, { recursive: true, force: true })
  })
  const store = new RedisLockStore(`redis+unix://${socket}?pass=${PASSWORD}`)
  t.after(() => store.close())
  assert.equal(await store.ping(), undefined)
  const { error } = await pingOnce(RedisLockStore, { url: `redis+unix://${join(dir, 'none.sock')}` })
  assertPingError(error, RedisLockStore, 'ERR_LOCK_STORE_CONNECTION')
})
