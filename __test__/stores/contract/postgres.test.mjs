// PostgresLockStore on a PostgreSQL cluster of the file's own keeps to the
// whole store contract (../contract.mjs), across processes too; it gives
// fencing tokens and announces its releases to waiters in other processes.
// Its keys are TEXT primary keys, so PostgreSQL's limits on text apply (no
// NUL, no 1 MB index entries).
import { postgresContract } from '../../helpers/postgres-contract.mjs'
import { postgresForTests } from '../../../support/postgres.mjs'

postgresContract('PostgresLockStore', postgresForTests, (server) => server.url)
