// RedisLockStore beyond the store contract (contract/redis.test.mjs), against
// a redis-server this file starts: options, the data it writes, one pipelined
// connection, script reloading, credentials, timeouts, reconnecting after the
// server comes back, and commands sent again when the server closed the
// connection under them.

import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { Redis } from 'ioredis'
import { lock, setLockStore, RedisLockStore } from '@shaferllc/keel/core'
import { setTimeout as sleep } from 'node:timers/promises'
import { startRedis, uniqueKey } from '../../support/servers.mjs'
import { startProxy } from '../../support/fault-proxy.mjs'
import { eventually } from '../helpers/eventually.mjs'

const server = await startRedis()
const inspect = new Redis(server.url)
const stores = []
const store = (options = {}) => {
  const s = new RedisLockStore(typeof options === 'string' ? options : { url: server.url, ...options })
  stores.push(s)
  return s
}

after(async () => {
  for (const s of stores) await s.close()
  inspect.disconnect()
  await server.close()
})

test('options: a URL or { url, prefix, connectTimeout, commandTimeout }; bad ones are TypeErrors naming them', () => {
  assert.ok(new RedisLockStore() instanceof RedisLockStore)
  assert.ok(new RedisLockStore('redis://127.0.0.1:6379/2'))
  assert.ok(new RedisLockStore({ url: 'redis://u:p@localhost:1', prefix: 'locks:', connectTimeout: 10, commandTimeout: 10 }))
  const cases = [
    [42, TypeError, /new RedisLockStore: expected a redis:\/\/ URL, a list of Redis Cluster node URLs, or an options object/],
    [null, TypeError, /expected a redis:\/\/ URL/],
    [{ url: 6379 }, TypeError, /options\.url must be a string, got 6379/],
    [{ host: 'x' }, TypeError, /unknown option host \(known: url, prefix, connectTimeout, commandTimeout, tls, cluster\)/],
    [{ prefix: 1 }, TypeError, /options\.prefix must be a string/],
    [{ commandTimeout: '1s' }, TypeError, /options\.commandTimeout must be a number of milliseconds/],
    [{ connectTimeout: 0 }, RangeError, /options\.connectTimeout must be a finite number > 0/],
    [{ commandTimeout: Infinity }, RangeError, /options\.commandTimeout/],
    ['http://example.com', TypeError, /url "http:\/\/example.com" is not a Redis URL/],
    ['not a url', TypeError, /is not a Redis URL/],
  ]
  for (const [input, type, message] of cases) {
    assert.throws(() => new RedisLockStore(input), (e) => e instanceof type && message.test(e.message), String(input))
  }
})

test('a password in a bad URL is not repeated in the error', () => {
  assert.throws(
    () => new RedisLockStore('redis://app:hunter2@host:notaport'),
    (e) => e instanceof TypeError && !e.message.includes('hunter2') && e.message.includes('app:***@'),
  )
})

test('used directly as a LockStore: the five operations, with argument checks', async () => {
  const s = store()
  const key = uniqueKey('direct')
  assert.equal(await s.acquire(key, 'owner-a', 5_000), true)
  assert.equal(await s.acquire(key, 'owner-b', 5_000), false)
  assert.equal(await s.isLocked(key), true)
  const left = await s.remainingTime(key)
  assert.ok(left > 4_000 && left <= 5_000, `remaining ${left}`)
  assert.equal(await s.extend(key, 'owner-b', 60_000), false, 'only the owner extends')
  assert.equal(await s.extend(key, 'owner-a', 60_000), true)
  assert.ok((await s.remainingTime(key)) > 50_000)
  assert.equal(await s.release(key, 'owner-b'), false, 'only the owner releases')
  assert.equal(await s.release(key, 'owner-a'), true)
  assert.equal(await s.isLocked(key), false)
  assert.equal(await s.remainingTime(key), null)
  await assert.rejects(s.acquire(key, 'o', 0), { name: 'RangeError', message: /RedisLockStore\.acquire: ttlMs/ })
  await assert.rejects(s.acquire(1, 'o', 10), { name: 'TypeError', message: /RedisLockStore\.acquire: key must be a string/ })
  await assert.rejects(s.release(key, ''), { name: 'TypeError', message: /owner must be a non-empty string/ })
  await assert.rejects(s.extend(key, 'o', -1), { name: 'RangeError', message: /RedisLockStore\.extend: ttlMs/ })
  await assert.rejects(s.isLocked(null), { name: 'TypeError', message: /RedisLockStore\.isLocked: key/ })
})

