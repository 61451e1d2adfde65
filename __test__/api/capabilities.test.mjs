// What each store can do, as the lock reads it once per store: a native
// store declares its own (in Rust), every store written in JS shares one
// record. Making a server store connects to nothing, so no server is needed
// (a SQLite store makes its file in a temporary folder).

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { MemoryLockStore, RedisLockStore, PostgresLockStore, SqliteLockStore, EtcdLockStore } from '../../index.js'

const require = createRequire(import.meta.url)
const { capabilitiesOf } = require('../../lib/core/protocol.js')
const { handleFor } = require('../../lib/bridge/js-store.js')

const none = {
  saysWhenLapsed: false,
  announcesReleases: false,
  answersInOrder: false,
  tellsWhenSent: false,
  queuesReleases: false,
  acquiresTogether: false,
  waitsInLine: false,
  writtenInJs: false,
  throwsOwnErrors: false,
  mayNeverAnswer: false,
  fencesAfterAcquire: false,
}

test('each native store says what it can do; every JS store gets the same record', async () => {
  const redis = new RedisLockStore('redis://127.0.0.1:1')
  const postgres = new PostgresLockStore('postgres://postgres@127.0.0.1:1/postgres')
  try {
    const of = (store) => capabilitiesOf(handleFor(store))
    assert.deepEqual(of(new MemoryLockStore()), { ...none, saysWhenLapsed: true })
    // One server over TCP: on the event loop, which tells when a request is written.
    // One server: a plain lock's waiters wait in line on it.
    const inLine = { announcesReleases: true, answersInOrder: true, waitsInLine: true }
    const pgInLine = { announcesReleases: true, waitsInLine: true }
    assert.deepEqual(of(redis), { ...none, ...inLine, tellsWhenSent: true })
    assert.deepEqual(of(postgres), { ...none, ...pgInLine, tellsWhenSent: true })
    // A file: every operation a write of its own, so run()'s release is queued
    // to be written with the next, and the acquires of one stretch are written
    // together; waiters hear releases at their process's ear.
    const dir = mkdtempSync(join(tmpdir(), 'keel-capabilities-'))
    const sqlite = new SqliteLockStore(join(dir, 'locks.db'))
    try {
      assert.deepEqual(of(sqlite), { ...none, announcesReleases: true, waitsInLine: true, queuesReleases: true, acquiresTogether: true })
    } finally {
      await sqlite.close()
      rmSync(dir, { recursive: true, force: true })
    }
    // etcd: each call on Tokio over gRPC; releases heard by a watch, a plain
    // lock's waiters in a line (the lock's keys), the next process alone looking.
    const etcd = new EtcdLockStore('http://127.0.0.1:1')
    try {
      assert.deepEqual(of(etcd), { ...none, announcesReleases: true, waitsInLine: true })
    } finally {
      await etcd.close()
    }
    // A Unix socket rides Tokio, whose writes are not seen.
    const redisUnix = new RedisLockStore({ url: 'redis+unix:///tmp/keel-none.sock' })
    const postgresUnix = new PostgresLockStore('postgres://postgres@%2Ftmp/postgres')
    try {
      assert.deepEqual(of(redisUnix), { ...none, ...inLine })
      assert.deepEqual(of(postgresUnix), { ...none, ...pgInLine })
    } finally {
      await redisUnix.close()
      await postgresUnix.close()
    }
    const jsStore = {
      acquire: async () => true,
      release: async () => true,
      extend: async () => true,
      isLocked: async () => false,
      getRemainingTime: async () => null,
    }
    const js = of(jsStore)
    assert.deepEqual(js, {
      ...none,
      writtenInJs: true,
      throwsOwnErrors: true,
      mayNeverAnswer: true,
      fencesAfterAcquire: true,
    })
    assert.equal(of({ ...jsStore }), js, 'one shared record')
    assert.ok(Object.isFrozen(of(redis)))
  } finally {
    await redis.close()
    await postgres.close()
  }
})

test('the addon gives the capabilities JS is typed for: each store its whole record, nothing defaulted here', () => {
  const { readFileSync } = require('node:fs')
  const source = readFileSync(require.resolve('../../lib/core/protocol.js'), 'utf8')
  const typedef = source.slice(source.indexOf('@typedef {object} Capabilities'))
  const typed = [...typedef.slice(0, typedef.indexOf('*/')).matchAll(/@property \{boolean\} (\w+)/g)].map((m) => m[1])
  assert.ok(typed.length >= 9, 'the typedef read')
  for (const record of [capabilitiesOf(handleFor(new MemoryLockStore())), capabilitiesOf(handleFor({}))]) {
    assert.deepEqual(Object.keys(record).sort(), [...typed].sort())
    assert.ok(Object.values(record).every((can) => typeof can === 'boolean'))
    assert.ok(Object.isFrozen(record))
  }
})
