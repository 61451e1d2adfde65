// PostgresLockStore on a PostgreSQL cluster of the file's own keeps to the
// whole store contract (../contract.mjs), across processes too; it gives
// fencing tokens and announces its releases to waiters in other processes.
// Its keys are TEXT primary keys, so PostgreSQL's limits on text apply (no
// NUL, no 1 MB index entries).
import pg from 'pg'
import { storeContract } from '../contract.mjs'
import { postgresForTests } from '../../../support/postgres.mjs'
import { openStore } from '../../helpers/stores.mjs'

storeContract('PostgresLockStore', {
  async open() {
    const postgres = await postgresForTests()
    const opened = await openStore({ KEEL_TEST_STORE: 'postgres-store', KEEL_TEST_DATABASE: postgres.url })
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
  processes: true,
  announcesReleases: true,
})
