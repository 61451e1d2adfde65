// A key longer than the server reads: the command is refused before it is
// sent, alone, with an error naming the server's limit, and the connection's
// other work goes on (sent, a server ends the connection at such a command,
// and every command in flight on it fails with it). Redis reads no argument
// longer than its proto-max-bulk-len, nor one its client-query-buffer-limit
// cannot buffer; MySQL and MariaDB no command as long as max_allowed_packet.
// Each limit set low on a server of the test's own. (PostgreSQL's is a
// gigabyte, fixed, beyond what a JS string of one-byte characters can be:
// its refusal is tested in Rust, src/store/postgres/wire/mod.rs.)

import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { lock, setLockStore, getLockStore, RedisLockStore, MySqlLockStore } from '@shaferllc/keel/core'
import { startRedis, uniqueKey } from '../../support/servers.mjs'
import { startMariaDb } from '../../support/mariadb.mjs'
import { describeWith } from '../helpers/tools.mjs'

const MB = 1024 * 1024
const servers = []
after(async () => {
  for (const server of servers) await server.close()
})

/**
 * With `store` set: 200 run()s in flight, and among them one on a key of
 * `tooLong` characters, which fails with `code` and a message matching
 * `limit`; the 200 are done; a key of `fits` characters works.
 */
async function refusedAlone(store, { tooLong, fits, code, limit }) {
  const before = getLockStore()
  setLockStore(store)
  try {
    const others = Array.from({ length: 200 }, (_, i) => lock(uniqueKey(`beside-${i}`)).run(async () => i))
    const long = lock(`x${'k'.repeat(tooLong)}`).run(async () => assert.fail('ran with a key the server cannot read'))
    const more = Array.from({ length: 200 }, (_, i) => lock(uniqueKey(`behind-${i}`)).run(async () => i))
    await assert.rejects(long, (error) => {
      assert.equal(error.code, code, error.message)
      assert.match(error.message, limit)
      return true
    })
    assert.deepEqual(
      (await Promise.all([...others, ...more])).map(([ran]) => ran),
      Array(400).fill(true),
    )
    const [ran] = await lock(`y${'k'.repeat(fits)}`).run(async () => {})
    assert.equal(ran, true)
  } finally {
    setLockStore(before)
  }
}

test("RedisLockStore: a key longer than proto-max-bulk-len is refused alone, before it is sent", async () => {
  const server = await startRedis({ args: ['--proto-max-bulk-len', '1mb'] })
  servers.push(server)
  const store = new RedisLockStore(server.url)
  try {
    await store.isLocked('warm') // the connection learns the limit
    await refusedAlone(store, { tooLong: 2 * MB, fits: MB / 2, code: 'ERR_LOCK_STORE_REDIS', limit: /proto-max-bulk-len, 1048576 bytes/ })
  } finally {
    await store.close()
  }
})

test("RedisLockStore: a key longer than client-query-buffer-limit can buffer is refused alone, before it is sent", async () => {
  const server = await startRedis({ args: ['--client-query-buffer-limit', '1mb'] })
  servers.push(server)
  const store = new RedisLockStore(server.url)
  try {
    await store.isLocked('warm')
    await refusedAlone(store, { tooLong: 2 * MB, fits: MB / 2, code: 'ERR_LOCK_STORE_REDIS', limit: /client-query-buffer-limit, 1048576 bytes/ })
  } finally {
    await store.close()
  }
})

describeWith(['mariadb'], 'MySqlLockStore on a MariaDB server of its own', () => {
  test('a key as long as max_allowed_packet is refused alone, before it is sent', async () => {
    const server = await startMariaDb()
    servers.push(server)
    await server.query(`SET GLOBAL max_allowed_packet = ${MB}`)
    const store = new MySqlLockStore(server.url)
    try {
      await store.isLocked('warm')
      await refusedAlone(store, { tooLong: 2 * MB, fits: MB / 2, code: 'ERR_LOCK_STORE_MYSQL', limit: /max_allowed_packet, 1048576 bytes/ })
    } finally {
      await store.close()
    }
  })
})
