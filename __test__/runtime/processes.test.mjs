// The control for the store contract's cross-process checks
// (stores/contract.mjs, which has child processes increment one counter file
// under the lock and finds the count exact): the same processes without a
// lock get it wrong, so that check can fail.

import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { redisForTests } from '../../support/servers.mjs'
import { runChild } from '../helpers/processes.mjs'
import { PROCESSES, INCREMENTS } from '../stores/contract.mjs'

const dir = mkdtempSync(join(tmpdir(), 'keel-processes-'))
// The children open a store (helpers/child.mjs always does), though this one never locks.
const redis = await redisForTests()
after(async () => {
  await redis.close()
  rmSync(dir, { recursive: true, force: true })
})

test('control: without a lock, the same processes lose updates (so the counter test can fail)', async () => {
  const file = join(dir, 'counter')
  writeFileSync(file, '0')
  const env = { KEEL_TEST_STORE: 'redis', KEEL_TEST_REDIS: redis.url }
  // They start together, so that they overlap even where starting a process takes long.
  const startAt = String(Date.now() + 2_000)
  await Promise.all(Array.from({ length: PROCESSES }, () => runChild(env, 'count-unlocked', file, String(INCREMENTS), startAt)))
  // Wrong either way: updates lost (two read the same value), or, where two
  // writes of different lengths land together, digits left over (more).
  const count = Number(readFileSync(file, 'utf8'))
  assert.notEqual(count, PROCESSES * INCREMENTS, `expected a wrong count without a lock, got ${count}`)
})