test('the key holds the owner token with the TTL as its expiry, under the prefix', async () => {
  const key = uniqueKey('layout')
  setLockStore(store())
  const l = lock(key, 7_000)
  await l.acquire()
  const { owner } = JSON.parse(l.serialize())
  assert.equal(await inspect.get(key), owner)
  const pttl = await inspect.pttl(key)
  assert.ok(pttl > 6_000 && pttl <= 7_000, `PTTL ${pttl}`)
  await l.release()
  assert.equal(await inspect.exists(key), 0)

  setLockStore(store({ prefix: 'locks:' }))
  const p = lock(key, 3_000)
  await p.acquire()
  assert.equal(await inspect.exists(key), 0)
  assert.equal(await inspect.get(`locks:${key}`), JSON.parse(p.serialize()).owner)
  await p.release()
  assert.equal(await inspect.exists(`locks:${key}`), 0)
})

test('a fractional TTL rounds up to a whole millisecond, as Redis PX needs', async () => {
  const s = store()
  const key = uniqueKey('fraction')
  assert.equal(await s.acquire(key, 'o', 1500.2), true)
  const pttl = await inspect.pttl(key)
  assert.ok(pttl > 1_400 && pttl <= 1_501, `PTTL ${pttl}`)
  assert.equal(await s.acquire(uniqueKey('tiny'), 'o', 0.25), true)
})

test('the database number in the URL is used', async () => {
  const s = store(`${server.url}/3`)
  const key = uniqueKey('db3')
  await s.acquire(key, 'o', 5_000)
  assert.equal(await inspect.exists(key), 0)
  const db3 = new Redis(`${server.url}/3`)
  assert.equal(await db3.get(key), 'o')
  db3.disconnect()
})

test('concurrent operations share one pipelined connection; exactly one racer wins a key', async () => {
  // A server of its own, so the only other connection is the one counting.
  const quiet = await startRedis()
  const counter = new Redis(quiet.url)
  const s = new RedisLockStore(quiet.url)
  try {
    const key = uniqueKey('race')
    const wins = await Promise.all(Array.from({ length: 64 }, (_, i) => s.acquire(key, `owner-${i}`, 5_000)))
    assert.equal(wins.filter(Boolean).length, 1)
    const distinct = await Promise.all(Array.from({ length: 200 }, (_, i) => s.acquire(`${key}:${i}`, 'o', 5_000)))
    assert.ok(distinct.every(Boolean))
    const clients = (await counter.client('LIST')).trim().split('\n')
    assert.equal(clients.length, 2, `one connection carried all 264 commands:\n${clients.join('\n')}`)
  } finally {
    await s.close()
    counter.disconnect()
    await quiet.close()
  }
})

test('release and extend still work after the server forgets its scripts (NOSCRIPT)', async () => {
  const s = store()
  const key = uniqueKey('noscript')
  await s.acquire(key, 'o', 5_000)
  assert.equal(await s.extend(key, 'o', 9_000), true)
  await inspect.script('FLUSH')
  assert.equal(await s.extend(key, 'o', 9_000), true)
  await inspect.script('FLUSH')
  assert.equal(await s.release(key, 'o'), true)
  const stats = await inspect.info('commandstats')
  assert.match(stats, /cmdstat_evalsha:calls=\d+/, 'scripts are sent by digest')
})

