// PostgresLockStore through PgBouncer in session pooling mode (a client keeps
// a server connection while it is connected, and a server connection serves
// client after client, so the pool holds one for every client connection of
// the processes here): the whole store contract, across processes too,
// LISTEN included. Skipped, saying so, when pgbouncer is not
// installed.
import { test } from 'node:test'
import { postgresContract } from '../../helpers/postgres-contract.mjs'
import { startPostgres } from '../../../support/postgres.mjs'
import { startPgBouncer, pgbouncerMissing } from '../../../support/pgbouncer.mjs'

const name = 'PostgresLockStore through PgBouncer (pool_mode = session)'
const missing = pgbouncerMissing()
if (missing) {
  test(name, { skip: missing }, () => {})
} else {
  postgresContract(
    name,
    async () => {
      const postgres = await startPostgres()
      const bouncer = await startPgBouncer({ upstream: postgres.url, mode: 'session', poolSize: 60 })
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
    () => undefined,
  )
}
