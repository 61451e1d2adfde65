// PostgresLockStore over TLS keeps to the whole store contract
// (../contract.mjs), across processes too, on a PostgreSQL cluster of the
// file's own that accepts TLS connections only, with a throwaway CA
// (support/certs.mjs). The test looks at the table through the cluster's
// unix socket.
import { postgresContract } from '../../helpers/postgres-contract.mjs'
import { startPostgres } from '../../../support/postgres.mjs'
import { makeCertificates } from '../../../support/certs.mjs'

postgresContract(
  'PostgresLockStore over TLS',
  async () => {
    const certificates = makeCertificates()
    const postgres = await startPostgres({ tls: certificates.server })
    return {
      url: `${postgres.url}?sslmode=verify-full`,
      inspectUrl: postgres.socketUrl,
      tlsCaFile: certificates.file('ca.crt'),
      async close() {
        await postgres.close()
        certificates.remove()
      },
    }
  },
  (server) => server.url,
  undefined,
  ['openssl'],
)