test('an unreachable server is an error with code ERR_LOCK_STORE_CONNECTION, not a hang', async () => {
  const s = new RedisLockStore({ url: 'redis://127.0.0.1:1', connectTimeout: 500, commandTimeout: 500 })
  const started = Date.now()
  setLockStore(s)
  await assert.rejects(lock('k').acquire(), {
    code: 'ERR_LOCK_STORE_CONNECTION',
    message: /RedisLockStore\.acquire: could not connect to redis:\/\/127\.0\.0\.1:1/,
  })
  await assert.rejects(s.isLocked('k'), { code: 'ERR_LOCK_STORE_CONNECTION' })
  assert.ok(Date.now() - started < 3_000)
  await s.close()
})

test('after close(), operations reject with ERR_LOCK_STORE_CLOSED; close() twice is fine', async () => {
  const s = store()
  assert.equal(await s.isLocked(uniqueKey('x')), false)
  await s.close()
  await s.close()
  await assert.rejects(s.acquire('k', 'o', 10), { code: 'ERR_LOCK_STORE_CLOSED', message: /closed/ })
  setLockStore(s)
  const [ran] = await lock('k')
    .run(() => assert.fail('must not run'))
    .catch((e) => [e.code])
  assert.equal(ran, 'ERR_LOCK_STORE_CLOSED')
})

test('an idle store does not keep the process alive', () => {
  const script = `
    const { RedisLockStore, setLockStore, lock } = require('@shaferllc/keel/core')
    setLockStore(new RedisLockStore(${JSON.stringify(server.url)}))
    lock('idle-exit').run(() => 1).then(([ran]) => console.log(ran))
  `
  const started = Date.now()
  const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 10_000 })
  assert.equal(r.stdout.trim(), 'true', r.stderr)
  assert.equal(r.status, 0)
  assert.ok(Date.now() - started < 5_000, 'exited once its work was done')
})

test('username and password come from the URL (ACL); wrong ones are ERR_LOCK_STORE_AUTH', async () => {
  const secured = await startRedis({
    args: ['--requirepass', 'pass-for-default', '--user', 'app', 'on', '>app-pass', '~*', '+@all', '--user', 'nobody', 'on', '>nobody-pass', '~*', '-@all', '+auth', '+hello'],
  })
  try {
    const host = `127.0.0.1:${secured.port}`
    for (const url of [`redis://:pass-for-default@${host}`, `redis://app:app-pass@${host}`]) {
      const s = new RedisLockStore(url)
      assert.equal(await s.acquire(uniqueKey('acl'), 'o', 1_000), true, url)
      await s.close()
    }
    for (const url of [`redis://app:wrong@${host}`, `redis://${host}`, `redis://nobody:nobody-pass@${host}`]) {
      const s = new RedisLockStore({ url, connectTimeout: 1_000, commandTimeout: 1_000 })
      const error = await s.acquire('k', 'o', 1_000).then(
        () => assert.fail(`${url} must be refused`),
        (e) => e,
      )
      assert.equal(error.code, 'ERR_LOCK_STORE_AUTH', `${url}: ${error.message}`)
      assert.ok(!error.message.includes('wrong'), 'the password is not in the message')
      await s.close()
    }
  } finally {
    await secured.close()
  }
})

test('a frozen server times out at commandTimeout; once it resumes, the same store works', async () => {
  const frozen = await startRedis()
  const s = new RedisLockStore({ url: frozen.url, commandTimeout: 300, connectTimeout: 300 })
  try {
    assert.equal(await s.acquire('before', 'o', 10_000), true)
    frozen.kill('SIGSTOP')
    const started = Date.now()
    await assert.rejects(s.isLocked('before'), { code: 'ERR_LOCK_STORE_TIMEOUT' })
    const waited = Date.now() - started
    assert.ok(waited >= 250 && waited < 2_000, `gave up after ${waited} ms`)
    frozen.kill('SIGCONT')
    assert.equal(await eventually(() => s.isLocked('before')), true)
  } finally {
    frozen.kill('SIGCONT')
    await s.close()
    await frozen.close()
  }
})

