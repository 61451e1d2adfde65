// PostgresLockStore through a unix socket, where its connections are
// tokio-postgres's on Tokio (a server over TCP is driven by the JS thread's
// event loop instead): the same store contract, across processes too, with
// fencing tokens and announced releases.
import pg from 'pg'
import { storeContract } from '../contract.mjs'
import { startPostgres } from '../../../support/postgres.mjs'
import { openStore } from '../../helpers/stores.mjs'

storeContract('PostgresLockStore over a unix socket', {
  async open() {
    const postgres = await startPostgres()
    const opened = await openStore({ KEEL_TEST_STORE: 'postgres-store', KEEL_TEST_DATABASE: postgres.socketUrl })
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
