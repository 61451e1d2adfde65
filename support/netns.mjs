// Hosts of their own on this machine, for the tests of what a network does:
// each a network namespace (iproute2's `ip netns`, as root) with one
// interface on a bridge that the test's own namespace is also on. A host
// can be cut off (its link taken down: nothing reaches it or leaves it, and
// nothing it had open is closed, as in a partition) and joined again.
// Everything is named after the process that made it (`keel-<pid>-<i>`,
// `kb<pid>`), taken away when it ends (on exit, SIGINT or SIGTERM), and
// what a process that was killed left is taken away by the next.

import { spawnSync } from 'node:child_process'
import { which } from './tools.mjs'

const IP = () => which('ip', ['/usr/sbin', '/sbin', '/usr/bin', '/bin'])

/**
 * `n` hosts on a /24 of their own. Returns `{ addresses, wrap(i, program,
 * args), cut(i), join(i), remove() }`: host i's IPv4 address; the program
 * and arguments that run a program on host i; its link taken down or up
 * again; everything made taken away again (and the programs on the hosts
 * killed).
 */
export function makeHosts(n) {
  const ip = IP()
  const run = (...args) => {
    const ran = spawnSync(ip, args, { encoding: 'utf8' })
    if (ran.status !== 0) throw new Error(`ip ${args.join(' ')}: ${ran.stderr || ran.error?.message}`)
    return ran.stdout
  }
  sweep(ip)
  const bridge = `kb${process.pid}`
  const link = (i) => `kv${process.pid}x${i}`
  const space = (i) => `keel-${process.pid}-${i}`
  const subnet = freeSubnet(run('-4', 'route', 'show', 'table', 'all'), run('-4', 'addr'))
  const addresses = Array.from({ length: n }, (_, i) => `${subnet}.${i + 2}`)
  const made = []
  const remove = () => {
    for (const undo of made.splice(0).reverse()) undo()
    process.off('exit', remove)
    process.off('SIGINT', interrupted)
    process.off('SIGTERM', interrupted)
  }
  const interrupted = (signal) => {
    remove()
    process.kill(process.pid, signal)
  }
  process.on('exit', remove)
  process.once('SIGINT', interrupted)
  process.once('SIGTERM', interrupted)
  try {
    // Frames between hosts are not the host's firewall's business
    // (br_netfilter would send them through iptables' FORWARD chain).
    run('link', 'add', bridge, 'type', 'bridge', 'nf_call_iptables', '0', 'nf_call_ip6tables', '0')
    made.push(() => spawnSync(ip, ['link', 'del', bridge]))
    run('addr', 'add', `${subnet}.1/24`, 'dev', bridge)
    run('link', 'set', bridge, 'up')
    for (let i = 0; i < n; i++) {
      run('netns', 'add', space(i))
      made.push(() => removeSpace(ip, space(i)))
      run('link', 'add', link(i), 'type', 'veth', 'peer', 'name', `kp${process.pid}x${i}`)
      made.push(() => spawnSync(ip, ['link', 'del', link(i)]))
      run('link', 'set', `kp${process.pid}x${i}`, 'netns', space(i), 'name', 'eth0')
      run('link', 'set', link(i), 'master', bridge, 'up')
      run('-n', space(i), 'addr', 'add', `${addresses[i]}/24`, 'dev', 'eth0')
      run('-n', space(i), 'link', 'set', 'eth0', 'up')
      run('-n', space(i), 'link', 'set', 'lo', 'up')
    }
  } catch (error) {
    remove()
    throw error
  }
  return {
    addresses,
    /** The program and arguments that run `program` with `args` on host `i`. */
    wrap: (i, program, args) => [ip, ['netns', 'exec', space(i), program, ...args]],
    cut: (i) => run('link', 'set', link(i), 'down'),
    join: (i) => run('link', 'set', link(i), 'up'),
    remove,
  }
}

/** A namespace taken away, the programs still in it killed first. */
function removeSpace(ip, name) {
  const pids = spawnSync(ip, ['netns', 'pids', name], { encoding: 'utf8' }).stdout ?? ''
  for (const pid of pids.split('\n').filter(Boolean)) {
    try {
      process.kill(Number(pid), 'SIGKILL')
    } catch {
      // gone already
    }
  }
  spawnSync(ip, ['netns', 'del', name])
}

/** What processes that no longer run left: their namespaces and bridges. */
function sweep(ip) {
  const gone = (pid) => {
    try {
      process.kill(pid, 0)
      return false
    } catch (error) {
      return error.code === 'ESRCH'
    }
  }
  const spaces = spawnSync(ip, ['netns', 'list'], { encoding: 'utf8' }).stdout ?? ''
  for (const [, name, pid] of spaces.matchAll(/^(keel-(\d+)-\d+)\b/gm)) {
    if (gone(Number(pid))) removeSpace(ip, name)
  }
  const bridges = spawnSync(ip, ['-o', 'link', 'show', 'type', 'bridge'], { encoding: 'utf8' }).stdout ?? ''
  for (const [, name, pid] of bridges.matchAll(/^\d+: (kb(\d+))[:@]/gm)) {
    if (gone(Number(pid))) spawnSync(ip, ['link', 'del', name])
  }
}

/**
 * The first three parts of a 10.x.y.0/24 that no route or address here
 * covers or is covered by (`routes`: `ip -4 route show table all`;
 * `addresses`: `ip -4 addr`).
 */
function freeSubnet(routes, addresses) {
  const taken = [...`${routes}\n${addresses}`.matchAll(/(\d+\.\d+\.\d+\.\d+)(?:\/(\d+))?/g)].map(([, at, bits]) => [
    number(at),
    Number(bits ?? 32),
  ])
  for (let attempt = 0; attempt < 1_000; attempt++) {
    const subnet = `10.${200 + Math.floor(Math.random() * 50)}.${Math.floor(Math.random() * 256)}`
    const ours = number(`${subnet}.0`)
    // Two networks overlap when either holds the other's first address.
    const overlaps = ([at, bits]) => bits > 0 && (within(at, ours, 24) || within(ours, at, bits))
    if (!taken.some(overlaps)) return subnet
  }
  throw new Error('no free 10.x.y.0/24 for the test hosts')
}

const number = (dotted) => dotted.split('.').reduce((n, part) => n * 256 + Number(part), 0)
/** Whether `at` lies in the network of `bits` bits at `network`. */
const within = (at, network, bits) => Math.floor(at / 2 ** (32 - bits)) === Math.floor(network / 2 ** (32 - bits))
