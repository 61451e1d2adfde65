// serialize() / restoreLock(): the TypeScript Keel format, both ways.
import { test, beforeEach } from 'node:test'
import assert from 'node:assert/strict'
import { lock, restoreLock, setLockStore, MemoryLockStore, LockNotHeldError } from '@shaferllc/keel/core'

beforeEach(() => setLockStore(new MemoryLockStore()))

test('serialize() writes {"key","ttlMs","owner"} in that order', async () => {
  const l = lock('import:99', 60_000)
  await l.acquire()
  const text = l.serialize()
  const { owner } = JSON.parse(text)
  assert.equal(text, `{"key":"import:99","ttlMs":60000,"owner":"${owner}"}`)
  assert.match(owner, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
})

test('an unheld lock serializes without an owner, as the TypeScript lock does', () => {
  assert.equal(lock('k', 1000).serialize(), '{"key":"k","ttlMs":1000}')
})

test('the handoff: one handle acquires, a restored one extends and releases', async () => {
  const a = lock('import:99', 60_000)
  await a.acquire()
  const b = restoreLock(a.serialize())
  assert.equal(b.key, 'import:99')
  assert.equal(b.ttlMs, 60_000)
  await b.extend(60_000)
  assert.equal(await b.isExpired(), false)
  assert.equal(await b.release(), true)
  assert.equal(await lock('import:99').isLocked(), false)
  assert.equal(await a.release(), false, 'the original handle no longer owns it')
})

test('a lock serialized by the TypeScript Keel lock restores here', async () => {
  // The TypeScript lock writes JSON.stringify({ key, ttlMs, owner }) with an
  // owner from crypto.randomUUID(); simulate that process holding the lock in
  // the shared store, then take over its serialized form.
  const owner = crypto.randomUUID()
  const store = new MemoryLockStore()
  setLockStore(store)
  assert.equal(await store.acquire('invoice:7', owner, 60_000), true)
  const fromTypeScript = JSON.stringify({ key: 'invoice:7', ttlMs: 60_000, owner })

  const l = restoreLock(fromTypeScript)
  await l.extend()
  assert.equal(await l.release(), true)
  assert.equal(await store.isLocked('invoice:7'), false)
})

test('a lock serialized here restores in the TypeScript Keel lock', async () => {
  const l = lock('invoice:8', 45_000)
  await l.acquire()
  // The TypeScript lock's restoreLock is JSON.parse plus { key, ttlMs, owner }.
  const { key, ttlMs, owner } = JSON.parse(l.serialize())
  assert.deepEqual(Object.keys(JSON.parse(l.serialize())), ['key', 'ttlMs', 'owner'])
  assert.equal(key, 'invoice:8')
  assert.equal(ttlMs, 45_000)
  assert.equal(typeof owner, 'string')
  assert.equal(await l.store.release(key, owner), true, 'the store accepts the serialized owner as the holder')
})

test('restoring an unheld serialization gives an unheld lock', async () => {
  const l = restoreLock('{"key":"k","ttlMs":1000}')
  assert.equal(await l.release(), false)
  await assert.rejects(l.extend(), LockNotHeldError)
  assert.equal(await l.acquire(), true)
  await l.release()
})

test('a restored lock with a stale owner cannot release the current holder', async () => {
  const stale = restoreLock(JSON.stringify({ key: 'k', ttlMs: 1000, owner: crypto.randomUUID() }))
  const holder = lock('k')
  await holder.acquire()
  assert.equal(await stale.release(), false)
  await assert.rejects(stale.extend(), LockNotHeldError)
  assert.equal(await holder.isExpired(), false)
  assert.equal(await holder.release(), true)
})

test('keys with quotes, backslashes, control characters and emoji round-trip', async () => {
  for (const key of ['a"b', 'c\\d', 'line\nbreak\t\u0001', '😀 lock', '']) {
    const l = lock(key, 1234)
    await l.acquire()
    const text = l.serialize()
    assert.equal(text, JSON.stringify({ key, ttlMs: 1234, owner: JSON.parse(text).owner }))
    const r = restoreLock(text)
    assert.equal(r.key, key)
    assert.equal(await r.release(), true)
  }
})

test('restoreLock ignores fields it does not know and accepts owner: null', () => {
  assert.equal(restoreLock('{"key":"k","ttlMs":5,"owner":null,"extra":[1]}').serialize(), '{"key":"k","ttlMs":5}')
})

test('restoreLock refuses a raw lone surrogate instead of silently changing the key', () => {
  assert.throws(() => restoreLock('{"key":"\ud800","ttlMs":5}'), TypeError)
  assert.throws(() => restoreLock(`{"key":"k","ttlMs":5,"owner":"\udc00"}`), TypeError)
})

test('valid JSON whose key or owner escapes a lone surrogate: the error names the field, not the JSON', () => {
  for (const [text, field] of [
    ['{"key":"\\ud800","ttlMs":1}', 'serialized key'],
    ['{"key":"k","ttlMs":1,"owner":"\\udc00"}', 'serialized owner'],
  ]) {
    JSON.parse(text) // valid JSON
    assert.throws(
      () => restoreLock(text),
      (e) => e instanceof TypeError && e.message === `restoreLock: ${field} must be well-formed Unicode, but it contains a lone surrogate`,
      text,
    )
  }
  assert.throws(() => restoreLock('{"key":"k",'), /not valid JSON/)
})