test('after the server restarts, the same store reconnects on its own', async () => {
  const restarting = await startRedis()
  const s = new RedisLockStore({ url: restarting.url, commandTimeout: 1_000, connectTimeout: 500 })
  try {
    assert.equal(await s.acquire('a', 'o', 10_000), true)
    await restarting.stop()
    await assert.rejects(s.isLocked('a'), { code: /ERR_LOCK_STORE_(CONNECTION|TIMEOUT)/ })
    await restarting.start()
    // The server kept nothing (no persistence): the lock is gone, and the store is usable again.
    assert.equal(await eventually(() => s.acquire('a', 'o2', 10_000)), true)
    assert.equal(await s.release('a', 'o2'), true)
  } finally {
    await s.close()
    await restarting.close()
  }
})

// A connection the server closed is replaced and the command sent again.

/** run() once, with the lock free afterwards: the release went through too. */
async function runOnce(s, key) {
  setLockStore(s)
  assert.deepEqual(await lock(key).run(() => 'ok'), [true, 'ok'])
  assert.equal(await inspect.exists(key), 0, 'released')
}

test('the server closes idle connections (its timeout setting): the next run() works and releases', async () => {
  const idle = await startRedis({ args: ['--timeout', '1'] })
  const s = new RedisLockStore({ url: idle.url, commandTimeout: 2_000 })
  const admin = new Redis(idle.url)
  try {
    const key = uniqueKey('idle')
    setLockStore(s)
    assert.deepEqual(await lock(key).run(() => 'ok'), [true, 'ok'])
    const clients = async () => (await admin.client('LIST')).trim().split('\n').length
    const before = await clients()
    await sleep(3_500) // the server closes the store's idle connection
    assert.ok((await clients()) < before, 'the server closed the idle connection')
    assert.deepEqual(await lock(key).run(() => 'ok'), [true, 'ok'])
    assert.equal(await admin.exists(key), 0, 'released')
  } finally {
    admin.disconnect()
    await s.close()
    await idle.close()
  }
})

test('CLIENT KILL of the store connection: the next operation of each kind works', async () => {
  const s = store({ commandTimeout: 2_000 })
  const key = uniqueKey('killed')
  const kill = async () => {
    const killed = await inspect.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes')
    assert.ok(killed >= 1, 'a connection was killed')
  }
  await runOnce(s, key)
  await kill()
  await runOnce(s, key)
  for (const op of [
    () => s.acquire(key, 'o', 5_000),
    () => s.extend(key, 'o', 5_000),
    () => s.isLocked(key),
    () => s.remainingTime(key),
    () => s.release(key, 'o'),
  ]) {
    await kill()
    assert.notEqual(await op(), null)
  }
  assert.equal(await inspect.exists(key), 0)
})

test('after a restart, the first operation works: no error for the connection the restart closed', async () => {
  const restarting = await startRedis()
  const s = new RedisLockStore({ url: restarting.url, commandTimeout: 2_000, connectTimeout: 1_000 })
  try {
    setLockStore(s)
    assert.deepEqual(await lock('a').run(() => 1), [true, 1])
    await restarting.stop()
    await restarting.start()
    assert.deepEqual(await lock('a').run(() => 2), [true, 2])
  } finally {
    await s.close()
    await restarting.close()
  }
})

test('an acquire whose reply was lost after it ran finds its own lock, token and all', async () => {
  const proxy = await startProxy(server.port)
  const s = store({ url: proxy.url, commandTimeout: 2_000 })
  try {
    setLockStore(s)
    await lock(uniqueKey('warm')).run(() => {}) // the connection is open and the scripts loaded
    const key = uniqueKey('lost-reply')
    const l = lock(key, 10_000)
    proxy.loseNextReply()
    const connections = proxy.connections
    assert.equal(await l.acquire(), true, 'the acquire that ran is ours')
    assert.ok(proxy.connections > connections, 'sent again on a new connection')
    assert.equal(typeof l.fencingToken, 'number')
    assert.equal(await inspect.get(key), JSON.parse(l.serialize()).owner)
    assert.equal(await lock(key).acquire(), false)
    // A release whose reply is lost: sent again, it finds nothing of ours left; the lock is free either way.
    proxy.loseNextReply()
    await l.release()
    assert.equal(await inspect.exists(key), 0)
  } finally {
    await proxy.close()
  }
})

