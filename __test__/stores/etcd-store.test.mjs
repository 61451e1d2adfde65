// EtcdLockStore beyond the contract (contract/etcd.test.mjs): its options
// checked up front; a lock held while the leader is SIGKILLed stays held,
// can be extended and released, and then goes to a waiter; a member left
// without a quorum refuses rather than grants; a user with a role on the
// prefix, and a wrong password never shown; TLS, with and without client
// certificates. Skipped, saying so, when etcd is not installed.
import { describe, test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { lock, semaphore, EtcdLockStore, LockStoreError } from '@shaferllc/keel/core'
import { uniqueKey, freePort } from '../../support/servers.mjs'
import { startEtcd } from '../../support/etcd.mjs'
import { makeCertificates } from '../../support/certs.mjs'
import { describeWith } from '../helpers/tools.mjs'
import { withStore } from '../helpers/stores.mjs'

describe('new EtcdLockStore checks its options up front', () => {
  test('bad options are TypeErrors or RangeErrors naming them', () => {
    const refused = [
      [{ endpoints: 2379 }, TypeError, /options\.endpoints must be a URL/],
      [{ endpoints: [] }, TypeError, /options\.endpoints must name at least one URL/],
      [{ endpoints: 'http://a:2379,' }, TypeError, /no empty one \(2 given\)/],
      [{ endpoints: 'redis://127.0.0.1:6379' }, TypeError, /options\.endpoints: .*scheme must be http or https/],
      [{ endpoints: 'http://user:pw@127.0.0.1:2379' }, TypeError, /give username and password as options/],
      [{ endpoints: 'http://127.0.0.1:2379/v3' }, TypeError, /a scheme, a host and a port, nothing more/],
      [{ url: 'http://127.0.0.1:2379' }, TypeError, /unknown option url \(known: endpoints, prefix, username, password/],
      [{ prefix: 42 }, TypeError, /options\.prefix/],
      [{ username: '' }, TypeError, /options\.username must be a non-empty string/],
      [{ password: 'p' }, TypeError, /options\.password is given without options\.username/],
      [{ commandTimeout: -1 }, RangeError, /options\.commandTimeout/],
      [{ connectTimeout: 0 }, RangeError, /options\.connectTimeout/],
      [{ tls: 'yes' }, TypeError, /options\.tls must be an object/],
      [{ endpoints: undefined }, TypeError, /options\.endpoints is undefined/],
      [undefined, TypeError, /url is undefined/],
      [42, TypeError, /expected an etcd URL/],
    ]
    for (const [options, type, message] of refused) {
      assert.throws(() => new EtcdLockStore(options), (e) => e instanceof type && message.test(e.message), JSON.stringify(options))
    }
  })

  test('a password never appears in a message', () => {
    const secret = 'hunter2-never-shown'
    const attempts = [
      { username: 'u', password: 42 },
      { username: 'u', password: secret, endpoints: 'ftp://x' },
      { endpoints: `http://app:${secret}@127.0.0.1:2379` },
      { endpoints: `http://app:${secret}@127.0.0.1:99999` },
      { endpoints: `http://app:${secret}@127.0.0.1:2379,` },
      { endpoints: [`http://app:${secret}@127.0.0.1:2379`, 42] },
    ]
    for (const options of attempts) {
      assert.throws(
        () => new EtcdLockStore(options),
        (e) => !e.message.includes(secret) && !e.message.includes('42'),
      )
    }
  })

  test('a URL, a comma-separated list or an array; nothing connects until asked', async () => {
    const port = await freePort()
    for (const given of [`http://127.0.0.1:${port}`, `http://127.0.0.1:${port}, http://[::1]:${port}`, [`http://127.0.0.1:${port}`]]) {
      const store = new EtcdLockStore(given)
      await store.close()
    }
    const store = new EtcdLockStore({ endpoints: `http://127.0.0.1:${port}`, connectTimeout: 300, commandTimeout: 300 })
    await assert.rejects(store.ping(), (e) => e instanceof LockStoreError && e.code === 'ERR_LOCK_STORE_CONNECTION' && e.message.includes(`127.0.0.1:${port}`))
    await store.close()
  })
})

describeWith(['etcd', 'etcdctl'], 'EtcdLockStore on a 3-member cluster through failures', () => {
  let etcd
  before(async () => {
    etcd = await startEtcd({ size: 3 })
  })
  after(() => etcd?.close())

  test('a lock held while the leader is SIGKILLed stays held, is extended and released, then goes to a waiter', async () => {
    const store = new EtcdLockStore({ endpoints: etcd.endpoints, commandTimeout: 5_000 })
    try {
      await withStore(store, async () => {
        const key = uniqueKey('failover')
        const held = lock(key, 10_000)
        assert.equal(await held.acquire(), true)
        const token = held.fencingToken
        const waiting = lock(key, 5_000).acquire({ timeout: 20_000 })
        const leader = await etcd.leader()
        await etcd.stop(leader)
        assert.equal(await lock(key).acquireImmediately(), false, 'held through the election')
        await held.extend(10_000)
        assert.equal(await held.isExpired(), false)
        assert.equal(await held.release(), true)
        assert.equal(await waiting, true, 'the waiter took it')
        const next = lock(key, 5_000)
        assert.equal(await next.acquire({ timeout: 10_000 }), true)
        assert.ok(next.fencingToken > token, `tokens grow across the election: ${token}, then ${next.fencingToken}`)
        await next.release()
        await etcd.start(leader)
      })
    } finally {
      await store.close()
    }
  })

  test('a member left without a quorum answers ERR_LOCK_STORE_UNAVAILABLE, never a grant', async () => {
    const store = new EtcdLockStore({ endpoints: etcd.endpoints, commandTimeout: 1_500, connectTimeout: 1_000 })
    const key = uniqueKey('quorum')
    try {
      assert.equal(await store.acquire(key, 'a', 30_000), true)
      const survivor = await etcd.leader()
      const others = [0, 1, 2].filter((i) => i !== survivor)
      for (const i of others) await etcd.stop(i)
      const alone = new EtcdLockStore({ endpoints: etcd.urls[survivor], commandTimeout: 1_500, connectTimeout: 1_000 })
      try {
        await assert.rejects(alone.acquire(key, 'b', 5_000), { code: 'ERR_LOCK_STORE_UNAVAILABLE' })
        await assert.rejects(alone.isLocked(key), { code: 'ERR_LOCK_STORE_UNAVAILABLE' })
      } finally {
        await alone.close()
      }
      for (const i of others) await etcd.start(i)
      assert.equal(await store.isLocked(key), true, 'the lock taken before is still held')
      assert.equal(await store.release(key, 'a'), true)
    } finally {
      await store.close()
    }
  })
})

describeWith(['etcd', 'etcdctl'], 'EtcdLockStore as a user with a role on its prefix', () => {
  let etcd
  const root = ['--user', 'root:root-pass']
  before(async () => {
    etcd = await startEtcd({ size: 1 })
    etcd.etcdctl(['user', 'add', 'root', '--new-user-password', 'root-pass'])
    etcd.etcdctl(['role', 'add', 'locks'])
    etcd.etcdctl(['role', 'grant-permission', 'locks', '--prefix=true', 'readwrite', 'billing:'])
    etcd.etcdctl(['user', 'add', 'app', '--new-user-password', 's3cret-pass'])
    etcd.etcdctl(['user', 'grant-role', 'app', 'locks'])
    etcd.etcdctl(['auth', 'enable'])
  })
  after(() => etcd?.close())

  test('locks, semaphores and read-write locks on its prefix; nowhere else', async () => {
    const store = new EtcdLockStore({ endpoints: etcd.endpoints, prefix: 'billing:', username: 'app', password: 's3cret-pass' })
    try {
      await withStore(store, async () => {
        assert.deepEqual(await lock(uniqueKey('invoice')).run(() => 'sent'), [true, 'sent'])
        assert.deepEqual(await semaphore(uniqueKey('smtp'), 2).run(() => 'mailed'), [true, 'mailed'])
      })
      assert.ok(etcd.etcdctl([...root, 'get', '--prefix', '--keys-only', 'billing:']).length >= 0)
    } finally {
      await store.close()
    }
    const elsewhere = new EtcdLockStore({ endpoints: etcd.endpoints, prefix: 'payroll:', username: 'app', password: 's3cret-pass' })
    try {
      await assert.rejects(elsewhere.acquire('k', 'o', 1_000), { code: 'ERR_LOCK_STORE_AUTH', message: /permission denied/ })
    } finally {
      await elsewhere.close()
    }
  })

  test('a wrong password is ERR_LOCK_STORE_AUTH, and no message shows it', async () => {
    const wrong = 'wrong-pass-never-shown'
    const store = new EtcdLockStore({ endpoints: etcd.endpoints, prefix: 'billing:', username: 'app', password: wrong })
    try {
      const e = await store.ping().then(() => null, (error) => error)
      assert.equal(e?.code, 'ERR_LOCK_STORE_AUTH')
      assert.ok(!e.message.includes(wrong), e.message)
    } finally {
      await store.close()
    }
    const none = new EtcdLockStore({ endpoints: etcd.endpoints, prefix: 'billing:' })
    try {
      await assert.rejects(none.ping(), { code: 'ERR_LOCK_STORE_AUTH' })
    } finally {
      await none.close()
    }
  })
})

describeWith(['etcd', 'etcdctl', 'openssl'], 'EtcdLockStore over TLS', () => {
  let etcd
  let certs
  before(async () => {
    certs = makeCertificates()
    etcd = await startEtcd({ size: 1, tls: { ca: certs.file('ca.crt'), cert: certs.file('server.crt'), key: certs.file('server.key') } })
  })
  after(async () => {
    await etcd?.close()
    certs?.remove()
  })

  test('https endpoints checked against the given CA; refused without it', async () => {
    assert.match(etcd.endpoints, /^https:/)
    const store = new EtcdLockStore({ endpoints: etcd.endpoints, tls: { ca: certs.ca } })
    try {
      await withStore(store, async () => {
        assert.deepEqual(await lock(uniqueKey('tls')).run(() => 'over TLS'), [true, 'over TLS'])
      })
    } finally {
      await store.close()
    }
    const untrusted = new EtcdLockStore({ endpoints: etcd.endpoints, connectTimeout: 2_000, commandTimeout: 2_000 })
    try {
      await assert.rejects(untrusted.ping(), (e) => e.code === 'ERR_LOCK_STORE_CONNECTION' && /TLS|certificate/i.test(e.message))
    } finally {
      await untrusted.close()
    }
  })
})

describeWith(['etcd', 'etcdctl', 'openssl'], 'EtcdLockStore over TLS with client certificates', () => {
  let etcd
  let certs
  before(async () => {
    certs = makeCertificates()
    const client = { cert: certs.file('client.crt'), key: certs.file('client.key') }
    etcd = await startEtcd({ size: 1, tls: { ca: certs.file('ca.crt'), cert: certs.file('server.crt'), key: certs.file('server.key'), client } })
  })
  after(async () => {
    await etcd?.close()
    certs?.remove()
  })

  test('a client certificate the members trust gets in; without one, the connection is refused', async () => {
    const store = new EtcdLockStore({ endpoints: etcd.endpoints, tls: { ca: certs.ca, ...certs.client } })
    try {
      await withStore(store, async () => {
        assert.deepEqual(await lock(uniqueKey('mtls')).run(() => 'with a certificate'), [true, 'with a certificate'])
      })
    } finally {
      await store.close()
    }
    const anonymous = new EtcdLockStore({ endpoints: etcd.endpoints, tls: { ca: certs.ca }, connectTimeout: 2_000, commandTimeout: 2_000 })
    try {
      await assert.rejects(anonymous.ping(), (e) => {
        assert.equal(e.code, 'ERR_LOCK_STORE_CONNECTION', e.message)
        assert.match(e.message, /127\.0\.0\.1:\d+/, 'names the member')
        // The member's alert (TLS 1.3 sends it after the handshake) is read
        // when it comes before the first write fails; on a loaded machine the
        // write can fail first, a broken pipe.
        assert.match(e.message, /certificate|broken pipe|broke the connection/i)
        return true
      })
    } finally {
      await anonymous.close()
    }
  })
})
