// MySqlLockStore through a MariaDB server's unix socket (`?socket=`, where
// MySQL speaks no TLS): the same store contract, across processes too, with
// fencing tokens and keys of any size and content. The test looks at the
// table over TCP. And a check that the store's connections are the socket's.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { MySqlLockStore } from '@shaferllc/keel/core'
import { mysqlContract } from '../../helpers/mysql-contract.mjs'
import { startMariaDb } from '../../../support/mariadb.mjs'
import { skipReason } from '../../../support/tools.mjs'

mysqlContract('MySqlLockStore over a unix socket', () => startMariaDb(), (server) => server.socketUrl)

// (Without MariaDB, the contract above says so.)
test('the store connects through the socket: the server lists its sessions with no TCP port', { skip: skipReason(['mariadb']) }, async () => {
  const server = await startMariaDb()
  const store = new MySqlLockStore({ url: server.socketUrl, poolSize: 3 })
  try {
    // Three at once: more than one connection.
    assert.deepEqual(await Promise.all(['a', 'b', 'c'].map((k) => store.acquire(k, 'owner', 5_000))), [true, true, true])
    // A session over TCP is `host:port`; over the socket, `localhost` alone. The query's own (TCP) is left out.
    const hosts = (await server.query("SELECT HOST FROM information_schema.PROCESSLIST WHERE USER = 'root' AND ID <> CONNECTION_ID()"))
      .trim()
      .split('\n')
    assert.ok(hosts.length >= 1, 'the store has connections')
    assert.deepEqual(new Set(hosts), new Set(['localhost']), `sessions: ${hosts.join(', ')}`)
  } finally {
    await store.close()
    await server.close()
  }
})
