// The store contract for MySqlLockStore on a MariaDB server of the test
// file's own, reached through the URL `urlOf` picks (TCP, the unix socket,
// TLS), and looked at through a plain mysql2 connection to the server's
// `url` (over TLS, trusting only that CA, when the server has `tlsCaFile`:
// the store is then given `tls: { ca }` from that file too).
import { readFileSync } from 'node:fs'
import mysql from 'mysql2/promise'
import { storeContract } from '../stores/contract.mjs'
import { openStore } from './stores.mjs'
import { lacking } from './tools.mjs'

/**
 * @template {{ url: string, socketUrl?: string, tlsCaFile?: string, close(): Promise<void> }} S
 * @param {string} name
 * @param {() => Promise<S>} server
 * @param {(server: S) => string} urlOf
 * @param {string[]} [tools] the programs (support/tools.mjs) it needs
 */
export function mysqlContract(name, server, urlOf, tools = ['mariadb']) {
  if (lacking(tools, name)) return
  storeContract(name, {
    async open() {
      const mariadb = await server()
      const opened = await openStore({
        KEEL_TEST_STORE: 'mysql-store',
        KEEL_TEST_MYSQL: urlOf(mariadb),
        KEEL_TEST_TLS_CA: mariadb.tlsCaFile,
      })
      const inspect = await mysql.createConnection(
        mariadb.tlsCaFile === undefined ? mariadb.url : { uri: mariadb.url, ssl: { ca: readFileSync(mariadb.tlsCaFile) } },
      )
      return {
        ...opened,
        deleteKey: (key) => inspect.query('DELETE FROM keel_locks WHERE k = ?', [Buffer.from(key)]),
        async close() {
          await opened.close()
          await inspect.end()
          await mariadb.close()
        },
      }
    },
    pings: true,
    fencing: true,
    semaphores: 'native',
    readWrite: true,
    processes: true,
    anyKey: true,
    // A plain lock's waiters hear of a lock handed to their process (the
    // line's ear); semaphores and read-write keys are polled.
    announcesReleases: true,
    announcesKinds: false,
  })
}
