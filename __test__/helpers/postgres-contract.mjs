// The store contract for PostgresLockStore on a cluster of the test file's
// own, reached through the URL `urlOf` picks (TCP, the unix socket, a
// PgBouncer in front, TLS), and looked at through a plain `pg` client (at the
// server's `inspectUrl`, else its `url`).
import pg from 'pg'
import { storeContract } from '../stores/contract.mjs'
import { openStore } from './stores.mjs'
import { startPostgres } from '../../support/postgres.mjs'
import { startPgBouncer } from '../../support/pgbouncer.mjs'
import { lacking } from './tools.mjs'

/**
 * @template {{ url: string, socketUrl?: string, inspectUrl?: string, tlsCaFile?: string, close(): Promise<void> }} S
 * @param {string} name
 * @param {() => Promise<S>} server
 * @param {(server: S) => string} urlOf
 * @param {(server: S) => string | undefined} [listenUrlOf] the store's listenUrl, if any
 * @param {string[]} [tools] the programs (support/tools.mjs) it needs besides PostgreSQL
 * @param {number} [commandTimeout] the store's command timeout, ms (else the default of helpers/stores.mjs)
 */
export function postgresContract(name, server, urlOf, listenUrlOf = () => undefined, tools = [], commandTimeout = undefined) {
  if (lacking(tools, name)) return
  storeContract(name, {
    async open() {
      const postgres = await server()
      const opened = await openStore({
        KEEL_TEST_STORE: 'postgres-store',
        KEEL_TEST_DATABASE: urlOf(postgres),
        KEEL_TEST_LISTEN_URL: listenUrlOf(postgres) ?? '',
        KEEL_TEST_TLS_CA: postgres.tlsCaFile,
        ...(commandTimeout === undefined ? {} : { KEEL_TEST_COMMAND_TIMEOUT: String(commandTimeout) }),
      })
      const inspect = new pg.Client(postgres.inspectUrl ?? postgres.url)
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
    pings: true,
    fencing: true,
    semaphores: 'native',
    readWrite: true,
    processes: true,
    announcesReleases: true,
  })
}

/**
 * The contract through a PgBouncer in `mode` with `poolSize` server
 * connections in front of a cluster of the file's own; skipped, saying so,
 * when pgbouncer is not installed. In transaction mode the store listens on
 * the cluster directly (listenUrl): LISTEN cannot work through such a pooler.
 *
 * @param {'transaction' | 'session'} mode
 * @param {number} poolSize
 */
export function pgbouncerContract(mode, poolSize) {
  postgresContract(
    `PostgresLockStore through PgBouncer (pool_mode = ${mode})`,
    async () => {
      const postgres = await startPostgres()
      const bouncer = await startPgBouncer({ upstream: postgres.url, mode, poolSize })
      return {
        url: postgres.url,
        bouncerUrl: bouncer.url,
        async close() {
          await bouncer.close()
          await postgres.close()
        },
      }
    },
    (server) => server.bouncerUrl,
    (server) => (mode === 'transaction' ? server.url : undefined),
    ['pgbouncer'],
    // PgBouncer is one more single-threaded process on the way: with the
    // machine busy it passed the 10,000 statements of the contract's
    // 10,000-keys case, sent at once, in 5 to 6 s, past the default 5 s.
    15_000,
  )
}
