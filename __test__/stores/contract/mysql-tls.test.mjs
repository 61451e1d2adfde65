// MySqlLockStore over TLS keeps to the whole store contract (../contract.mjs),
// across processes too, on a MariaDB server of the file's own that refuses
// TCP connections without TLS (require_secure_transport), with a throwaway CA
// (support/certs.mjs) whose certificate names 127.0.0.1 and localhost. The
// store is given `tls: { ca }` (KEEL_TEST_TLS_CA, so its child processes
// are too) and ssl-mode=VERIFY_IDENTITY; the test looks at the table through
// a mysql2 connection over TLS as well.
import { mysqlContract } from '../../helpers/mysql-contract.mjs'
import { startMariaDb } from '../../../support/mariadb.mjs'
import { makeCertificates } from '../../../support/certs.mjs'

mysqlContract(
  'MySqlLockStore over TLS',
  async () => {
    const certificates = makeCertificates()
    try {
      const mariadb = await startMariaDb({ tls: certificates.server, requireTls: true })
      return {
        url: mariadb.url,
        tlsCaFile: certificates.file('ca.crt'),
        async close() {
          await mariadb.close()
          certificates.remove()
        },
      }
    } catch (e) {
      certificates.remove()
      throw e
    }
  },
  (server) => `${server.url}?ssl-mode=VERIFY_IDENTITY`,
  ['mariadb', 'openssl'],
)
