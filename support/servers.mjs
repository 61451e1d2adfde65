// Real servers for the tests and the benchmarks: a redis-server or a Redis
// Cluster of our own (a PostgreSQL cluster: postgres.mjs), on free loopback
// ports, in a temporary folder, stopped when the test file (or benchmark)
// ends. KEEL_TEST_REDIS_URL points the tests at a server to use instead
// (tests that stop or restart a server always start their own); REDIS_URL,
// which may name a developer's own server, is never read. A program that is
// missing is a failure that says what to install (support/tools.mjs).

import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { randomUUID } from 'node:crypto'
import { TOOLS, missing, which } from './tools.mjs'

export { which }

/** A key no other test run uses, so tests can share an external server. */
export const uniqueKey = (name) => `${name}:${randomUUID().slice(0, 8)}`

/** Whether something accepts TCP connections on 127.0.0.1:`port`. */
export function listening(port) {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    socket.once('connect', () => {
      socket.destroy()
      resolve(true)
    })
    socket.once('error', () => resolve(false))
  })
}

export async function freePort() {
  const server = createServer()
  await new Promise((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve))
  const { port } = server.address()
  await new Promise((resolve) => server.close(resolve))
  return port
}

/** Resolves once something accepts TCP connections on `port`, or rejects after `ms`. */
async function waitForPort(port, ms, what, log) {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    const ok = await new Promise((resolve) => {
      const socket = connect(port, '127.0.0.1')
      socket.once('connect', () => {
        socket.destroy()
        resolve(true)
      })
      socket.once('error', () => resolve(false))
    })
    if (ok) return
    await sleep(25)
  }
  throw new Error(`${what} did not start listening on 127.0.0.1:${port} within ${ms} ms${log ? `:\n${log()}` : ''}`)
}

/**
 * A redis-server of our own. `args` are extra server arguments (or a function
 * of the port that returns them, for a server whose port is not --port). Returns its
 * URL and port, `stop()`, `kill(signal)` and `start()` (again, on the same port).
 */
