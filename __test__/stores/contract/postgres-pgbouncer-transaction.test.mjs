// PostgresLockStore through PgBouncer in transaction pooling mode, with few
// server connections, so every transaction may run on another one, shared
// with other clients: the whole store contract, across processes too. No
// statement the store sends may depend on its session (nothing prepared by
// name); LISTEN cannot work through such a pooler, so the store listens
// directly on the cluster (listenUrl) and releases are still announced.
// Skipped, saying so, when pgbouncer is not installed.
import { pgbouncerContract } from '../../helpers/postgres-contract.mjs'

pgbouncerContract('transaction', 3)
