// PostgresLockStore through PgBouncer in transaction pooling mode, with few
// server connections, so every transaction may run on another one, shared
// with other clients: the whole store contract, across processes too. No
// statement the store sends may depend on its session (nothing prepared by
// name); LISTEN cannot work through such a pooler, so the store listens
// directly on the cluster (listenUrl) and releases are still announced.
// Skipped, saying so, when pgbouncer is not installed.
import { test } from 'node:test'
import { postgresContract } from '../../helpers/postgres-contract.mjs'
import { startPostgres } from '../../../support/postgres.mjs'
import { startPgBouncer, pgbouncerMissing } from '../../../support/pgbouncer.mjs'

const name = 'PostgresLockStore through PgBouncer (pool_mode = transaction)'
const missing = pgbouncerMissing()
if (missing) {
  test(name, { skip: missing }, () => {})
} else {
  postgresContract(
    name,
    async () => {
      const postgres = await startPostgres()
      const bouncer = await startPgBouncer({ upstream: postgres.url, mode: 'transaction', poolSize: 3 })
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
    (server) => server.url,
  )
}
