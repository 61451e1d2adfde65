// The MariaDB servers the MySQL tests start (support/mariadb.mjs): one
// answers over TCP and over its unix socket, the mariadb client and mysql2
// alike; a killed one refuses connections and comes back with what was
// committed; a password is needed when one is set and a wrong one is
// refused; TLS with the test CA, plain TCP refused when TLS is required; and
// close() leaves no server and no folder behind. Skipped, saying so, when
// MariaDB is not installed (or openssl, for the TLS server).

import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { dirname } from 'node:path'
import mysql from 'mysql2/promise'
import { startMariaDb } from '../../support/mariadb.mjs'
import { listening } from '../../support/servers.mjs'
import { makeCertificates } from '../../support/certs.mjs'
import { describeWith } from '../helpers/tools.mjs'

/** A mysql2 connection to the server `url` names, through its `?socket=` when it has one. */
function open(url, options = {}) {
  const u = new URL(url)
  const socketPath = u.searchParams.get('socket')
  return mysql.createConnection({
    ...(socketPath ? { socketPath } : { host: u.hostname, port: Number(u.port) }),
    user: decodeURIComponent(u.username),
    password: decodeURIComponent(u.password),
    database: u.pathname.slice(1),
    connectTimeout: 5_000,
    ...options,
  })
}


