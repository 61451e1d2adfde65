// run()'s release on the stores that say when a request is written (Redis and
// PostgreSQL on the event loop): run() ends once the release is on its way,
// not a round trip later, and loses nothing by it. A fault proxy
// (support/fault-proxy.mjs) holds the servers' answers back to show what
// waits for an answer and what does not. (That the key's next operations
// find it released, and that process.exit() right after run() leaves it
// free, is in the store contract, for every store.)
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import Redis from 'ioredis'
import pg from 'pg'
import { lock, setLockStore, RedisLockStore, PostgresLockStore } from '@shaferllc/keel/core'
import { startRedis, uniqueKey } from '../../support/servers.mjs'
import { startProxy } from '../../support/fault-proxy.mjs'
import { startPostgres } from '../../support/postgres.mjs'
import { eventually } from '../helpers/eventually.mjs'

let redis
let postgres
const cleanups = []
before(async () => {
  ;[redis, postgres] = await Promise.all([startRedis(), startPostgres()])
})
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup()
  await redis?.close()
  await postgres?.close()
})

const TABLE = 'run_release_locks'

/**
 * Per store: making one on a port, and breaking the next release of `key`
 * from outside while it is held (the server then answers it with an error).
 */
const STORES = {
  RedisLockStore: {
    server: () => redis,
    make: (port) => new RedisLockStore({ url: `redis://127.0.0.1:${port}` }),
    async breakRelease(key) {
      // The key becomes a hash: the release's GET is refused (WRONGTYPE).
      const client = new Redis(redis.url)
      await client.multi().del(key).hset(key, 'field', 'value').exec()
      return async () => {
        await client.del(key)
        client.disconnect()
      }
    },
  },
  PostgresLockStore: {
    server: () => postgres,
    make: (port) =>
      new PostgresLockStore({ url: `postgres://postgres@127.0.0.1:${port}/postgres`, table: TABLE, poolSize: 1 }),
    async breakRelease() {
      // The table is gone by its name: the release's DELETE fails.
      const client = new pg.Client({ connectionString: postgres.url })
      await client.connect()
      await client.query(`ALTER TABLE ${TABLE} RENAME TO ${TABLE}_away`)
      return async () => {
        await client.query(`ALTER TABLE ${TABLE}_away RENAME TO ${TABLE}`)
        await client.end()
      }
    },
  },
}

/** A store of `name` behind a fresh proxy, connected and ready. */
async function behindProxy(name) {
  const proxy = await startProxy(STORES[name].server().port)
  const store = STORES[name].make(proxy.port)
  cleanups.push(async () => {
    proxy.passReplies()
    await store.close()
    await proxy.close()
  })
  assert.equal(await store.isLocked(uniqueKey('warm')), false)
  setLockStore(store)
  return { proxy, store }
}

/** The process warnings of type LockReleaseWarning from now on. */
function releaseWarnings() {
  const seen = []
  const listen = (warning) => warning.name === 'LockReleaseWarning' && seen.push(warning.message)
  process.on('warning', listen)
  cleanups.push(() => process.off('warning', listen))
  return seen
}

/** `promise`, or a failure saying `what` if it has not settled within `ms`. */
function within(ms, promise, what) {
  let timer
  const late = new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(what)), ms)))
  return Promise.race([promise, late]).finally(() => clearTimeout(timer))
}

test('RedisLockStore: a release the server forgot the script of still comes before the next acquire', async () => {
  // The server forgets its scripts (SCRIPT FLUSH) and learns the acquire's
  // again from another client: this store's release is refused as unknown
  // while the acquire sent right after it is not. Both go again, in order.
  const { store } = await behindProxy('RedisLockStore')
  const key = uniqueKey('flushed')
  assert.deepEqual(await lock(key, 30_000).run(() => 1), [true, 1])
  const client = new Redis(redis.url)
  const other = new RedisLockStore({ url: redis.url })
  try {
    await client.script('FLUSH')
    assert.equal(await other.acquire(uniqueKey('other'), 'someone', 1_000), true)
    for (let i = 0; i < 3; i++) {
      assert.deepEqual(await lock(key, 30_000).run(() => i), [true, i])
      assert.deepEqual(await lock(key, 30_000).runImmediately(() => i), [true, i], `run ${i}: the release came first`)
      await client.script('FLUSH')
      assert.equal(await other.acquire(uniqueKey('other'), 'someone', 1_000), true)
    }
  } finally {
    client.disconnect()
    await other.close()
  }
  assert.equal(await store.isLocked(key), false)
})

for (const name of Object.keys(STORES)) {
  test(`${name}: run() ends once its release is written, while the answer is still on its way`, async () => {
    const { proxy, store } = await behindProxy(name)
    const warnings = releaseWarnings()
    const key = uniqueKey('written')
    const running = lock(key, 30_000).run(() => {
      // From here on the server's answers wait in the proxy: the release's too.
      proxy.holdReplies()
      return 'sent'
    })
    const outcome = await within(5_000, running, "run() waited for its release's answer")
    assert.deepEqual(outcome, [true, 'sent'])
    await eventually(() => assert.ok(proxy.heldReplies > 0, "the release's answer is held back"))
    proxy.passReplies()
    assert.equal(await store.isLocked(key), false)
    assert.deepEqual(warnings, [])
  })

  test(`${name}: release() called directly still waits for the answer`, async () => {
    const { proxy } = await behindProxy(name)
    const key = uniqueKey('direct')
    const l = lock(key, 30_000)
    assert.equal(await l.acquire(), true)
    proxy.holdReplies()
    let settled = false
    const releasing = l.release().finally(() => (settled = true))
    await eventually(() => assert.ok(proxy.heldReplies > 0, "the release's answer is held back"))
    await sleep(100)
    assert.equal(settled, false, 'release() settled before its answer came')
    proxy.passReplies()
    assert.equal(await releasing, true)
  })

  test(`${name}: a release that fails after run() ended still warns, once its answer comes`, async () => {
    const { store } = await behindProxy(name)
    const warnings = releaseWarnings()
    const key = uniqueKey('broken')
    let repair
    const outcome = await lock(key, 30_000).run(async () => {
      repair = await STORES[name].breakRelease(key)
      return 'charged'
    })
    try {
      assert.deepEqual(outcome, [true, 'charged'], "the callback's result is returned")
      await eventually(() => assert.equal(warnings.length, 1, 'one LockReleaseWarning'))
      assert.match(warnings[0], new RegExp(`Lock "${key}": release after run\\(\\) failed`))
      assert.match(warnings[0], /its result is returned, and the lock stays held until its TTL passes/)
    } finally {
      await repair?.()
    }
    assert.equal(await store.isLocked(uniqueKey('after')), false, 'the store still works')
  })

  test(`${name}: close() right after run() lets the release be answered first`, async () => {
    const { store } = await behindProxy(name)
    const warnings = releaseWarnings()
    const key = uniqueKey('close-after')
    assert.deepEqual(await lock(key, 30_000).run(() => 1), [true, 1])
    await store.close()
    const other = STORES[name].make(STORES[name].server().port)
    try {
      assert.equal(await other.isLocked(key), false, 'the release reached the server')
    } finally {
      await other.close()
    }
    await sleep(20)
    assert.deepEqual(warnings, [], 'no warning: the release was answered, not cut off')
  })
}
