// The store contract for PostgresLockStore on a cluster of the test file's
// own, reached through the URL `urlOf` picks (TCP, the unix socket, a
// PgBouncer in front), and looked at through a plain `pg` client over TCP.
import pg from 'pg'
import { storeContract } from '../stores/contract.mjs'
import { openStore } from './stores.mjs'

/**
 * @template {{ url: string, socketUrl?: string, close(): Promise<void> }} S
 * @param {string} name
 * @param {() => Promise<S>} server
 * @param {(server: S) => string} urlOf
 * @param {(server: S) => string | undefined} [listenUrlOf] the store's listenUrl, if any
 */
export function postgresContract(name, server, urlOf, listenUrlOf = () => undefined) {
  storeContract(name, {
    async open() {
      const postgres = await server()
      const opened = await openStore({
        KEEL_TEST_STORE: 'postgres-store',
        KEEL_TEST_DATABASE: urlOf(postgres),
        KEEL_TEST_LISTEN_URL: listenUrlOf(postgres) ?? '',
      })
      const inspect = new pg.Client(postgres.url)
      await inspect.connect()
      return {
        ...opened,
        deleteKey: (key) => inspect.query('DELETE FROM locks WHERE key = $1', [key]),
        async close() {
          await opened.close()
          await inspect.end()
          await postgres.close()
        },
      }
    },
    fencing: true,
    semaphores: 'native',
    readWrite: true,
    processes: true,
    announcesReleases: true,
  })
}
