// Hosts of their own on this machine, for the tests of what a network does:
// each a network namespace (iproute2's `ip netns`, as root) with one
// interface on a bridge that the test's own namespace is also on. A host
// can be cut off (its link taken down: nothing reaches it or leaves it, and
// nothing it had open is closed, as in a partition) and joined again.

import { spawnSync } from 'node:child_process'
import { which } from './tools.mjs'

/**
 * `n` hosts on a /24 of their own. Returns `{ addresses, wrap(i, program,
 * args), cut(i), join(i), remove() }`: host i's IPv4 address; the program
 * and arguments that run a program on host i; its link taken down or up
 * again; everything made taken away again (also when the process exits).
 */
export function makeHosts(n) {
  const ip = which('ip', ['/usr/sbin', '/sbin', '/usr/bin', '/bin'])
  const run = (...args) => {
    const ran = spawnSync(ip, args, { encoding: 'utf8' })
    if (ran.status !== 0) throw new Error(`ip ${args.join(' ')}: ${ran.stderr || ran.error?.message}`)
    return ran.stdout
  }
  const tag = `${process.pid % 100_000}`
  const bridge = `kb${tag}`
  const link = (i) => `kv${tag}x${i}`
  const space = (i) => `keel-${tag}-${i}`
  const subnet = freeSubnet(run('-4', 'addr'))
  const addresses = Array.from({ length: n }, (_, i) => `${subnet}.${i + 2}`)
  const made = []
  const remove = () => {
    for (const undo of made.splice(0).reverse()) spawnSync(ip, undo, { encoding: 'utf8' })
    process.off('exit', remove)
  }
  process.on('exit', remove)
  try {
    run('link', 'add', bridge, 'type', 'bridge')
    made.push(['link', 'del', bridge])
    run('addr', 'add', `${subnet}.1/24`, 'dev', bridge)
    run('link', 'set', bridge, 'up')
    for (let i = 0; i < n; i++) {
      run('netns', 'add', space(i))
      made.push(['netns', 'del', space(i)])
      run('link', 'add', link(i), 'type', 'veth', 'peer', 'name', `kp${tag}x${i}`)
      made.push(['link', 'del', link(i)])
      run('link', 'set', `kp${tag}x${i}`, 'netns', space(i), 'name', 'eth0')
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

/** The first three parts of a 10.x.y.0/24 no interface here is on (from `ip -4 addr`). */
function freeSubnet(addresses) {
  for (let attempt = 0; attempt < 1_000; attempt++) {
    const subnet = `10.${200 + Math.floor(Math.random() * 50)}.${Math.floor(Math.random() * 256)}`
    if (!addresses.includes(` ${subnet}.`)) return subnet
  }
  throw new Error('no free 10.x.y.0/24 for the test hosts')
}
