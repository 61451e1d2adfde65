// Faults against a redis-server this file starts and kills: operations fail
// fast with a clear code, never run the callback without the lock, and the
// same store works again once the server is back; refused credentials do
// not turn into a reconnect storm.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { lock, setLockStore, RedisLockStore } from '@shaferllc/keel/core'
import { startRedis } from '../../support/servers.mjs'
import { eventually } from '../helpers/eventually.mjs'

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

test('the server is frozen (SIGSTOP) and resumed under load from 3 processes: never two holders, no update lost, no run() failed', async () => {
  const { mkdtempSync, readFileSync, rmSync, writeFileSync } = await import('node:fs')
  const { tmpdir } = await import('node:os')
  const { join } = await import('node:path')
  const { runChild } = await import('../helpers/processes.mjs')
  const server = await startRedis()
  const dir = mkdtempSync(join(tmpdir(), 'keel-freeze-'))
  const file = join(dir, 'counter')
  writeFileSync(file, '0')
  const env = { KEEL_TEST_STORE: 'redis', KEEL_TEST_REDIS: server.url, KEEL_TEST_COMMAND_TIMEOUT: '300' }
  try {
    const children = Array.from({ length: 3 }, () => runChild(env, 'hammer', file, '3500', 'frozen', '2000'))
    await sleep(1_200)
    server.kill('SIGSTOP')
    await sleep(800)
    server.kill('SIGCONT')
    const results = await Promise.all(children)
    const sections = results.reduce((n, r) => n + r.sections, 0)
    assert.deepEqual(
      results.map((r) => r.overlaps),
      [0, 0, 0],
      'never two holders inside at once',
    )
    assert.equal(Number(readFileSync(file, 'utf8')), sections, 'every locked increment counted')
    // Commands timed out (300 ms) while it was frozen; waiters with time left took that as "not yet".
    assert.ok(results.some((r) => r.longestRunMs >= 600), `the freeze was felt: ${JSON.stringify(results)}`)
    assert.deepEqual(results.map((r) => r.errors), [0, 0, 0], 'no run() failed: each rode out the freeze')
    assert.ok(sections > 50, `work went on around the freeze (${sections} sections)`)
  } finally {
    server.kill('SIGCONT')
    await server.close()
    rmSync(dir, { recursive: true, force: true })
  }
})
