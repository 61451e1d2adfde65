// PostgresLockStore through PgBouncer in session pooling mode (a client keeps
// a server connection while it is connected, and a server connection serves
// client after client, so the pool holds one for every client connection of
// the processes here): the whole store contract, across processes too,
// LISTEN included. Skipped, saying so, when pgbouncer is not
// installed.
import { pgbouncerContract } from '../../helpers/postgres-contract.mjs'

pgbouncerContract('session', 60)
