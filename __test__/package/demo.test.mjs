// `npm run demo` shows what the README promises: one charge, a wait, extend, a handoff.
// examples/read-write-store.mjs runs as its header says, against a Redis server.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { fileURLToPath } from 'node:url'
import { redisForTests } from '../../support/servers.mjs'

const run = promisify(execFile)
const root = fileURLToPath(new URL('../..', import.meta.url))

test('the demo: exactly one worker charges, the others skip', async () => {
  const { stdout } = await run(process.execPath, ['examples/demo.mjs'], { cwd: root, timeout: 20_000 })
  const lines = stdout.split('\n')
  assert.equal(lines.filter((l) => /worker \d: charged/.test(l)).length, 1)
  assert.equal(lines.filter((l) => /worker \d: skipped/.test(l)).length, 4)
  assert.match(stdout, /1 charge, 1 call to the provider/)
  assert.match(stdout, /ran: true, after waiting \d+ ms/)
  assert.match(stdout, /gives up at once: ran false/)
  assert.equal(lines.filter((l) => /batch \d done/.test(l)).length, 3)
  assert.match(stdout, /released by B: true/)
  assert.match(stdout, /free again: true/)
})

test('the read-write store example: its store passes verifyLockStore; a waiting writer holds a reader back, then gets in', async () => {
  const redis = await redisForTests()
  try {
    const env = { ...process.env, REDIS_URL: redis.url }
    const { stdout } = await run(process.execPath, ['examples/read-write-store.mjs'], { cwd: root, env, timeout: 30_000 })
    assert.match(stdout, /verifyLockStore: ok \(12 checks\)/)
    assert.match(stdout, /a new reader while a writer waits: false/)
    assert.match(stdout, /the writer got in: true - holders: 1/)
  } finally {
    await redis.close()
  }
})
