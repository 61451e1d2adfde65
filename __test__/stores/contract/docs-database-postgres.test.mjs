// The docs' database store (fixtures/docs-database.ts) on PostgreSQL (pg),
// run as the docs write it against a cluster of the file's own, keeps to the
// whole store contract (../contract.mjs), across processes too. It gives no
// fencing tokens and announces nothing; its keys are TEXT primary keys, so
// PostgreSQL's limits on text apply (no NUL, no 1 MB index entries).
import { storeContract } from '../contract.mjs'
import { postgresForTests } from '../../../support/postgres.mjs'
import { openStore } from '../../helpers/stores.mjs'

storeContract("the docs' database store on PostgreSQL", {
  async open() {
    const postgres = await postgresForTests()
    const opened = await openStore({ KEEL_TEST_STORE: 'postgres', KEEL_TEST_DATABASE: postgres.url })
    const { connection } = await import('../../fixtures/dist/connection.js')
    return {
      ...opened,
      deleteKey: (key) => connection().write('DELETE FROM locks WHERE key = ?', [key]),
      async close() {
        await opened.close()
        await postgres.close()
      },
    }
  },
  processes: true,
})
