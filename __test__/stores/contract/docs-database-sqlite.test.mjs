// The docs' database store (fixtures/docs-database.ts) on a SQLite file
// (better-sqlite3), run as the docs write it, keeps to the whole store
// contract (../contract.mjs), across processes sharing the file too. It gives
// no fencing tokens and announces nothing.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { storeContract } from '../contract.mjs'
import { openStore } from '../../helpers/stores.mjs'

storeContract("the docs' database store on SQLite", {
  async open() {
    const dir = mkdtempSync(join(tmpdir(), 'keel-sqlite-'))
    const opened = await openStore({ KEEL_TEST_STORE: 'sqlite', KEEL_TEST_DATABASE: `sqlite:${join(dir, 'locks.db')}` })
    const { connection } = await import('../../fixtures/dist/connection.js')
    return {
      ...opened,
      deleteKey: (key) => connection().write('DELETE FROM locks WHERE key = ?', [key]),
      async close() {
        await opened.close()
        rmSync(dir, { recursive: true, force: true })
      },
    }
  },
  processes: true,
  anyKey: true,
})