export async function startRedis({ args = [] } = {}) {
  const bin = TOOLS['redis-server'].find()
  if (!bin) throw new Error(`${missing('redis-server')} (these tests start their own Redis)`)
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'keel-redis-'))
  let child = null
  let output = ''
  const server = {
    port,
    url: `redis://127.0.0.1:${port}`,
    get pid() {
      return child?.pid
    },
    async start() {
      output = ''
      child = spawn(
        bin,
        [
          ...['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
          ...(typeof args === 'function' ? args(port) : args),
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      )
      child.stdout.on('data', (d) => (output += d))
      child.stderr.on('data', (d) => (output += d))
      const exited = new Promise((_, reject) =>
        child.once('exit', (code) => reject(new Error(`redis-server exited (${code}) while starting:\n${output}`))),
      )
      exited.catch(() => {})
      await Promise.race([waitForPort(port, 10_000, 'redis-server', () => output), exited])
    },
    /** Signal the server (SIGKILL, SIGSTOP, SIGCONT, ...). */
    kill(signal = 'SIGKILL') {
      child?.kill(signal)
    },
    async stop() {
      if (!child || child.exitCode !== null || child.signalCode !== null) return
      const done = new Promise((resolve) => child.once('exit', resolve))
      child.kill('SIGKILL')
      await done
    },
    async close() {
      await server.stop()
      rmSync(dir, { recursive: true, force: true })
    },
  }
  await server.start()
  return server
}

/** The Redis URL the tests use: KEEL_TEST_REDIS_URL if set, else a server of our own. */
export async function redisForTests() {
  if (process.env.KEEL_TEST_REDIS_URL) return { url: process.env.KEEL_TEST_REDIS_URL, async close() {} }
  return startRedis()
}

/** Runs redis-cli with `args`; its output, or a failure that says what it printed. */
function redisCli(args, input = undefined) {
  const bin = TOOLS['redis-cli'].find()
  if (!bin) throw new Error(`${missing('redis-cli')} (the Redis Cluster tests need it)`)
  const r = spawnSync(bin, args, { encoding: 'utf8', timeout: 30_000, input })
  if (r.status !== 0) throw new Error(`redis-cli ${args.join(' ')} failed:\n${r.stdout}${r.stderr}`)
  return r.stdout
}

/**
 * A Redis Cluster of our own: `masters` masters with one replica each, on
 * free loopback ports (redis-server --cluster-enabled, redis-cli --cluster
 * create). Returns the node URLs, `masterOf(key)` (the node serving the key's
 * slot now), `nodes` (each a startRedis server) and `close()`.
 */
export async function startCluster({ masters = 3 } = {}) {
  const nodes = []
  try {
    for (let i = 0; i < masters * 2; i++) {
      nodes.push(
        await startRedis({
          args: [
            '--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '1000',
            // A replica may take over however long ago it last heard from its master.
            '--cluster-replica-validity-factor', '0',
          ],
        }),
      )
    }
    redisCli([
      '--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`),
      '--cluster-replicas', '1', '--cluster-yes',
    ])
  } catch (e) {
    for (const n of nodes) await n.close()
    throw e
  }
  const cluster = {
    nodes,
    urls: nodes.map((n) => n.url),
    /** `key`'s hash slot, as the cluster computes it. */
    slotOf(key) {
      return cluster.slotsOf([key])[0]
    },
    /** The hash slots of `keys` (plain text without spaces), asked in one go. */
    slotsOf(keys) {
      const input = keys.map((k) => `CLUSTER KEYSLOT ${k}\n`).join('')
      return redisCli(['-p', String(cluster.live()[0].port)], input).trim().split('\n').map(Number)
    },
    /** CLIENT KILL every client connection on every live node. */
    killClients() {
      for (const node of cluster.live()) redisCli(['-p', String(node.port), 'CLIENT', 'KILL', 'TYPE', 'normal'])
    },
    /** The keys matching `pattern` on the live masters (replicas hold copies). */
    keys(pattern) {
      return cluster
        .live()
        .filter((node) => redisCli(['-p', String(node.port), 'ROLE']).startsWith('master'))
        .flatMap((node) => redisCli(['-p', String(node.port), '--scan', '--pattern', pattern]).trim().split('\n'))
        .filter(Boolean)
    },
    /** The node that is master of `key`'s slot, by asking a live node. */
    masterOf(key) {
      const slot = cluster.slotOf(key)
      for (const line of redisCli(['-p', String(cluster.live()[0].port), 'CLUSTER', 'NODES']).trim().split('\n')) {
        const [, address, flags, , , , , state, ...slots] = line.split(' ')
        if (!flags.includes('master') || flags.includes('fail') || state !== 'connected') continue
        const port = Number(address.split(':')[1].split('@')[0])
        for (const range of slots) {
          const [from, to = from] = range.split('-').map(Number)
          if (slot >= from && slot <= to) return nodes.find((n) => n.port === port)
        }
      }
      throw new Error(`no master serves slot ${slot} of ${key}`)
    },
    down: new Set(),
    /** Resolves once a replica of `key`'s master holds `value` for it (replication is asynchronous). */
    async replicated(key, value, ms = 10_000) {
      const master = cluster.masterOf(key)
      const deadline = Date.now() + ms
      for (;;) {
        for (const node of cluster.live()) {
          if (node === master) continue
          const bin = TOOLS['redis-cli'].find()
          const r = spawnSync(bin, ['-p', String(node.port)], { input: `READONLY\nGET ${key}\n`, encoding: 'utf8' })
          if (r.stdout.split('\n').some((line) => line.trim() === value)) return node
        }
        if (Date.now() > deadline) throw new Error(`no replica had ${key} = ${value} within ${ms} ms`)
        await sleep(50)
      }
    },
    live: () => nodes.filter((n) => !cluster.down.has(n)),
    /** SIGKILL the master of `key`'s slot; its replica takes over after the node timeout. */
    async killMasterOf(key) {
      const master = cluster.masterOf(key)
      cluster.down.add(master)
      await master.stop()
      return master
    },
    /** Resolves with the new master of `key`'s slot once a node other than `old` serves it. */
    async failedOver(key, old, ms = 30_000) {
      const deadline = Date.now() + ms
      for (;;) {
        try {
          const master = cluster.masterOf(key)
          if (master !== old) {
            await cluster.ready(ms)
            return master
          }
        } catch {}
        if (Date.now() > deadline) throw new Error(`no replica took over ${key}'s slot within ${ms} ms`)
        await sleep(100)
      }
    },
    /** Resolves once every live node says the cluster is ok, or rejects after `ms`. */
    async ready(ms = 20_000) {
      const deadline = Date.now() + ms
      for (;;) {
        const states = cluster.live().map((n) => {
          try {
            return /cluster_state:ok/.test(redisCli(['-p', String(n.port), 'CLUSTER', 'INFO']))
          } catch {
            return false
          }
        })
        if (states.every(Boolean)) return
        if (Date.now() > deadline) throw new Error('the Redis Cluster did not reach cluster_state:ok')
        await sleep(100)
      }
    },
    async close() {
      for (const n of nodes) await n.close()
    },
  }
  await cluster.ready()
  return cluster
}
