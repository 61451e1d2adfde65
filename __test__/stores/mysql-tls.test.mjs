// MySqlLockStore and ssl-mode, against MariaDB servers this file starts: one
// that speaks TLS with a throwaway CA's certificate for 127.0.0.1 and
// localhost (support/certs.mjs) and refuses TCP connections without it
// (require_secure_transport), so an answer over TCP means TLS was spoken;
// and one without TLS at all. The store checks the certificate, chain and
// host name, whenever it speaks TLS, whatever ssl-mode says; PREFERRED
// settles for plain text only with a server that has no TLS. A recording
// proxy shows what crosses the wire.

import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { createServer, connect } from 'node:net'
import { MySqlLockStore } from '@shaferllc/keel/core'
import { uniqueKey } from '../../support/servers.mjs'
import { startMariaDb } from '../../support/mariadb.mjs'
import { makeCertificates } from '../../support/certs.mjs'
import { describeWith } from '../helpers/tools.mjs'

const PASSWORD = 's3cret-pw'

/**
 * A TCP proxy on `host` (a loopback address) in front of 127.0.0.1:`port`
 * that keeps every byte it passes on, each way: `sent()` is what clients
 * sent, `received()` what the server answered.
 */
async function recordingProxy(port, host = '127.0.0.1') {
  const up = []
  const down = []
  const sockets = new Set()
  const listener = createServer((client) => {
    const server = connect(port, '127.0.0.1')
    sockets.add(client).add(server)
    client.on('data', (d) => (up.push(d), server.write(d)))
    server.on('data', (d) => (down.push(d), client.write(d)))
    for (const s of [client, server]) {
      s.on('error', () => {})
      s.on('close', () => (client.destroy(), server.destroy()))
    }
  })
  await new Promise((resolve, reject) => listener.once('error', reject).listen(0, host, resolve))
  return {
    port: listener.address().port,
    sent: () => Buffer.concat(up),
    received: () => Buffer.concat(down),
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy()
        listener.close(resolve)
      }),
  }
}

/** Whether `bytes` hold `text` as is or as hex digits (how the store writes keys and owners into its SQL). */
function holds(bytes, text) {
  const hex = Buffer.from(text).toString('hex')
  return [text, hex.toUpperCase(), hex].some((form) => bytes.includes(form))
}

