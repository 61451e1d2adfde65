// Explicit resource management: `await using l = lock(...)` in TypeScript
// (fixtures/dispose.ts, compiled by `tsc -p __test__/fixtures`, which lowers
// `await using` for Node 20) releases at the end of the scope, on a throw
// too; and Lock[Symbol.asyncDispose] itself, called as the runtime would.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { fileURLToPath } from 'node:url'
import { lock, getLockStore } from '@shaferllc/keel/core'

const run = promisify(execFile)

test('await using (compiled by tsc 5.2+, run on Node 20) releases at the end of the scope, also on a throw', async () => {
  const compiled = fileURLToPath(new URL('../fixtures/dist/dispose.js', import.meta.url))
  const { stdout } = await run(process.execPath, [compiled], { timeout: 20_000 })
  assert.deepEqual(JSON.parse(stdout), {
    result: 'held inside',
    heldAfter: false,
    thrown: 'report failed',
    heldAfterThrow: false,
    whileHeldElsewhere: 'busy',
    notAcquired: true,
    stillTheirs: true,
  })
})

test('Lock[Symbol.asyncDispose] releases a held lock, and leaves a lost or unheld one alone', async () => {
  assert.equal(typeof Symbol.asyncDispose, 'symbol')
  const l = lock('dispose:direct', 1_000)
  assert.equal(await l.acquire(), true)
  assert.equal(await l[Symbol.asyncDispose](), undefined)
  assert.equal(await getLockStore().isLocked('dispose:direct'), false)
  assert.equal(await l[Symbol.asyncDispose](), undefined, 'a second dispose is a no-op')
  const lapsed = lock('dispose:lapsed', 10)
  assert.equal(await lapsed.acquire(), true)
  await new Promise((resolve) => setTimeout(resolve, 30))
  assert.equal(await getLockStore().acquire('dispose:lapsed', 'next holder', 1_000), true)
  await lapsed[Symbol.asyncDispose]()
  assert.equal(await getLockStore().release('dispose:lapsed', 'next holder'), true, "the next holder's lock survived")
})
