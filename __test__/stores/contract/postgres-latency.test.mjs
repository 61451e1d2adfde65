// PostgresLockStore keeps to the whole store contract (../contract.mjs),
// across processes too, through a fault proxy (support/fault-proxy.mjs) that
// passes every chunk on 2 ms late each way, as a network between machines
// would: waits, NOTIFY wake-ups, handoffs and timeouts hold when a round
// trip is not free.
import { postgresContract } from '../../helpers/postgres-contract.mjs'
import { startPostgres } from '../../../support/postgres.mjs'
import { startProxy } from '../../../support/fault-proxy.mjs'

postgresContract(
  'PostgresLockStore through 2 ms of latency each way',
  async () => {
    const postgres = await startPostgres()
    const proxy = await startProxy(postgres.port)
    proxy.latencyMs = 2
    return {
      url: `postgres://postgres@127.0.0.1:${proxy.port}/postgres`,
      inspectUrl: postgres.url,
      async close() {
        await proxy.close()
        await postgres.close()
      },
    }
  },
  (server) => server.url,
)
