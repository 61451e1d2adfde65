// rediss://: RedisLockStore over TLS to redis-servers this file starts with
// a throwaway CA and certificates (support/certs.mjs, the openssl CLI). The servers
// listen on a TLS port only, so a plain connection cannot pass these tests.

import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { lock, setLockStore, RedisLockStore } from '@shaferllc/keel/core'
import { startRedis, uniqueKey } from '../../support/servers.mjs'
import { makeCertificates } from '../../support/certs.mjs'
import { describeWith } from '../helpers/tools.mjs'

describeWith(['openssl'], 'RedisLockStore over TLS (rediss://)', () => {
  const certificates = makeCertificates()
  const { ca, client, file } = certificates

  const tlsArgs = (authClients) => (port) => [
    // The TLS port is the server's only port: --port 0 switches the plain one off.
    '--port', '0', '--tls-port', String(port), '--bind', '127.0.0.1', '127.0.0.2',
    '--tls-cert-file', file('server.crt'), '--tls-key-file', file('server.key'), '--tls-ca-cert-file', file('ca.crt'),
    '--tls-auth-clients', authClients,
  ]

  let server
  let mutual
  const stores = []
  const store = (options) => {
    const s = new RedisLockStore({ connectTimeout: 2_000, commandTimeout: 2_000, ...options })
    stores.push(s)
    return s
  }

  before(async () => {
    server = await startRedis({ args: tlsArgs('no') })
    mutual = await startRedis({ args: tlsArgs('yes') })
  })

  after(async () => {
    for (const s of stores) await s.close()
    await server?.close()
    await mutual?.close()
    certificates.remove()
  })

  const at = (s, host = '127.0.0.1', scheme = 'rediss') => `${scheme}://${host}:${s.port}`

  test('rediss:// with the private CA: locks are taken, held, extended and released over TLS', async () => {
    const tls = store({ url: at(server), tls: { ca } })
    setLockStore(tls)
    const other = store({ url: `rediss://localhost:${server.port}`, tls: { ca: Buffer.from(ca) } })
    const key = uniqueKey('tls')
    const l = lock(key, 5_000)
    assert.equal(await l.acquire(), true)
    assert.equal(await other.isLocked(key), true, 'a second TLS connection sees the lock')
    assert.equal(await other.acquire(key, 'someone else', 5_000), false)
    await l.extend(10_000)
    const left = await other.remainingTime(key)
    assert.ok(left > 5_000 && left <= 10_000, `remaining ${left}`)
    assert.equal(await l.release(), true)
    assert.equal(await other.isLocked(key), false)
    setLockStore(other)
    assert.deepEqual(await lock(key).run(async () => 'ran over TLS'), [true, 'ran over TLS'])
  })

  test('over TLS a release is announced: a waiter is woken long before its poll', async () => {
    const holderStore = store({ url: at(server), tls: { ca } })
    const waiterStore = store({ url: at(server), tls: { ca } })
    const key = uniqueKey('tls-wake')
    // The holder is another client on the server: its release is only seen
    // through the announcement (or the poll, 60 s away).
    assert.equal(await holderStore.acquire(key, 'holder', 30_000), true)
    setLockStore(waiterStore)
    const started = Date.now()
    const waiting = lock(key, 5_000).acquire({ timeout: 20_000, retryDelay: 60_000 })
    setTimeout(() => holderStore.release(key, 'holder'), 300)
    assert.equal(await waiting, true)
    const took = Date.now() - started
    assert.ok(took < 15_000, `woken after ${took} ms; the poll alone would take 60000`)
  })

  test('a server certificate from a CA the client does not trust is refused with a clear error', async () => {
    // Without tls.ca the system's roots decide, and they do not know the test CA.
    const untrusted = store({ url: at(server) })
    const key = uniqueKey('untrusted')
    setLockStore(untrusted)
    await assert.rejects(lock(key).run(() => assert.fail('ran without the lock')), (e) => {
      assert.equal(e.code, 'ERR_LOCK_STORE_CONNECTION', e.message)
      assert.match(e.message, /certificate|UnknownIssuer/i)
      return true
    })
  })

  test('a certificate for another host name is refused (127.0.0.2 is not in its names)', async () => {
    const wrongName = store({ url: at(server, '127.0.0.2'), tls: { ca } })
    await assert.rejects(wrongName.acquire(uniqueKey('name'), 'o', 1_000), (e) => {
      assert.equal(e.code, 'ERR_LOCK_STORE_CONNECTION', e.message)
      assert.match(e.message, /certificate|NotValidForName/i)
      return true
    })
  })

  test('a plain redis:// connection to the TLS port fails within its timeouts, not a hang', async () => {
    const plain = store({ url: at(server, '127.0.0.1', 'redis'), connectTimeout: 500, commandTimeout: 500 })
    const started = Date.now()
    await assert.rejects(plain.acquire(uniqueKey('plain'), 'o', 1_000), (e) => {
      assert.match(e.code, /^ERR_LOCK_STORE_(CONNECTION|TIMEOUT)$/, e.message)
      return true
    })
    assert.ok(Date.now() - started < 5_000)
  })

  test('a server that asks for a client certificate: accepted with tls.cert + tls.key, refused without', async () => {
    const withCert = store({ url: at(mutual), tls: { ca, cert: client.cert, key: Buffer.from(client.key) } })
    const key = uniqueKey('mtls')
    setLockStore(withCert)
    assert.deepEqual(await lock(key).run(async () => 'mutual'), [true, 'mutual'])
    const withoutCert = store({ url: at(mutual), tls: { ca } })
    await assert.rejects(withoutCert.acquire(key, 'o', 1_000), (e) => {
      assert.match(e.code, /^ERR_LOCK_STORE_(CONNECTION|TIMEOUT)$/, e.message)
      return true
    })
  })

  test('tls options are checked when the store is made: TypeErrors that name the option', () => {
    const cases = [
      [{ url: at(server), tls: 'yes' }, /options\.tls must be an object like \{ ca, cert, key \}, got a string \("yes"\)/],
      [{ url: at(server), tls: { ca, verify: false } }, /unknown options\.tls field verify \(known: ca, cert, key\)/],
      [{ url: at(server), tls: { ca: 42 } }, /options\.tls\.ca must be PEM text \(a string or Buffer\), got 42/],
      [{ url: at(server), tls: { cert: client.cert } }, /options\.tls\.cert and options\.tls\.key go together/],
      [{ url: at(server, '127.0.0.1', 'redis'), tls: { ca } }, /options\.tls needs a rediss:\/\/ url/],
      [{ url: at(server), tls: { ca: '-----BEGIN CERTIFICATE-----\nbm9wZQ==\n-----END CERTIFICATE-----\n' } }, /options\.tls/],
    ]
    for (const [options, message] of cases) {
      assert.throws(() => new RedisLockStore(options), (e) => {
        assert.ok(e instanceof TypeError, `${e.constructor.name}: ${e.message}`)
        assert.match(e.message, message)
        return true
      })
    }
  })

  // Past rustls's own buffers (64 KiB of records to send, 16 KiB of decrypted
  // replies unread), a TLS connection behaves exactly as a plain one.
  test('under load over TLS: 50,000 operations in flight at once are all answered', async () => {
    const loaded = store({ url: at(server), tls: { ca }, commandTimeout: 30_000 })
    const keys = Array.from({ length: 25_000 }, (_, i) => `tls-load:${i}:${uniqueKey('k')}`)
    const taken = await Promise.all(keys.map((k) => loaded.acquire(k, 'owner', 60_000)))
    assert.equal(taken.filter(Boolean).length, keys.length)
    const released = await Promise.all(keys.map((k) => loaded.release(k, 'owner')))
    assert.equal(released.filter(Boolean).length, keys.length)
  })

  test('over TLS, keys of 64 KiB and 1 MiB are locked, held and released like any other', async () => {
    const big = store({ url: at(server), tls: { ca }, commandTimeout: 10_000 })
    setLockStore(big)
    for (const size of [64 * 1024, 1024 * 1024]) {
      const key = uniqueKey('big').padEnd(size, 'k')
      const [ran, seen] = await lock(key, 30_000).run(async () => big.isLocked(key))
      assert.equal(ran, true)
      assert.equal(seen, true, 'held inside run()')
      assert.equal(await big.isLocked(key), false, `the ${size}-byte key was released when run() returned`)
    }
  })
})
