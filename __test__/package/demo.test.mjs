// `npm run demo` shows what the README promises: one charge, a wait, extend, a handoff.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { fileURLToPath } from 'node:url'

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
