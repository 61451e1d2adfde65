// node bench/etcd-commit.mjs: what one etcd commit takes on this machine, the
// unit the hand-over gaps of EtcdLockStore are held to. On a cluster of 3
// members of its own (as npm run bench starts for the etcd rows: each
// member syncing its log on every commit), one client puts a key after
// another for a few seconds (a commit each), and reads one after another (a
// linearizable read each); prints the latencies and writes
// bench/etcd-commit.json.

import { writeFileSync } from 'node:fs'
import { cpus, totalmem } from 'node:os'
import { Etcd3 } from 'etcd3'
import { startEtcd } from '../support/etcd.mjs'
import { percentile, median } from './scenarios.mjs'

const SECONDS = 3
const etcd = await startEtcd({ size: 3, timing: [] })
const client = new Etcd3({ hosts: etcd.urls })

/** Latencies in ms of `op` called one after another for SECONDS. */
async function latencies(op) {
  await op() // connected
  const took = []
  const end = performance.now() + SECONDS * 1_000
  while (performance.now() < end) {
    const start = performance.now()
    await op()
    took.push(performance.now() - start)
  }
  return { count: took.length, p50: median(took), p99: percentile(took, 99) }
}

const result = {
  date: new Date().toISOString(),
  machine: `${cpus().length} cores (${cpus()[0].model.split(' ').slice(0, 2).join(' ')}), ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}`,
  cluster: '3 members on loopback, etcd defaults (heartbeat 100 ms, election 1000 ms), each syncing its log',
  put: await latencies(() => client.put('commit').value('x')),
  read: await latencies(() => client.get('commit').string()),
}
console.log(JSON.stringify(result, null, 2))
writeFileSync(new URL('./etcd-commit.json', import.meta.url), `${JSON.stringify(result, null, 2)}\n`)
client.close()
await etcd.close()
