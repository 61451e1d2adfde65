// LockNotHeldError is a real Error subclass, whoever throws it.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { lock, LockNotHeldError } from '@shaferllc/keel/core'
import { createRequire } from 'node:module'

const cjs = createRequire(import.meta.url)('@shaferllc/keel/core')

test('errors thrown by extend() are LockNotHeldError instances with name, key, message and stack', async () => {
  const key = 'invoice:42'
  let caught
  try {
    await lock(key).extend()
  } catch (e) {
    caught = e
  }
  assert.ok(caught instanceof LockNotHeldError)
  assert.ok(caught instanceof Error)
  assert.equal(caught.name, 'LockNotHeldError')
  assert.equal(caught.key, key)
  assert.ok(caught.message.includes(key))
  assert.equal(typeof caught.stack, 'string')
  assert.ok(caught.stack.startsWith('LockNotHeldError: '))
  assert.equal(Object.prototype.toString.call(caught), '[object Error]')
  assert.equal(cjs.LockNotHeldError, LockNotHeldError, 'one class for import and require')
})

test('LockNotHeldError can be constructed (with or without a key) and caught by users', () => {
  const e = new LockNotHeldError('k')
  assert.equal(e.name, 'LockNotHeldError')
  assert.equal(e.key, 'k')
  assert.ok(e instanceof Error)
  const bare = new LockNotHeldError()
  assert.equal(bare.key, '')
  assert.equal(bare.name, 'LockNotHeldError')
  assert.match(bare.message, /^The lock is not held by this owner/)
})

test('a very long key is shortened in the message but kept whole in .key', async () => {
  const key = 'k'.repeat(10_000)
  await assert.rejects(lock(key).extend(), (e) => e.key === key && e.message.length < 400)
})
