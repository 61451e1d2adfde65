// Faults against a redis-server this file starts and kills: operations fail
// fast with a clear code, never run the callback without the lock, and the
// same store works again once the server is back; refused credentials do
// not turn into a reconnect storm.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { lock, setLockStore, RedisLockStore } from '@shaferllc/keel/core'
import { startRedis } from './helpers/servers.mjs'
import { eventually } from './helpers/eventually.mjs'

test('the server is killed mid-run: errors within the timeout, fn never runs unlocked, then it works again', async () => {
  const server = await startRedis()
  const store = setLockStore(new RedisLockStore({ url: server.url, commandTimeout: 500, connectTimeout: 500 }))
  let ran = 0
  let calls = 0
  let slowest = 0
  const codes = new Set()
  let stop = false
  const loop = async (w) => {
    while (!stop) {
      const started = Date.now()
      try {
        const [got] = await lock(`fault:${w % 4}`).run(async () => {
          calls++
          await sleep(1)
        })
        if (got) ran++
      } catch (e) {
        codes.add(e.code)
        slowest = Math.max(slowest, Date.now() - started)
        await sleep(5)
      }
    }
  }
  try {
    const loops = Array.from({ length: 8 }, (_, w) => loop(w))
    await sleep(200)
    await server.stop()
    await sleep(700)
    stop = true
    await Promise.all(loops)
    assert.ok(ran > 0, 'locks were taken before the kill')
    assert.equal(calls, ran, 'fn ran exactly when the lock was taken')
    assert.ok([...codes].every((c) => /^ERR_LOCK_STORE_(CONNECTION|TIMEOUT)$/.test(c)), `codes: ${[...codes]}`)
    assert.ok(codes.size > 0, 'operations failed while the server was down')
    assert.ok(slowest < 1_500, `a failing operation took ${slowest} ms (command timeout 500 ms)`)
    await server.start()
    const [again] = await eventually(() => lock('fault:after').run(() => 'back'))
    assert.equal(again, true, 'the same store works once the server is back')
  } finally {
    stop = true
    await store.close()
    await server.close()
  }
})

test('wrong credentials fail with ERR_LOCK_STORE_AUTH and do not retry in the background', async () => {
  const server = await startRedis({ args: ['--requirepass', 'right'] })
  const admin = new Redis({ port: server.port, password: 'right' })
  const store = new RedisLockStore({ url: `redis://:wrong@127.0.0.1:${server.port}`, connectTimeout: 500 })
  try {
    await assert.rejects(store.isLocked('k'), { code: 'ERR_LOCK_STORE_AUTH' })
    const connections = async () => Number(/total_connections_received:(\d+)/.exec(await admin.info('stats'))[1])
    const before = await connections()
    await sleep(1_000)
    const idle = (await connections()) - before
    assert.ok(idle <= 1, `${idle} connection attempts in a second with nothing asked`)
    await assert.rejects(store.acquire('k', 'o', 1_000), { code: 'ERR_LOCK_STORE_AUTH' })
  } finally {
    admin.disconnect()
    await store.close()
    await server.close()
  }
})
