// EtcdLockStore through a network partition: three members, each on a host
// of its own (support/netns.mjs), and one host cut off from the others with
// a client beside its member. Cut off, that client answers
// ERR_LOCK_STORE_UNAVAILABLE to everything and is granted nothing, while the
// majority goes on; joined again, it sees what the majority did. A waiter
// whose watch stream was on the member cut off (a cut closes no connection)
// hears a release made on the majority within seconds, not at its next poll.
// Skipped, saying so, without etcd or without network namespaces (root).
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { fileURLToPath } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'
import { semaphore, EtcdLockStore } from '@shaferllc/keel/core'
import { uniqueKey } from '../../support/servers.mjs'
import { startEtcd } from '../../support/etcd.mjs'
import { makeHosts } from '../../support/netns.mjs'
import { describeWith } from '../helpers/tools.mjs'
import { withStore } from '../helpers/stores.mjs'
import { runProcess } from '../helpers/processes.mjs'
import { node } from '../helpers/node.mjs'
import { eventually } from '../helpers/eventually.mjs'

const CHILD = fileURLToPath(new URL('../helpers/child.mjs', import.meta.url))

describeWith(['etcd', 'etcdctl', 'netns'], 'EtcdLockStore through a partition', () => {
  let hosts
  let etcd
  before(async () => {
    hosts = makeHosts(3)
    etcd = await startEtcd({ size: 3, hosts })
  })
  after(async () => {
    await etcd?.close()
    hosts?.remove()
  })

  /** The store's own methods called in turn by a process on host 0, beside member 0: each one's `{ value }` or `{ code }`. */
  const askOnHostZero = (calls) => {
    const [program, args] = node([CHILD, 'ask', JSON.stringify(calls)])
    return runProcess(...hosts.wrap(0, program, args), {
      KEEL_TEST_STORE: 'etcd-store',
      KEEL_TEST_ETCD: etcd.endpoints,
      KEEL_TEST_COMMAND_TIMEOUT: '2000',
    })
  }
  /** What member `i` counts of `metric` (`watcher_total`: watches; `watch_stream_total`: their streams). */
  const counted = async (i, metric) => {
    const text = await (await fetch(`${etcd.urls[i]}/metrics`)).text()
    return Number(text.match(new RegExp(`^etcd_debugging_mvcc_${metric} (\\d+)`, 'm'))?.[1] ?? NaN)
  }
  /** A store in this process that asks members 1 and 2 first. */
  const onTheMajority = () => new EtcdLockStore({ endpoints: [1, 2, 0].map((i) => etcd.urls[i]), connectTimeout: 1_000, commandTimeout: 3_000 })

  test('a client cut off with one member answers ERR_LOCK_STORE_UNAVAILABLE and is granted nothing; the majority goes on', async () => {
    const majority = onTheMajority()
    const held = uniqueKey('held')
    const free = uniqueKey('free')
    try {
      assert.equal(await majority.acquire(held, 'majority', 120_000), true)
      assert.deepEqual(
        await askOnHostZero([['acquire', free, 'minority', 60_000], ['release', free, 'minority'], ['isLocked', held]]),
        [{ value: true }, { value: true }, { value: true }],
        'before the cut, host 0 reaches the cluster',
      )
      hosts.cut(0)
      try {
        assert.deepEqual(
          await askOnHostZero([['acquire', free, 'minority', 60_000], ['isLocked', held], ['release', held, 'majority']]),
          Array(3).fill({ code: 'ERR_LOCK_STORE_UNAVAILABLE' }),
        )
        // Members 1 and 2 elect a leader of their own if they must, and go on.
        assert.equal(await majority.acquire(free, 'majority', 60_000), true)
        assert.equal(await majority.isLocked(held), true)
      } finally {
        hosts.join(0)
      }
      // Joined again, host 0 sees what the majority did, and takes nothing of it.
      await eventually(async () => assert.deepEqual(await askOnHostZero([['isLocked', free]]), [{ value: true }]), 20_000)
      assert.deepEqual(await askOnHostZero([['acquire', free, 'minority', 60_000], ['isLocked', held]]), [{ value: false }, { value: true }])
      assert.equal(await majority.release(free, 'majority'), true)
      assert.deepEqual(await askOnHostZero([['acquire', free, 'minority', 60_000], ['release', free, 'minority']]), [{ value: true }, { value: true }])
      assert.equal(await majority.release(held, 'majority'), true)
    } finally {
      await majority.close()
    }
  })

  // A semaphore's waiter: a plain lock's waiter renews its place in line
  // every 200 ms, and would find the lock free that way, watch or no watch.
  test('a waiter whose watch was on the member cut off hears a release on the majority', async () => {
    const key = uniqueKey('watched')
    const holder = onTheMajority()
    const waiting = new EtcdLockStore({ endpoints: etcd.urls, connectTimeout: 1_000, commandTimeout: 3_000 })
    try {
      const held = await withStore(holder, async () => {
        const permit = semaphore(key, 1, 120_000)
        assert.equal(await permit.acquire(), true)
        return permit
      })
      await withStore(waiting, async () => {
        const began = performance.now()
        // Polling alone would look again 30 s in.
        const running = semaphore(key, 1, 10_000).run(() => performance.now() - began, { timeout: 60_000, retryDelay: 30_000 })
        await sleep(1_000)
        const watching = await Promise.all([0, 1, 2].map((i) => counted(i, 'watcher_total')))
        assert.deepEqual(watching, [1, 0, 0], 'its watch is on member 0, the first endpoint')
        hosts.cut(0)
        try {
          await sleep(200)
          assert.equal(await held.release(), true)
          const [ran, inAt] = await running
          assert.equal(ran, true)
          assert.ok(inAt < 15_000, `in ${Math.round(inAt)} ms after it began waiting`)
          const streams = (await counted(1, 'watch_stream_total')) + (await counted(2, 'watch_stream_total'))
          assert.equal(streams, 1, 'its stream moved to a member of the majority')
        } finally {
          hosts.join(0)
        }
      })
    } finally {
      await holder.close()
      await waiting.close()
    }
  })
})
