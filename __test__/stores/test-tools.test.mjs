// A program the tests need missing from the machine (support/tools.mjs): the
// tests that need it are skipped at once, the report naming the program and
// the command that installs it; the check before a run says so in one line;
// KEEL_TEST_REQUIRE_ALL=1 (CI) makes both a failure. Each run here is a
// `node --test` of its own with a PATH that lacks the program.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { runNode, pathWithout } from '../helpers/node-test.mjs'

const noFaketime = pathWithout(['faketime'])
after(() => noFaketime.remove())

const CLOCK = '__test__/stores/postgres-clock.test.mjs'

test('without faketime, the clock-skew tests are skipped at once, saying what to install', async () => {
  const r = await runNode(['--test', '--test-reporter=spec', CLOCK], { PATH: noFaketime.path, KEEL_TEST_REQUIRE_ALL: undefined })
  assert.equal(r.code, 0, r.output)
  assert.match(r.output, /PostgresLockStore with a process whose clock is wrong.*# faketime is not installed: apt-get install faketime/)
  assert.match(r.output, /skipped 1/)
  assert.match(r.output, /pass 0/)
  assert.match(r.output, /fail 0/)
  // Skipped before any server is started: no long wait.
  assert.ok(r.ms < 30_000, `the skip took ${r.ms} ms`)
})

test('without faketime and with KEEL_TEST_REQUIRE_ALL=1, the clock-skew tests fail, saying why', async () => {
  const r = await runNode(['--test', '--test-reporter=spec', CLOCK], { PATH: noFaketime.path, KEEL_TEST_REQUIRE_ALL: '1' })
  assert.notEqual(r.code, 0, r.output)
  assert.match(r.output, /faketime is not installed: apt-get install faketime \(KEEL_TEST_REQUIRE_ALL=1/)
  assert.match(r.output, /fail 1/)
  assert.match(r.output, /skipped 0/)
})

test('the check before a run: one line naming what is missing, what that skips and the install command', async () => {
  const r = await runNode(['support/tools.mjs'], { PATH: noFaketime.path, KEEL_TEST_REQUIRE_ALL: undefined })
  assert.equal(r.code, 0, r.output)
  const lines = r.output.trim().split('\n')
  assert.equal(lines.length, 1, r.output)
  assert.match(lines[0], /missing faketime \(skips the clock-skew test \(stores\/postgres-clock\)\)/)
  assert.match(lines[0], /those tests are skipped/)
  assert.match(lines[0], /apt-get install faketime$/)

  const required = await runNode(['support/tools.mjs'], { PATH: noFaketime.path, KEEL_TEST_REQUIRE_ALL: '1' })
  assert.equal(required.code, 1, required.output)
  assert.match(required.output, /KEEL_TEST_REQUIRE_ALL=1 makes those skips failures/)
})

test('the check before a run: without redis-server the suite cannot run, and it stops at once', {
  skip: ['/usr/sbin/redis-server', '/usr/local/bin/redis-server'].some(existsSync) && 'redis-server is outside the PATH here',
}, async () => {
  const bare = pathWithout(['faketime', 'redis-server'])
  try {
    const r = await runNode(['support/tools.mjs'], { PATH: bare.path, KEEL_TEST_REQUIRE_ALL: undefined })
    assert.equal(r.code, 1, r.output)
    assert.equal(r.output.trim().split('\n').length, 1, r.output)
    assert.match(r.output, /missing redis-server \(needed: most tests start their own Redis\), faketime/)
    assert.match(r.output, /the tests cannot run\. Install: apt-get install redis-server faketime/)
  } finally {
    bare.remove()
  }
})
