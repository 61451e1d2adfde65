// EtcdLockStore keeps a line (contract-line.mjs), on a 3-member cluster of
// the test's own: a lock is a range of keys, its holder the entry created
// first and each place in line an entry behind it. A hand-over is not
// announced: each waiting process follows the line and only the one whose
// place was right behind the entry that went looks, and tells its own
// waiters. etcd shows events, not commands, so what the processes did is
// counted in them (child.mjs reports it): a hand-over told is one a waiting
// process heard, an announcement anything else it heard from the others,
// and the acquire attempts are those its waiters sent the store, as the
// tracing channel counts them. The line's entries are read with etcdctl.
// Skipped, saying so, when etcd is not installed.
import { before, after } from 'node:test'
import { setLockStore, getLockStore, EtcdLockStore } from '@shaferllc/keel/core'
import { startEtcd } from '../../support/etcd.mjs'
import { lacking } from '../helpers/tools.mjs'
import { lineContract, observeReports } from './contract-line.mjs'

if (!lacking(['etcd', 'etcdctl'], 'EtcdLockStore keeps a line')) {
  let etcd
  let store
  let previous
  let env
  before(async () => {
    etcd = await startEtcd({ size: 3 })
    env = { KEEL_TEST_STORE: 'etcd-store', KEEL_TEST_ETCD: etcd.endpoints, KEEL_TEST_REPORT_HEARD: '1' }
    previous = getLockStore()
    store = setLockStore(new EtcdLockStore({ endpoints: etcd.endpoints }))
  })
  after(async () => {
    setLockStore(previous)
    await store?.close()
    await etcd?.close()
  })

  /** How many entries `key`'s line has (its holder and the places behind it), as stored (`keel:` the prefix). */
  const entries = (key) => {
    const line = `keel:l/${Buffer.byteLength(key)}:${key}/`
    return Number(JSON.parse(etcd.etcdctl(['get', '--prefix', line, '--keys-only', '-w', 'json'])).count ?? 0)
  }

  lineContract(() => ({
    env,
    store,
    // Each acquire and release a commit of the cluster: 32 loops of 200 a
    // pass (of 1,000, three passes took three minutes beside the rest).
    acquiresPerLoop: 200,
    // Every entry but the first waits.
    places: async (key) => Math.max(entries(key) - 1, 0),
    observe: observeReports,
    leftovers: async (key) => entries(key),
  }))
}
