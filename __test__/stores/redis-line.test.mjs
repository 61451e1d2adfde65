// RedisLockStore on one server keeps a line (contract-line.mjs). What the
// server runs is seen by MONITOR: the line's acquire script is the one that
// waits in line with its own owner, and a hand-over is told by a PUBLISH to
// `keel:wake:<id>` (any other PUBLISH would reach every listener). The line's
// data: the sorted set `keel:waiting:{k:<key>}` and its hash `...:places`.
import { before, after, test } from 'node:test'
import assert from 'node:assert/strict'
import Redis from 'ioredis'
import { lock, setLockStore, RedisLockStore } from '@shaferllc/keel/core'
import { startRedis } from '../../support/servers.mjs'
import { shaOfShown } from '../../support/monitor.mjs'
import { eventually } from '../helpers/eventually.mjs'
import { lineContract } from './contract-line.mjs'

let server
let store
let inspect
let env
before(async () => {
  server = await startRedis()
  env = { KEEL_TEST_STORE: 'redis', KEEL_TEST_REDIS: server.url }
  store = setLockStore(new RedisLockStore({ url: server.url }))
  inspect = new Redis(server.url)
})
after(async () => {
  await store?.close()
  inspect?.disconnect()
  await server?.close()
})

const lineOf = (key) => `keel:waiting:{k:${key}}`

/** Every command the server runs from now on, until `stop()`. */
async function observe() {
  const seen = []
  const bodies = new Map()
  const base = new Redis(server.url)
  const client = await base.monitor()
  client.on('monitor', (_, args) => {
    const name = String(args[0]).toLowerCase()
    let script
    if (name === 'eval') {
      script = String(args[1])
      bodies.set(shaOfShown(script), script)
    } else if (name === 'evalsha') {
      script = bodies.get(String(args[1]))
    }
    seen.push({ name, key: String(args[script === undefined ? 1 : 3]), script, args: args.map(String) })
  })
  // MONITOR starts with the next command: one that is surely after it.
  await eventually(async () => {
    await inspect.ping()
    assert.ok(seen.length > 0, 'monitoring')
  })
  return {
    attempts: async (key) => seen.filter((c) => c.key === key && c.script?.includes('wait_in_line(me, owner)')).length,
    // How each script run on `key` with four keys and nine arguments (the
    // line's acquire and claim, as this store runs them) waits: its ARGV[7],
    // 0 never, 1 in line, 2 in line keeping a place for more of the process.
    waits: (key) =>
      seen.filter((c) => c.name.startsWith('eval') && c.args[2] === '4' && c.args.length === 16 && c.args[3].endsWith(key)).map((c) => c.args[13]),
    told: async () => {
      const published = seen.filter((c) => c.name === 'publish').map((c) => c.args[1])
      const handOvers = published.filter((channel) => channel.startsWith('keel:wake:'))
      return { handOvers: new Set(handOvers).size === handOvers.length ? handOvers.length : -1, broadcasts: published.length - handOvers.length }
    },
    stop: () => {
      client.disconnect()
      base.disconnect()
    },
  }
}

lineContract(() => ({
  env,
  store,
  places: (key) => inspect.zcard(lineOf(key)),
  observe,
  leftovers: async (key) => (await inspect.keys(`${lineOf(key)}*`)).length,
}))

test('line: of first attempts out together, each after the first keeps the place for the others should it get in', async () => {
  const key = `first-tries:${Math.random()}`
  const watching = await observe()
  try {
    const holder = lock(key, 30_000)
    assert.equal(await holder.acquire(), true)
    await eventually(async () => assert.deepEqual(watching.waits(key), ['0']))
    // Sent in one turn: nobody of this process queued yet, every attempt goes out
    // (what comes after them, their polls, keeps the place anyway).
    const waiters = [lock(key, 30_000), lock(key, 30_000), lock(key, 30_000)]
    const got = waiters.map((w) => w.acquire({ timeout: 10_000 }))
    await eventually(async () => assert.deepEqual(watching.waits(key).slice(1, 4), ['1', '2', '2']))
    assert.equal(await holder.release(), true)
    for (let i = 0; i < waiters.length; i++) {
      assert.equal(await got[i], true)
      assert.equal(await waiters[i].release(), true)
    }
  } finally {
    watching.stop()
  }
  assert.equal(await store.isLocked(key), false)
})
