// SqliteLockStore on a file of the test's own keeps to the whole store
// contract (../contract.mjs), across processes sharing the file too, with
// fencing tokens, releases heard in the other processes at once, and keys of
// any size and content.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { storeContract } from '../contract.mjs'
import { openStore } from '../../helpers/stores.mjs'

storeContract('SqliteLockStore', {
  async open() {
    const dir = mkdtempSync(join(tmpdir(), 'keel-sqlite-store-'))
    const opened = await openStore({ KEEL_TEST_STORE: 'sqlite-store', KEEL_TEST_SQLITE: join(dir, 'locks.db') })
    return {
      ...opened,
      async close() {
        await opened.close()
        rmSync(dir, { recursive: true, force: true })
      },
    }
  },
  fencing: true,
  processes: true,
  announcesReleases: true,
  anyKey: true,
  pings: true,
  semaphores: 'native',
  readWrite: true,
})
