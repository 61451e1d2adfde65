// Process and thread lifetime: terminating worker threads while their lock
// operations and Redis commands are in flight must never take the process
// down (napi threadsafe functions and pending promises are where addons
// usually crash when an environment is torn down mid-call).

import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { redisForTests } from '../../support/servers.mjs'

const redis = await redisForTests()
after(() => redis.close())

test('500 worker threads terminated mid-flight (Redis, memory and JS stores): zero crashes', () => {
  const child = fileURLToPath(new URL('../helpers/terminate-child.mjs', import.meta.url))
  const r = spawnSync(process.execPath, [child, redis.url, '500'], { encoding: 'utf8', timeout: 240_000 })
  assert.equal(r.signal, null, `the process died of ${r.signal}:\n${r.stderr}`)
  assert.equal(r.status, 0, r.stderr)
  assert.equal(r.stdout.trim(), 'survived')
})

test('a Rust panic becomes a JS error, in a call and in a Tokio-driven operation; the process lives on', () => {
  // The test build of the addon (--features test-hooks; the shipped one has
  // no such export) has a deliberate panic for this test.
  const script = `
    const native = require('./target/test-hooks/keel.node')
    let sync
    try { native.panicForTest(false) } catch (e) { sync = e instanceof Error && /deliberate panic/.test(e.message) }
    native.panicForTest(true).then(
      () => console.log('resolved'),
      (e) => console.log(JSON.stringify({ sync, code: e.code, message: e.message })),
    )
  `
  const root = fileURLToPath(new URL('../..', import.meta.url))
  const r = spawnSync(process.execPath, ['-e', script], { cwd: root, encoding: 'utf8', env: { ...process.env, RUST_BACKTRACE: '0' } })
  assert.equal(r.signal, null, r.stderr)
  assert.equal(r.status, 0, r.stderr)
  const out = JSON.parse(r.stdout)
  assert.equal(out.sync, true)
  assert.equal(out.code, 'ERR_LOCK_INTERNAL')
  assert.match(out.message, /deliberate panic on Tokio/)
})

test('RedisLockStores made, closed and collected by the thousand, some with commands in flight: no crash, no hang', () => {
  // Each store settles its promises through one threadsafe function, handed
  // back to Node when the store is collected (at once, or after its last
  // command in flight). close() lets go of the release callback, which refers
  // to the store, so a closed store can be collected. A mistake on that path
  // is a crash or a hang, not a wrong value.
  const script = `
    const { RedisLockStore } = require('@shaferllc/keel/core');
    (async () => {
      let answered = 0;
      for (let round = 0; round < 20; round++) {
        const inFlight = [];
        for (let i = 0; i < 50; i++) {
          const store = new RedisLockStore({ url: process.env.KEEL_TEST_REDIS, commandTimeout: 5000 });
          await store.isLocked('warm:' + i);
          // Closed at once: the command gets its answer, or (if Tokio had not
          // picked it up yet) ERR_LOCK_STORE_CLOSED; either way it settles.
          const answer = store.isLocked('collected:' + i).then(
            () => answered++,
            (e) => { if (e.code !== 'ERR_LOCK_STORE_CLOSED') throw e; answered++ },
          );
          store.close();
          // Half are collected while their command is in flight.
          if (i % 2) await answer; else inFlight.push(answer);
        }
        global.gc();
        await Promise.all(inFlight);
        global.gc();
        await new Promise((r) => setImmediate(r));
      }
      global.gc();
      console.log(answered);
    })();`
  const r = spawnSync(process.execPath, ['--expose-gc', '-e', script], {
    encoding: 'utf8',
    timeout: 120_000,
    env: { ...process.env, KEEL_TEST_REDIS: redis.url },
  })
  assert.equal(r.signal, null, `the process died of ${r.signal}:\n${r.stderr}`)
  assert.equal(r.status, 0, r.stderr)
  assert.equal(r.stdout.trim(), '1000')
})
