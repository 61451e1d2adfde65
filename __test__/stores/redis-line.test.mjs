// RedisLockStore on one server keeps a line (contract-line.mjs). What the
// server runs is seen by MONITOR: the line's acquire script is the one that
// waits in line with its own owner, and a hand-over is told by a PUBLISH to
// `keel:wake:<id>` (any other PUBLISH would reach every listener). The line's
// data: the sorted set `keel:line:{k:<key>}` and its hash `...:entries`.
import { before, after } from 'node:test'
import assert from 'node:assert/strict'
import Redis from 'ioredis'
import { setLockStore, RedisLockStore } from '@shaferllc/keel/core'
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

const lineOf = (key) => `keel:line:{k:${key}}`

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
