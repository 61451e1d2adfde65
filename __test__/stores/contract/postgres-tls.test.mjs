// PostgresLockStore over TLS keeps to the whole store contract
// (../contract.mjs), across processes too, on a PostgreSQL cluster of the
// file's own that accepts TLS connections only, with a throwaway CA
// (support/certs.mjs). The test looks at the table through the cluster's
// unix socket.
import pg from 'pg'
import { storeContract } from '../contract.mjs'
import { startPostgres } from '../../../support/postgres.mjs'
import { makeCertificates } from '../../../support/certs.mjs'
import { openStore } from '../../helpers/stores.mjs'

storeContract('PostgresLockStore over TLS', {
  async open() {
    const certificates = makeCertificates()
    const postgres = await startPostgres({ tls: certificates.server })
    const opened = await openStore({
      KEEL_TEST_STORE: 'postgres-store',
      KEEL_TEST_DATABASE: `${postgres.url}?sslmode=require`,
      KEEL_TEST_TLS_CA: certificates.file('ca.crt'),
    })
    const inspect = new pg.Client(postgres.socketUrl)
    await inspect.connect()
    return {
      ...opened,
      deleteKey: (key) => inspect.query('DELETE FROM locks WHERE key = $1', [key]),
      async close() {
        await opened.close()
        await inspect.end()
        await postgres.close()
        certificates.remove()
      },
    }
  },
  fencing: true,
  semaphores: 'native',
  readWrite: true,
  processes: true,
  announcesReleases: true,
})
