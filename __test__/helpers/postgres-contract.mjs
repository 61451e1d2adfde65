// The store contract for PostgresLockStore on a cluster of the test file's
// own, reached through the URL `urlOf` picks (TCP, or the unix socket), and
// looked at through a plain `pg` client over TCP.
import pg from 'pg'
import { storeContract } from '../stores/contract.mjs'
import { openStore } from './stores.mjs'

/**
 * @param {string} name
 * @param {() => Promise<{ url: string, socketUrl?: string, close(): Promise<void> }>} server
 * @param {(server: { url: string, socketUrl?: string }) => string} urlOf
 */
export function postgresContract(name, server, urlOf) {
  storeContract(name, {
    async open() {
      const postgres = await server()
      const opened = await openStore({ KEEL_TEST_STORE: 'postgres-store', KEEL_TEST_DATABASE: urlOf(postgres) })
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
