// Lock.signal and autoExtend, beyond what the store contract checks for every
// store (stores/contract.mjs: the signal aborts when a hold is lost, never on
// a release; autoExtend keeps a hold and stops on release): a handle that
// holds nothing, the signal as the channel that stops the work, and a held
// lock that does not keep the process alive.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { setTimeout as sleep } from 'node:timers/promises'
import { lock, setLockStore, MemoryLockStore, LockNotHeldError } from '@shaferllc/keel/core'
import { jsStoreOver } from '../helpers/js-stores.mjs'

const exec = promisify(execFile)

/** Resolves with the time (ms after `from`) the signal aborted, or rejects after `ms`. */
const abortedAt = (signal, from, ms = 5_000) =>
  new Promise((resolve, reject) => {
    if (signal.aborted) return resolve(performance.now() - from)
    const t = setTimeout(() => reject(new Error(`not aborted within ${ms} ms`)), ms)
    signal.addEventListener('abort', () => {
      clearTimeout(t)
      resolve(performance.now() - from)
    })
  })

test('a handle that holds nothing has an aborted signal; options.autoExtend must be a boolean', async () => {
  setLockStore(new MemoryLockStore())
  const l = lock('nothing')
  assert.equal(l.signal.aborted, true)
  assert.ok(l.signal.reason instanceof LockNotHeldError)
  assert.equal(l.signal.reason.key, 'nothing')
  await assert.rejects(l.acquire({ autoExtend: 'yes' }), /Lock\.acquire: options\.autoExtend must be true or false, got a string/)
  await assert.rejects(l.run(() => 1, { autoExtend: 1 }), TypeError)
})

test('the signal is the channel: work given l.signal stops when the lock is lost, nothing throws elsewhere', async () => {
  setLockStore(new MemoryLockStore())
  const unhandled = []
  const onUnhandled = (e) => unhandled.push(e)
  process.on('unhandledRejection', onUnhandled)
  try {
    const started = performance.now()
    await assert.rejects(
      lock('long-job', 150).run((l) => sleep(5_000, 'done', { signal: l.signal })),
      (e) => e.name === 'AbortError' && e.cause instanceof LockNotHeldError,
    )
    const took = performance.now() - started
    assert.ok(took < 1_000, `stopped after ${took} ms`)
    // autoExtend against a store whose extend fails: the failure is the signal, not a rejection.
    const memory = new MemoryLockStore()
    setLockStore(
      jsStoreOver(memory, {
        extend: async () => {
          throw new Error('store down')
        },
      }),
    )
    const l = lock('flaky', 150)
    assert.equal(await l.acquire({ autoExtend: true }), true)
    await abortedAt(l.signal, performance.now(), 2_000)
    await sleep(100)
    assert.deepEqual(unhandled, [])
  } finally {
    process.off('unhandledRejection', onUnhandled)
  }
})

test('a held lock with autoExtend does not keep the process alive', async () => {
  const script = `
    const { lock } = require('@shaferllc/keel/core');
    lock('held-forever', 300).acquire({ autoExtend: true }).then((ok) => {
      const { signal } = lock('other', 300);
      console.log(ok);
    });`
  const started = Date.now()
  const { stdout } = await exec(process.execPath, ['-e', script], { timeout: 10_000 })
  assert.equal(stdout, 'true\n')
  assert.ok(Date.now() - started < 3_000)
})
