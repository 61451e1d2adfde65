// EtcdLockStore on a 3-member etcd cluster of the test's own keeps to the
// whole store contract (../contract.mjs), across processes too, with fencing
// tokens and releases heard in the other processes at once. A hold lapses at
// its TTL, let go by the store that took it; one whose process is gone lapses
// with its lease, which etcd counts in whole seconds: up to about three
// seconds after its TTL here. Skipped, saying so, when etcd is not installed.
import { storeContract } from '../contract.mjs'
import { openStore } from '../../helpers/stores.mjs'
import { lacking } from '../../helpers/tools.mjs'
import { startEtcd } from '../../../support/etcd.mjs'

const NAME = 'EtcdLockStore on a 3-member cluster'

if (!lacking(['etcd', 'etcdctl'], NAME)) {
  storeContract(NAME, {
    async open() {
      const etcd = await startEtcd({ size: 3 })
      const opened = await openStore({ KEEL_TEST_STORE: 'etcd-store', KEEL_TEST_ETCD: etcd.endpoints })
      return {
        ...opened,
        deleteKey: (key) => etcd.etcdctl(["del", "--prefix", `keel:l/${Buffer.byteLength(key)}:${key}/`]),
        async close() {
          await opened.close()
          await etcd.close()
        },
      }
    },
    fencing: true,
    processes: true,
    announcesReleases: true,
    anyKey: true,
    pings: true,
    semaphores: 'native',
    readWrite: true,
    lapsesLate: 3_000,
  })
}