describeWith(['mariadb'], 'a MariaDB server of our own', () => {
  const servers = []
  const start = async (options) => {
    const server = await startMariaDb(options)
    servers.push(server)
    return server
  }

  after(async () => {
    for (const server of servers) await server.close()
  })

  test('answers the mariadb client and mysql2, over TCP at url and through the socket socketUrl names', async () => {
    const server = await start({ maxConnections: 20 })
    assert.equal(server.url, `mysql://root@127.0.0.1:${server.port}/test`)
    assert.notEqual(server.port, 3306)
    assert.equal(server.socketUrl, `mysql://root@localhost/test?socket=${encodeURIComponent(server.socket)}`)
    assert.equal(await server.query('SELECT 1'), '1\n')
    assert.equal(await server.query('SELECT DATABASE(), @@port, @@max_connections'), `test\t${server.port}\t20\n`)
    // Not durable: commits write the redo log without syncing it.
    assert.equal(await server.query('SELECT @@innodb_flush_log_at_trx_commit'), '2\n')
    assert.match(server.log(), /ready for connections/)
    assert.ok(existsSync(server.dataDir))

    const tcp = await open(server.url)
    const socket = await open(server.socketUrl)
    try {
      const [[overTcp]] = await tcp.query('SELECT DATABASE() AS db, @@port AS port, CURRENT_USER() AS user')
      assert.deepEqual(overTcp, { db: 'test', port: server.port, user: 'root@localhost' })
      await tcp.query('CREATE TABLE seen (v INT PRIMARY KEY)')
      await tcp.query('INSERT INTO seen VALUES (7)')
      const [[overSocket]] = await socket.query('SELECT v, @@socket AS path FROM seen')
      assert.deepEqual(overSocket, { v: 7, path: server.socket })
      const [[{ kind }]] = await socket.query(
        "SELECT IF(HOST = 'localhost', 'socket', 'tcp') AS kind FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID()",
      )
      assert.equal(kind, 'socket')
    } finally {
      await tcp.end()
      await socket.end()
    }
    await assert.rejects(server.query('SELECT nope FROM nowhere'), /mariadb -e .*failed: .*Table 'test\.nowhere' doesn't exist/s)
  })

  test('stop() kills it: connections fail; start() brings it back on its port, with what was committed (durable: true)', async () => {
    const server = await start({ durable: true })
    assert.equal(await server.query('SELECT @@innodb_flush_log_at_trx_commit'), '1\n')
    const before = await open(server.url)
    before.on('error', () => {})
    await before.query('CREATE TABLE kept (v INT PRIMARY KEY) ENGINE=InnoDB')
    await before.query('INSERT INTO kept VALUES (1), (2)')

    await server.stop()
    assert.equal(await listening(server.port), false)
    await assert.rejects(before.query('SELECT 1'))
    before.destroy()
    await assert.rejects(open(server.url), { code: 'ECONNREFUSED' })
    await assert.rejects(open(server.socketUrl))
    await assert.rejects(server.query('SELECT 1'), /Can't connect/)
    await server.stop()

    await server.start()
    const after = await open(server.url)
    try {
      const [rows] = await after.query('SELECT v FROM kept ORDER BY v')
      assert.deepEqual(rows, [{ v: 1 }, { v: 2 }])
      await after.query('INSERT INTO kept VALUES (3)')
    } finally {
      await after.end()
    }
    // A clean shutdown and start: the same data again, and the crash recovery
    // the stop caused is in the log.
    await server.restart()
    assert.equal(await server.query('SELECT GROUP_CONCAT(v ORDER BY v) FROM kept'), '1,2,3\n')
    assert.match(server.log(), /crash recovery/)
  })

  test('with a password: refused without it or with a wrong one, over TCP and the socket; url and socketUrl carry it', async () => {
    const password = "p@ss:w/rd'\\%"
    const server = await start({ password })
    assert.equal(server.url, `mysql://root:${encodeURIComponent(password)}@127.0.0.1:${server.port}/test`)
    for (const url of [server.url, server.socketUrl]) {
      await assert.rejects(open(url, { password: 'wrong' }), { code: 'ER_ACCESS_DENIED_ERROR' })
      await assert.rejects(open(url, { password: '' }), { code: 'ER_ACCESS_DENIED_ERROR' })
      const right = await open(url)
      const [[{ one }]] = await right.query('SELECT 1 AS one')
      assert.equal(one, 1)
      await right.end()
    }
    // Every root account has it: none is left open by another host name.
    assert.equal(await server.query("SELECT COUNT(*) = SUM(authentication_string <> '') FROM mysql.user WHERE User = 'root'"), '1\n')
    await server.restart()
    assert.equal(await server.query('SELECT 1'), '1\n')
  })

  test('close() stops it and removes its folder', async () => {
    const server = await startMariaDb()
    const folder = dirname(server.dataDir)
    assert.ok(existsSync(folder))
    await server.close()
    assert.equal(existsSync(folder), false)
    assert.equal(await listening(server.port), false)
    await assert.rejects(open(server.url), { code: 'ECONNREFUSED' })
  })
})

describeWith(['mariadb', 'openssl'], 'a MariaDB server of our own, over TLS', () => {
  const certificates = makeCertificates()
  let server

  before(async () => {
    server = await startMariaDb({ tls: { ...certificates.server, ca: certificates.ca }, requireTls: true })
  })

  after(async () => {
    await server?.close()
    certificates.remove()
  })

  test('mysql2 connects with the test CA, checking the certificate; a plain TCP connection is refused', async () => {
    const secure = await open(server.url, { ssl: { ca: certificates.ca } })
    try {
      const [[{ Value: version }]] = await secure.query("SHOW STATUS LIKE 'Ssl_version'")
      assert.match(version, /^TLSv1\.[23]$/)
    } finally {
      await secure.end()
    }
    // Without the CA, the server's certificate is not trusted.
    await assert.rejects(open(server.url, { ssl: {} }), /self[- ]signed|unable to (get|verify)/i)
    // The same account without TLS: MariaDB refuses it as access denied
    // (1045), not with MySQL's ER_SECURE_TRANSPORT_REQUIRED.
    await assert.rejects(open(server.url), { code: 'ER_ACCESS_DENIED_ERROR' })
    // The unix socket counts as secure; the mariadb client speaks TLS.
    const socket = await open(server.socketUrl)
    await socket.end()
    const cipher = "SELECT VARIABLE_VALUE <> '' FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'SSL_CIPHER'"
    assert.equal(await server.query(cipher), '1\n')
  })
})