test('a waiter with time left rides out a server that is down, and takes the lock once it is back', async () => {
  const flaky = await startRedis()
  const s = new RedisLockStore({ url: flaky.url, commandTimeout: 500, connectTimeout: 300 })
  try {
    setLockStore(s)
    await flaky.stop()
    const started = Date.now()
    const waiting = lock('w').acquire({ timeout: 10_000, retryDelay: 50 })
    await sleep(1_500)
    await flaky.start()
    assert.equal(await waiting, true)
    assert.ok(Date.now() - started < 5_000, `took ${Date.now() - started} ms`)
    // With the server down until the timeout passes, the waiter rejects with the last error.
    await flaky.stop()
    const gaveUp = Date.now()
    await assert.rejects(lock('x').acquire({ timeout: 1_200, retryDelay: 50 }), { code: /ERR_LOCK_STORE_(CONNECTION|TIMEOUT)/ })
    const waited = Date.now() - gaveUp
    assert.ok(waited >= 1_150 && waited < 3_000, `gave up after ${waited} ms`)
    // Without a timeout there is no waiting: the error comes at once.
    await assert.rejects(lock('y').acquire(), { code: /ERR_LOCK_STORE_(CONNECTION|TIMEOUT)/ })
  } finally {
    await s.close()
    await flaky.close()
  }
})

test('?db=N in the URL is honoured; a second database, unknown parameters and #fragments are TypeErrors', async () => {
  const key = uniqueKey('db4')
  const s = store(`${server.url}?db=4`)
  assert.equal(await s.acquire(key, 'o', 5_000), true)
  const db4 = new Redis(`${server.url}/4`)
  try {
    assert.equal(await db4.get(key), 'o')
    assert.equal(await inspect.exists(key), 0, 'not in database 0')
  } finally {
    db4.disconnect()
  }
  assert.equal(await store(`${server.url}/4?db=4`).isLocked(key), true)
  for (const [url, message] of [
    [`${server.url}/0?db=4`, /names two databases, \/0 and \?db=4/],
    [`${server.url}?db=four`, /\?db= must be a database number/],
    [`${server.url}?protocol=resp3`, /the parameter "protocol", which this store does not know/],
    ['rediss://u:secret@127.0.0.1#insecure', /has a #fragment/],
  ]) {
    assert.throws(
      () => new RedisLockStore(url),
      (e) => e instanceof TypeError && message.test(e.message) && !e.message.includes('secret'),
      url,
    )
  }
})

test('a server that is not Redis: the error says it did not answer as Redis, not that it was unreachable', async () => {
  const { createServer } = await import('node:net')
  const speakers = {
    'closes at once': (socket) => socket.destroy(),
    'answers HTTP': (socket) => socket.once('data', () => socket.end('HTTP/1.1 400 Bad Request\r\n\r\n')),
  }
  for (const [what, serve] of Object.entries(speakers)) {
    const fake = createServer(serve)
    await new Promise((resolve) => fake.listen(0, '127.0.0.1', resolve))
    const s = new RedisLockStore({ url: `redis://127.0.0.1:${fake.address().port}`, connectTimeout: 1_000, commandTimeout: 1_000 })
    try {
      await assert.rejects(s.isLocked('k'), (e) => {
        assert.equal(e.code, 'ERR_LOCK_STORE_CONNECTION', what)
        assert.match(e.message, /accepted the connection but did not answer as a Redis server/, what)
        return true
      })
    } finally {
      await s.close()
      await new Promise((resolve) => fake.close(resolve))
    }
  }
})
