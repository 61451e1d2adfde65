// Process and thread lifetime: terminating worker threads while their lock
// operations and Redis commands are in flight must never take the process
// down (napi threadsafe functions and pending promises are where addons
// usually crash when an environment is torn down mid-call).

import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { redisForTests } from './helpers/servers.mjs'

const redis = await redisForTests()
after(() => redis.close())

test('500 worker threads terminated mid-flight (Redis, memory and JS stores): zero crashes', () => {
  const child = fileURLToPath(new URL('./helpers/terminate-child.mjs', import.meta.url))
  const r = spawnSync(process.execPath, [child, redis.url, '500'], { encoding: 'utf8', timeout: 240_000 })
  assert.equal(r.signal, null, `the process died of ${r.signal}:\n${r.stderr}`)
  assert.equal(r.status, 0, r.stderr)
  assert.equal(r.stdout.trim(), 'survived')
})
