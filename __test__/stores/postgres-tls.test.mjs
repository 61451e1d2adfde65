// PostgresLockStore over TLS, to a PostgreSQL cluster this file starts with
// a throwaway CA and certificate (support/certs.mjs) that accepts TLS
// connections only, so a plain connection cannot pass these tests.

import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { lock, setLockStore, getLockStore, PostgresLockStore } from '@shaferllc/keel/core'
import { uniqueKey } from '../../support/servers.mjs'
import { startPostgres } from '../../support/postgres.mjs'
import { makeCertificates } from '../../support/certs.mjs'
import { describeWith } from '../helpers/tools.mjs'

describeWith(['openssl'], 'PostgresLockStore over TLS', () => {
  const certificates = makeCertificates()
  const { ca } = certificates
  let server
  const stores = []
  const store = (options) => {
    const s = new PostgresLockStore({ connectTimeout: 2_000, commandTimeout: 2_000, ...options })
    stores.push(s)
    return s
  }

  before(async () => {
    server = await startPostgres({ tls: certificates.server })
  })

  after(async () => {
    for (const s of stores) await s.close()
    await server?.close()
    certificates.remove()
  })

  const at = (host = '127.0.0.1', query = '') => `postgres://postgres@${host}:${server.port}/postgres${query}`

  test('with the private CA: locks are taken, held, announced and released over TLS', async () => {
    const tls = store({ url: at(), tls: { ca } })
    const other = store({ url: at('localhost', '?sslmode=require'), tls: { ca: Buffer.from(ca) } })
    const previous = getLockStore()
    setLockStore(tls)
    try {
      const key = uniqueKey('pg-tls')
      const held = lock(key, 5_000)
      assert.equal(await held.acquire(), true)
      assert.equal(await other.acquire(key, 'someone-else', 5_000), false)
      assert.equal(typeof held.fencingToken, 'number')
      // A waiter here hears a release made through the other store (its own TLS connections).
      await held.release()
      assert.equal(await other.acquire(key, 'other-owner', 60_000), true)
      const waiting = lock(key).acquire({ timeout: 10_000, retryDelay: 60_000 })
      await new Promise((resolve) => setTimeout(resolve, 300))
      const released = performance.now()
      assert.equal(await other.release(key, 'other-owner'), true)
      assert.equal(await waiting, true)
      assert.ok(performance.now() - released < 5_000, 'woken by the announcement, not the 60 s poll')
    } finally {
      setLockStore(previous)
    }
  })

  test('a plain connection is refused by a server that accepts TLS only', async () => {
    const plain = store({ url: at() })
    await assert.rejects(plain.isLocked('k'), (e) => e.code === 'ERR_LOCK_STORE_AUTH' && /no encryption/.test(e.message))
  })

  test('the system roots do not trust the private CA: a connection error naming the reason', async () => {
    const untrusted = store({ url: at('127.0.0.1', '?sslmode=require') })
    await assert.rejects(untrusted.isLocked('k'), (e) => e.code === 'ERR_LOCK_STORE_CONNECTION' && /UnknownIssuer/.test(e.message))
  })

  test('a host name the certificate does not hold is refused', async () => {
    const wrongName = store({ url: at('127.0.0.2'), tls: { ca } })
    await assert.rejects(wrongName.isLocked('k'), (e) => e.code === 'ERR_LOCK_STORE_CONNECTION' && /not valid for name/i.test(e.message))
  })

  test('certificates are checked when the store is made', () => {
    assert.throws(() => new PostgresLockStore({ url: at(), tls: { ca: 'not a certificate' } }), (e) => e instanceof TypeError && /options\.tls\.ca/.test(e.message))
    assert.throws(() => new PostgresLockStore({ url: at(), tls: { cert: certificates.client.cert } }), (e) => e instanceof TypeError && /options\.tls\.cert and options\.tls\.key go together/.test(e.message))
  })

  // Past rustls's own buffers (64 KiB of records to send, 16 KiB of decrypted
  // answers unread), a TLS connection behaves exactly as a plain one.
  test('under load over TLS: 50,000 operations in flight at once are all answered', async () => {
    const loaded = store({ url: at(), tls: { ca }, commandTimeout: 60_000, poolSize: 2 })
    const keys = Array.from({ length: 25_000 }, (_, i) => `pg-tls-load:${i}:${uniqueKey('k')}`)
    const taken = await Promise.all(keys.map((k) => loaded.acquire(k, 'owner', 120_000)))
    assert.equal(taken.filter(Boolean).length, keys.length)
    const released = await Promise.all(keys.map((k) => loaded.release(k, 'owner')))
    assert.equal(released.filter(Boolean).length, keys.length)
  })

  test('every sslmode of libpq is taken: verify-full and verify-ca check the certificate, as require does', async () => {
    for (const mode of ['verify-full', 'verify-ca', 'require']) {
      const verified = store({ url: at('127.0.0.1', `?sslmode=${mode}`), tls: { ca } })
      const key = uniqueKey(`pg-${mode}`)
      assert.equal(await verified.acquire(key, 'owner', 5_000), true, mode)
      assert.equal(await verified.release(key, 'owner'), true, mode)
    }
    // A name the certificate does not hold is refused under each of them.
    const wrongName = store({ url: at('127.0.0.2', '?sslmode=verify-ca'), tls: { ca } })
    await assert.rejects(wrongName.isLocked('k'), (e) => e.code === 'ERR_LOCK_STORE_CONNECTION' && /not valid for name/i.test(e.message))
  })

  test('sslmode=prefer speaks TLS to a server that has it, and never settles for an unchecked certificate', async () => {
    // This server accepts TLS connections only: an answer means TLS was spoken.
    const preferred = store({ url: at('127.0.0.1', '?sslmode=prefer'), tls: { ca } })
    assert.equal(await preferred.isLocked(uniqueKey('pg-prefer')), false)
    const untrusted = store({ url: at('127.0.0.1', '?sslmode=prefer') })
    await assert.rejects(untrusted.isLocked('k'), (e) => e.code === 'ERR_LOCK_STORE_CONNECTION' && /UnknownIssuer/.test(e.message))
  })

  test('sslmode=prefer speaks plain text to a server without TLS', async () => {
    const plainServer = await startPostgres()
    try {
      const preferred = store({ url: `${plainServer.url}?sslmode=prefer` })
      const key = uniqueKey('pg-prefer-plain')
      assert.equal(await preferred.acquire(key, 'owner', 5_000), true)
      assert.equal(await preferred.release(key, 'owner'), true)
      await preferred.close()
    } finally {
      await plainServer.close()
    }
  })

  test('an sslmode libpq does not know is refused when the store is made, naming it, with no password shown', () => {
    assert.throws(
      () => new PostgresLockStore({ url: 'postgres://app@db.internal/app?sslmode=always' }),
      (e) => e instanceof TypeError && /sslmode=always/.test(e.message) && /verify-full/.test(e.message) && !/\*\*\*/.test(e.message),
    )
    assert.throws(
      () => new PostgresLockStore({ url: 'postgres://app:s3cret@db.internal/app?sslmode=always' }),
      (e) => e instanceof TypeError && !/s3cret/.test(e.message),
    )
  })
})
