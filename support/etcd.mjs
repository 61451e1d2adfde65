// etcd clusters of our own for the tests and the benchmarks: members started
// from Debian's etcd-server on free loopback ports, in a temporary folder,
// stopped when the test file (or benchmark) ends. Each member beats every
// 10 ms and calls an election after 100 ms (unless `timing` says otherwise),
// so a lease can be as short as a second and a new leader comes within a
// fraction of one. etcdctl says which member leads.

import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { freePort } from './servers.mjs'
import { TOOLS, missing } from './tools.mjs'

const FAST = ['--heartbeat-interval', '10', '--election-timeout', '100']

/**
 * A cluster of `size` members. `args` are extra arguments for every member;
 * with `tls` (`{ ca, cert, key }`: PEM files, support/certs.mjs), members
 * serve their clients over TLS only, and with `tls.client` (`{ cert, key }`)
 * only clients with a certificate the CA signed (etcdctl shows that one); with `hosts` (support/netns.mjs, one
 * per member), member i runs on host i, at its address.
 * Returns `{ endpoints, urls, members, leader(), stop(i), start(i), etcdctl(args), close() }`:
 * `endpoints` the client URLs comma-separated, as EtcdLockStore takes them.
 */
export async function startEtcd({ size = 1, args = [], timing = FAST, tls = undefined, hosts = undefined } = {}) {
  const bin = TOOLS.etcd.find()
  if (!bin) throw new Error(`${missing('etcd')} (these tests start their own etcd)`)
  const dir = mkdtempSync(join(tmpdir(), 'keel-etcd-'))
  const clientPorts = []
  const peerPorts = []
  for (let i = 0; i < size; i++) {
    clientPorts.push(hosts ? 2379 : await freePort())
    peerPorts.push(hosts ? 2380 : await freePort())
  }
  const scheme = tls ? 'https' : 'http'
  const address = (i) => hosts?.addresses[i] ?? '127.0.0.1'
  const urls = clientPorts.map((port, i) => `${scheme}://${address(i)}:${port}`)
  const served = tls ? ['--cert-file', tls.cert, '--key-file', tls.key] : []
  if (tls?.client) served.push('--client-cert-auth', '--trusted-ca-file', tls.ca)
  const asked = tls ? ['--cacert', tls.ca] : []
  if (tls?.client) asked.push('--cert', tls.client.cert, '--key', tls.client.key)
  const peers = peerPorts.map((port, i) => `http://${address(i)}:${port}`)
  const initial = peers.map((peer, i) => `m${i}=${peer}`).join(',')
  const members = urls.map((url, i) => {
    let child = null
    let output = ''
    return {
      url,
      get running() {
        return child !== null && child.exitCode === null && child.signalCode === null
      },
      start() {
        output = ''
        const memberArgs = [
          ...['--name', `m${i}`, '--data-dir', join(dir, `m${i}`)],
          ...['--listen-client-urls', url, '--advertise-client-urls', url],
          ...['--listen-peer-urls', peers[i], '--initial-advertise-peer-urls', peers[i]],
          ...['--initial-cluster', initial, '--log-level', 'error'],
          ...timing,
          ...served,
          ...args,
        ]
        child = spawn(...(hosts ? hosts.wrap(i, bin, memberArgs) : [bin, memberArgs]), { stdio: ['ignore', 'pipe', 'pipe'] })
        child.stdout.on('data', (d) => (output += d))
        child.stderr.on('data', (d) => (output += d))
      },
      /** SIGKILL: the member stops at once, as a crash would. */
      async stop() {
        if (!this.running) return
        const done = new Promise((resolve) => child.once('exit', resolve))
        child.kill('SIGKILL')
        await done
      },
      get output() {
        return output
      },
    }
  })
  const cluster = {
    urls,
    endpoints: urls.join(','),
    members,
    /** etcdctl against the members still running; its output. */
    etcdctl(ctlArgs) {
      const running = members.filter((m) => m.running).map((m) => m.url)
      const ran = spawnSync(TOOLS.etcdctl.find() ?? 'etcdctl', ['--endpoints', running.join(','), ...asked, ...ctlArgs], {
        env: { ...process.env, ETCDCTL_API: '3' },
        encoding: 'utf8',
      })
      if (ran.status !== 0) throw new Error(`etcdctl ${ctlArgs.join(' ')}: ${ran.stderr || ran.stdout}`)
      return ran.stdout
    },
    /** The index of the member that leads now (waits for one, up to 10 s). */
    async leader() {
      const deadline = Date.now() + 10_000
      while (Date.now() < deadline) {
        try {
          const statuses = JSON.parse(cluster.etcdctl(['endpoint', 'status', '-w', 'json']))
          const leading = statuses.find((s) => s.Status.leader !== 0 && s.Status.leader === s.Status.header.member_id)
          if (leading) return urls.indexOf(leading.Endpoint)
        } catch {
          // A member that was just stopped or started: ask again.
        }
        await sleep(50)
      }
      throw new Error('no etcd member leads')
    },
    stop: (i) => members[i].stop(),
    async start(i) {
      members[i].start()
      await ready(cluster, [urls[i]], asked)
    },
    async close() {
      await Promise.all(members.map((m) => m.stop()))
      rmSync(dir, { recursive: true, force: true })
    },
  }
  for (const member of members) member.start()
  await ready(cluster, urls, asked)
  return cluster
}

/**
 * Resolves once each of `urls` answers a linearizable read (or, with
 * authentication on, refuses one for want of a user), or rejects after 20 s.
 */
async function ready(cluster, urls, asked) {
  const deadline = Date.now() + 20_000
  for (const url of urls) {
    for (;;) {
      const ran = spawnSync(TOOLS.etcdctl.find() ?? 'etcdctl', ['--endpoints', url, ...asked, '--command-timeout', '1s', 'get', 'ready'], {
        env: { ...process.env, ETCDCTL_API: '3' },
        encoding: 'utf8',
      })
      if (ran.status === 0 || /user name is empty|permission denied/.test(ran.stderr)) break
      if (Date.now() > deadline) {
        await cluster.close()
        throw new Error(`etcd at ${url} did not answer within 20 s: ${ran.stderr}\n${cluster.members.map((m) => m.output).join('\n')}`)
      }
      await sleep(50)
    }
  }
}

/**
 * `at` ms from now, SIGKILLs the member that leads `cluster`, and starts it
 * again `down` ms later; resolves to its index once it answers again.
 */
export async function leaderKilled(cluster, at, down) {
  await sleep(at)
  const leader = await cluster.leader()
  await cluster.stop(leader)
  await sleep(down)
  await cluster.start(leader)
  return leader
}
