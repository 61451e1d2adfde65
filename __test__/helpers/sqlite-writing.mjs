// Another process holding a SqliteLockStore file's write lock: what makes
// the store wait, and fail past its commandTimeout. (Not another connection
// of this process: two copies of SQLite in one process do not see each
// other's locks.)

import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const CHILD = fileURLToPath(new URL('./sqlite-child.mjs', import.meta.url))

/**
 * A process holding `path`'s write lock for `ms`, once it has it.
 *
 * @param {string} path
 * @param {number} ms
 */
export async function writing(path, ms) {
  const env = { ...process.env, KEEL_TEST_SQLITE: path, HOLD_MS: String(ms) }
  const writer = spawn(process.execPath, [CHILD, 'writing'], { env, stdio: ['ignore', 'pipe', 'inherit'] })
  await new Promise((resolve, reject) => {
    writer.stdout.once('data', resolve)
    writer.once('exit', (code) => reject(new Error(`the writing process ended first (${code})`)))
  })
  return writer
}
