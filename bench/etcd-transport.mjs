// node bench/etcd-transport.mjs: why EtcdLockStore speaks gRPC rather than
// etcd's JSON gateway. On one etcd member of its own (syncing its log on
// every commit), a lock cycle (take a key if nobody has it, then delete it
// if it is still ours: two transactions) one after another for a few
// seconds, three ways, in alternating rounds:
//   - EtcdLockStore: gRPC over HTTP/2 from Rust (the lock on a lease);
//   - the gateway: the same two transactions as JSON over HTTP/1.1, from
//     Node's http with a kept-alive connection;
//   - the etcd3 package: the same two transactions over gRPC from Node.
// Prints cycles a second and each cycle's p50 and p99, and writes
// bench/etcd-transport.json.

import { writeFileSync } from 'node:fs'
import { request, Agent } from 'node:http'
import { cpus, totalmem } from 'node:os'
import { Etcd3 } from 'etcd3'
import { EtcdLockStore } from '@shaferllc/keel/core'
import { startEtcd } from '../support/etcd.mjs'
import { percentile, median } from './scenarios.mjs'

const SECONDS = 3
const ROUNDS = 3
const etcd = await startEtcd({ size: 1, timing: [] })
const url = new URL(etcd.urls[0])
const store = new EtcdLockStore(etcd.endpoints)
const client = new Etcd3({ hosts: etcd.urls })
const agent = new Agent({ keepAlive: true, maxSockets: 1 })
const b64 = (text) => Buffer.from(text).toString('base64')

/** A POST of `body` as JSON to the gateway's `path`; its answer, parsed. */
function gateway(path, body) {
  return new Promise((resolve, reject) => {
    const sent = request({ host: url.hostname, port: url.port, path, method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (answer) => {
      let text = ''
      answer.setEncoding('utf8')
      answer.on('data', (d) => (text += d))
      answer.on('end', () => (answer.statusCode === 200 ? resolve(JSON.parse(text)) : reject(new Error(`${answer.statusCode} ${text}`))))
    })
    sent.on('error', reject)
    sent.end(JSON.stringify(body))
  })
}

const cycles = {
  'EtcdLockStore (gRPC from Rust)': async (key) => {
    if (!(await store.acquire(key, 'me', 10_000))) throw new Error('not taken')
    if (!(await store.release(key, 'me'))) throw new Error('not released')
  },
  'JSON gateway (HTTP/1.1 from Node)': async (key) => {
    const k = b64(key)
    const taken = await gateway('/v3/kv/txn', {
      compare: [{ key: k, target: 'CREATE', result: 'EQUAL', create_revision: '0' }],
      success: [{ request_put: { key: k, value: b64('me') } }],
      failure: [{ request_range: { key: k } }],
    })
    if (!taken.succeeded) throw new Error('not taken')
    const released = await gateway('/v3/kv/txn', {
      compare: [{ key: k, target: 'VALUE', result: 'EQUAL', value: b64('me') }],
      success: [{ request_delete_range: { key: k } }],
    })
    if (!released.succeeded) throw new Error('not released')
  },
  'etcd3 package (gRPC from Node)': async (key) => {
    const taken = await client.if(key, 'Create', '==', 0).then(client.put(key).value('me')).else(client.get(key)).commit()
    if (!taken.succeeded) throw new Error('not taken')
    const released = await client.if(key, 'Value', '==', 'me').then(client.delete().key(key)).commit()
    if (!released.succeeded) throw new Error('not released')
  },
}

/** Cycle latencies in ms of `cycle` on one key, one after another for SECONDS. */
async function run(cycle, key) {
  await cycle(key) // connected
  const took = []
  const end = performance.now() + SECONDS * 1_000
  while (performance.now() < end) {
    const start = performance.now()
    await cycle(key)
    took.push(performance.now() - start)
  }
  return took
}

const seen = Object.fromEntries(Object.keys(cycles).map((name) => [name, []]))
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, cycle] of Object.entries(cycles)) seen[name].push(...(await run(cycle, `transport-${round}-${name.split(' ')[0]}`)))
}
const rows = Object.fromEntries(
  Object.entries(seen).map(([name, took]) => [
    name,
    { cyclesPerSecond: Math.round(took.length / (ROUNDS * SECONDS)), p50: median(took), p99: percentile(took, 99) },
  ]),
)
const result = {
  date: new Date().toISOString(),
  machine: `${cpus().length} cores (${cpus()[0].model.split(' ').slice(0, 2).join(' ')}), ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}`,
  cluster: '1 member on loopback, etcd defaults, syncing its log on every commit',
  cycle: 'take a key if nobody has it, then delete it if it is still ours: two transactions',
  rounds: `${ROUNDS} rounds of ${SECONDS} s each, alternating`,
  rows,
}
console.log(JSON.stringify(result, null, 2))
writeFileSync(new URL('./etcd-transport.json', import.meta.url), `${JSON.stringify(result, null, 2)}\n`)
client.close()
agent.destroy()
await store.close()
await etcd.close()