describeWith(['mariadb', 'openssl'], 'MySqlLockStore over TLS (ssl-mode)', () => {
  const certificates = makeCertificates()
  const { ca, client } = certificates
  // A second CA: the same subject name as the first, another key.
  const otherCertificates = makeCertificates()
  let secure
  let plain
  const stores = []
  const closers = []
  const store = (options) => {
    const s = new MySqlLockStore({ connectTimeout: 3_000, commandTimeout: 3_000, ...options })
    stores.push(s)
    return s
  }

  before(async () => {
    // `ca` lets the server check client certificates (REQUIRE X509).
    secure = await startMariaDb({ password: PASSWORD, tls: { ...certificates.server, ca }, requireTls: true })
    plain = await startMariaDb({ password: PASSWORD })
  })

  after(async () => {
    for (const s of stores) await s.close()
    for (const close of closers) await close()
    await secure?.close()
    await plain?.close()
    certificates.remove()
    otherCertificates.remove()
  })

  const at = (server, query = '', host = '127.0.0.1', port = server.port) =>
    `mysql://root:${PASSWORD}@${host}:${port}/test${query}`

  /** `s` takes, sees and gives back a lock: its connections work. */
  const works = async (s, name) => {
    const key = uniqueKey(`mysql-tls-${name}`)
    assert.equal(await s.acquire(key, 'owner', 5_000), true, name)
    assert.equal(await s.acquire(key, 'someone-else', 5_000), false, name)
    const left = await s.remainingTime(key)
    assert.ok(left > 3_000 && left <= 5_000, `${name}: ${left} ms left`)
    assert.equal(await s.release(key, 'owner'), true, name)
    assert.equal(await s.isLocked(key), false, name)
  }

  /** A connection error that names the certificate's fault (`why`) and not the password. */
  const certificateRefused = (why) => (e) => {
    assert.equal(e.code, 'ERR_LOCK_STORE_CONNECTION', e.message)
    assert.match(e.message, /could not set up TLS with mysql:\/\/root@/)
    assert.match(e.message, /certificate/i)
    assert.match(e.message, why)
    assert.doesNotMatch(e.message, new RegExp(PASSWORD))
    return true
  }

  test('with the private CA: every ssl-mode that speaks TLS, and tls alone, work (the server takes TLS only)', async () => {
    for (const mode of ['REQUIRED', 'VERIFY_CA', 'VERIFY_IDENTITY', 'PREFERRED', 'required', 'verify_identity']) {
      await works(store({ url: at(secure, `?ssl-mode=${mode}`), tls: { ca } }), mode)
    }
    await works(store({ url: at(secure), tls: { ca } }), 'tls alone')
    await works(store({ url: at(secure, '', 'localhost'), tls: { ca: Buffer.from(ca) } }), 'localhost, ca as a Buffer')
    // The other spellings of the parameter, as other clients write it.
    await works(store({ url: at(secure, '?sslMode=VERIFY_CA'), tls: { ca } }), 'sslMode')
    await works(store({ url: at(secure, '?ssl_mode=REQUIRED'), tls: { ca } }), 'ssl_mode')
    // Two stores over TLS share the locks.
    const [one, two] = [store({ url: at(secure), tls: { ca } }), store({ url: at(secure, '?ssl-mode=REQUIRED'), tls: { ca } })]
    const key = uniqueKey('mysql-tls-shared')
    assert.equal(await one.acquire(key, 'one', 5_000), true)
    assert.equal(await two.acquire(key, 'two', 5_000), false)
    assert.equal(await two.isLocked(key), true)
    assert.equal(await one.release(key, 'one'), true)
    assert.equal(await two.acquire(key, 'two', 5_000), true)
  })

  test('a certificate from another CA is refused, whatever ssl-mode says', async () => {
    const otherCa = otherCertificates.ca
    for (const query of ['', '?ssl-mode=REQUIRED', '?ssl-mode=VERIFY_CA', '?ssl-mode=PREFERRED']) {
      const wrong = store({ url: at(secure, query), tls: { ca: otherCa } })
      // Same issuer name, another key: the signature does not check out.
      await assert.rejects(wrong.isLocked('k'), certificateRefused(/BadSignature/))
    }
    // No `tls`: the system's roots, which do not hold the private CA.
    for (const mode of ['REQUIRED', 'VERIFY_CA', 'PREFERRED']) {
      const untrusted = store({ url: at(secure, `?ssl-mode=${mode}`) })
      await assert.rejects(untrusted.acquire('k', 'o', 1_000), certificateRefused(/UnknownIssuer/))
    }
  })

  test('a host name the certificate does not hold is refused, even with ssl-mode=REQUIRED or PREFERRED', async () => {
    // The server's certificate names 127.0.0.1 and localhost; 127.0.0.2 is the same server, through a proxy.
    const proxy = await recordingProxy(secure.port, '127.0.0.2')
    closers.push(proxy.close)
    for (const query of ['', '?ssl-mode=REQUIRED', '?ssl-mode=VERIFY_CA', '?ssl-mode=VERIFY_IDENTITY', '?ssl-mode=PREFERRED']) {
      const wrongName = store({ url: at(secure, query, '127.0.0.2', proxy.port), tls: { ca } })
      await assert.rejects(wrongName.isLocked('k'), certificateRefused(/not valid for name "127\.0\.0\.2"/))
    }
    // The proxy itself passes a good connection on: the name is what was refused.
    const good = await recordingProxy(secure.port)
    closers.push(good.close)
    await works(store({ url: at(secure, '', '127.0.0.1', good.port), tls: { ca } }), 'through a proxy')
  })

  test('the traffic is encrypted: the key, the owner and the password never cross the wire in the clear', async () => {
    const proxy = await recordingProxy(secure.port)
    closers.push(proxy.close)
    const key = `keel-plain-text-canary:${uniqueKey('k')}`
    const owner = 'owner-canary-7f3a'
    const s = store({ url: at(secure, '', '127.0.0.1', proxy.port), tls: { ca } })
    assert.equal(await s.acquire(key, owner, 5_000), true)
    assert.equal(await s.isLocked(key), true)
    assert.equal(await s.extend(key, owner, 5_000), true)
    assert.equal(await s.release(key, owner), true)
    const sent = proxy.sent()
    const received = proxy.received()
    assert.ok(sent.length > 1_000 && received.length > 1_000, `${sent.length} bytes sent, ${received.length} received`)
    // After the 36-byte request to switch (a 4-byte header, 32 bytes), a TLS handshake record.
    assert.equal(sent.readUIntLE(0, 3), 32)
    assert.equal(sent[36], 0x16, 'a TLS handshake record follows the request to switch')
    for (const text of [key, owner, PASSWORD, 'keel_locks']) {
      assert.equal(holds(sent, text), false, `${text} was sent in the clear`)
      assert.equal(holds(received, text), false, `${text} came back in the clear`)
    }
    // The same through the same kind of proxy to the server without TLS
    // (ssl-mode=PREFERRED): there the recording shows the key, the owner and
    // the table, so it would have over TLS too, had they been sent in the clear.
    const plainProxy = await recordingProxy(plain.port)
    closers.push(plainProxy.close)
    const clear = store({ url: at(plain, '?ssl-mode=PREFERRED', '127.0.0.1', plainProxy.port) })
    assert.equal(await clear.acquire(key, owner, 5_000), true)
    for (const text of [key, owner, 'keel_locks']) {
      assert.equal(holds(plainProxy.sent(), text), true, `a plain connection sends ${text}, and the recording holds it`)
    }
    assert.equal(holds(plainProxy.sent(), PASSWORD), false, 'the password is sent hashed, even in plain text')
  })

  test('ssl-mode=PREFERRED speaks plain text to a server without TLS; REQUIRED and tls refuse it, saying why', async () => {
    await works(store({ url: at(plain, '?ssl-mode=PREFERRED') }), 'PREFERRED, no TLS at the server')
    await works(store({ url: at(plain, '?ssl-mode=PREFERRED'), tls: { ca } }), 'PREFERRED with a CA, no TLS at the server')
    await works(store({ url: at(plain, '?ssl-mode=DISABLED') }), 'DISABLED')
    await works(store({ url: at(plain) }), 'no ssl-mode')
    for (const [query, tls] of [['?ssl-mode=REQUIRED', undefined], ['?ssl-mode=VERIFY_IDENTITY', { ca }], ['', { ca }]]) {
      const required = store({ url: at(plain, query), tls })
      await assert.rejects(required.acquire('k', 'o', 1_000), (e) => {
        assert.equal(e.code, 'ERR_LOCK_STORE_CONNECTION', e.message)
        assert.match(e.message, /could not set up TLS with mysql:\/\/root@127\.0\.0\.1:\d+\/test: the server does not accept TLS connections/)
        return true
      })
    }
  })

  test('ssl-mode=DISABLED to a server that takes TLS only: refused, as MariaDB says it (access denied)', async () => {
    for (const query of ['?ssl-mode=DISABLED', '']) {
      const off = store({ url: at(secure, query) })
      // require_secure_transport: MariaDB answers a plain login with error 1045, access denied.
      await assert.rejects(off.isLocked('k'), (e) => {
        assert.equal(e.code, 'ERR_LOCK_STORE_AUTH', e.message)
        assert.match(e.message, /was refused by mysql:\/\/root@127\.0\.0\.1:\d+\/test: Access denied for user 'root'@'[^']+' \(using password: YES\) \(1045\)/)
        // Plain text unless asked for TLS, and what to add when the server takes TLS only.
        assert.match(e.message, /this store spoke plain text, as it does unless the URL's ssl-mode or options\.tls asks for TLS.*\?ssl-mode=VERIFY_IDENTITY/)
        assert.doesNotMatch(e.message, new RegExp(PASSWORD))
        return true
      })
    }
    // DISABLED and tls together contradict each other: refused when the store is made.
    assert.throws(
      () => new MySqlLockStore({ url: at(secure, '?ssl-mode=DISABLED'), tls: { ca } }),
      (e) => e instanceof TypeError && /options\.tls is given but url .* turns TLS off/.test(e.message) && !e.message.includes(PASSWORD),
    )
  })

  test('a wrong password over TLS is the server refusing us, not a TLS failure', async () => {
    const wrong = store({ url: `mysql://root:not-it@127.0.0.1:${secure.port}/test`, tls: { ca } })
    await assert.rejects(wrong.isLocked('k'), (e) => e.code === 'ERR_LOCK_STORE_AUTH' && /Access denied .*\(1045\)/.test(e.message) && !e.message.includes('not-it'))
  })

  test('an account that requires a client certificate (REQUIRE X509): refused without one, served with it', async () => {
    await secure.query(
      "CREATE USER certified@'%' IDENTIFIED BY 'c3rt' REQUIRE X509; GRANT ALL PRIVILEGES ON test.* TO certified@'%';",
    )
    const url = `mysql://certified:c3rt@127.0.0.1:${secure.port}/test`
    const without = store({ url, tls: { ca } })
    await assert.rejects(without.isLocked('k'), (e) => {
      assert.equal(e.code, 'ERR_LOCK_STORE_AUTH', e.message)
      assert.match(e.message, /Access denied for user 'certified'.*\(1045\)/)
      return true
    })
    await works(store({ url, tls: { ca, cert: client.cert, key: client.key } }), 'with a client certificate')
    await works(store({ url: `${url}?ssl-mode=VERIFY_CA`, tls: { ca, cert: Buffer.from(client.cert), key: Buffer.from(client.key) } }), 'VERIFY_CA')
    // A certificate the server's CA did not issue: the server ends the
    // handshake with an alert (under TLS 1.3 the client hears it as it logs in).
    const stranger = store({ url, tls: { ca, cert: otherCertificates.client.cert, key: otherCertificates.client.key } })
    await assert.rejects(stranger.isLocked('k'), (e) => {
      assert.equal(e.code, 'ERR_LOCK_STORE_CONNECTION', e.message)
      assert.match(e.message, /mysql:\/\/certified@127\.0\.0\.1:\d+\/test: .*alert: UnknownCA/)
      return true
    })
  })

  test('over TLS the server may switch the login to another plugin: one the store does not speak is named', async (t) => {
    try {
      await secure.query("INSTALL SONAME 'auth_ed25519'")
    } catch (e) {
      return t.skip(`this MariaDB has no ed25519 plugin: ${e.message}`)
    }
    await secure.query(
      "CREATE USER edward@'%' IDENTIFIED VIA ed25519 USING PASSWORD('ed-pw'); GRANT ALL PRIVILEGES ON test.* TO edward@'%';",
    )
    // The greeting proposes mysql_native_password; the account asks to switch to client_ed25519.
    const switched = store({ url: `mysql://edward:ed-pw@127.0.0.1:${secure.port}/test`, tls: { ca } })
    await assert.rejects(switched.isLocked('k'), (e) => {
      assert.equal(e.code, 'ERR_LOCK_STORE_AUTH', e.message)
      assert.match(e.message, /cannot log in to mysql:\/\/edward@127\.0\.0\.1:\d+\/test: the account uses the client_ed25519 plugin; this store speaks mysql_native_password and caching_sha2_password/)
      assert.doesNotMatch(e.message, /ed-pw/)
      return true
    })
  })

  test('through the unix socket there is no TLS, and the server needs none; ssl-mode asking for it there is refused', async () => {
    const socketUrl = secure.socketUrl.replace('root@', `root:${PASSWORD}@`)
    await works(store({ url: socketUrl }), 'socket')
    await works(store({ url: `${socketUrl}&ssl-mode=PREFERRED` }), 'socket, PREFERRED')
    await works(store({ url: `${socketUrl}&ssl-mode=DISABLED` }), 'socket, DISABLED')
    for (const mode of ['REQUIRED', 'VERIFY_CA', 'VERIFY_IDENTITY']) {
      assert.throws(
        () => new MySqlLockStore({ url: `${socketUrl}&ssl-mode=${mode}` }),
        (e) => e instanceof TypeError && /asks for TLS over a unix socket/.test(e.message) && !e.message.includes(PASSWORD),
        mode,
      )
    }
    assert.throws(() => new MySqlLockStore({ url: socketUrl, tls: { ca } }), (e) => e instanceof TypeError && /unix socket/.test(e.message))
  })

  // Past rustls's own buffers (records waiting to be sent, answers decrypted
  // and not yet read), a TLS connection on the event loop behaves as a plain one.
  test('under load over TLS: 10,000 acquisitions in flight at once, then as many releases, are all answered', async () => {
    const loaded = store({ url: at(secure), tls: { ca }, commandTimeout: 60_000, poolSize: 2 })
    const keys = Array.from({ length: 10_000 }, (_, i) => `mysql-tls-load:${i}:${uniqueKey('k')}`)
    const taken = await Promise.all(keys.map((k) => loaded.acquire(k, 'owner', 120_000)))
    assert.equal(taken.filter(Boolean).length, keys.length)
    const released = await Promise.all(keys.map((k) => loaded.release(k, 'owner')))
    assert.equal(released.filter(Boolean).length, keys.length)
  })

  test('certificates are checked when the store is made', () => {
    assert.throws(() => new MySqlLockStore({ url: at(secure), tls: { ca: 'not a certificate' } }), (e) => e instanceof TypeError && /options\.tls\.ca/.test(e.message))
    assert.throws(() => new MySqlLockStore({ url: at(secure), tls: { cert: client.cert } }), (e) => e instanceof TypeError && /options\.tls\.cert and options\.tls\.key go together/.test(e.message))
  })
})
