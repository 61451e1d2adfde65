// PostgresLockStore through a unix socket, where its connections are
// tokio-postgres's on Tokio (a server over TCP is driven by the JS thread's
// event loop instead): the same store contract, across processes too, with
// fencing tokens and announced releases.
import { postgresContract } from '../../helpers/postgres-contract.mjs'
import { startPostgres } from '../../../support/postgres.mjs'

postgresContract('PostgresLockStore over a unix socket', () => startPostgres(), (server) => server.socketUrl)
