// LockNotHeldError is a real Error subclass, whoever throws it. The error
// codes are the addon's one list (src/error.rs), and the public typing and the
// docs list exactly those.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { lock, LockNotHeldError, LockStoreError } from '@shaferllc/keel/core'
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const cjs = require('@shaferllc/keel/core')
const { ErrorCode } = require('../../lib/native.js')
const read = (path) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8')

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

test("the addon's error codes are ERR_LOCK_ codes, each once", () => {
  const codes = Object.values(ErrorCode)
  assert.ok(codes.length > 0)
  for (const code of codes) assert.match(code, /^ERR_LOCK_[A-Z_]+$/)
  assert.equal(new Set(codes).size, codes.length)
  assert.equal(new LockStoreError('no code given').code, ErrorCode.Internal)
})

test("index.d.ts's LockStoreErrorCode lists the addon's codes, in its order", () => {
  const union = read('index.d.ts').match(/export type LockStoreErrorCode =([^;]*?)(?:\n\n|;)/)
  assert.ok(union, 'index.d.ts declares LockStoreErrorCode')
  const listed = [...union[1].matchAll(/'([A-Z_]+)'/g)].map((m) => m[1])
  assert.deepEqual(listed, Object.values(ErrorCode))
})

test("docs/errors.md's table of codes lists the addon's codes, in its order", () => {
  const section = read('docs/errors.md').split('\n## Codes and what to do\n')[1]?.split('\n## ')[0]
  assert.ok(section, 'docs/errors.md has a "Codes and what to do" section')
  const listed = [...section.matchAll(/^\| `(ERR_[A-Z_]+)` \|/gm)].map((m) => m[1])
  assert.deepEqual(listed, Object.values(ErrorCode))
})
