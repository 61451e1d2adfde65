// Bad input fails at once with a TypeError or RangeError that names the
// argument, before any store call is made.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { lock, restoreLock, setLockStore, getLockStore, MemoryLockStore } from '@shaferllc/keel/core'
import { AsyncMapLockStore } from '../helpers/js-stores.mjs'

/** The methods a recording store was called with, in order: bad input must never reach one. */
const methodsCalled = (store) => store.calls.map(([method]) => method)

const error = (Type, ...words) => (e) => {
  assert.ok(e instanceof Type, `expected ${Type.name}, got ${e?.constructor?.name}: ${e?.message}`)
  for (const w of words) assert.ok(e.message.includes(w), `"${e.message}" should mention ${w}`)
  return true
}

test('lock() needs a string key', () => {
  for (const key of [42, undefined, null, {}, Symbol('k'), ['k'], 1n]) {
    assert.throws(() => lock(key), error(TypeError, 'key', 'string'))
  }
  assert.throws(() => lock('\ud800'), error(TypeError, 'key', 'Unicode'))
})

test('lock() needs a positive finite TTL', () => {
  for (const ttl of [0, -1, -0, NaN, Infinity, -Infinity, 2 ** 60]) {
    assert.throws(() => lock('k', ttl), error(RangeError, 'ttlMs'), `ttl ${ttl}`)
  }
  for (const ttl of ['1000', null, {}, true, 10n]) {
    assert.throws(() => lock('k', ttl), error(TypeError, 'ttlMs'), `ttl ${String(ttl)}`)
  }
  assert.equal(lock('k', 0.5).ttlMs, 0.5)
})

test('timeout and retryDelay must be finite non-negative numbers', async () => {
  const store = setLockStore(new AsyncMapLockStore())
  const l = lock('k')
  for (const name of ['timeout', 'retryDelay']) {
    for (const bad of [-1, NaN, Infinity]) {
      await assert.rejects(l.acquire({ [name]: bad }), error(RangeError, `options.${name}`))
      await assert.rejects(l.run(() => {}, { [name]: bad }), error(RangeError, `options.${name}`))
    }
    for (const bad of ['5', null, {}, true]) {
      await assert.rejects(l.acquire({ [name]: bad }), error(TypeError, `options.${name}`))
    }
  }
  await assert.rejects(l.acquire(5), error(TypeError, 'options'))
  await assert.rejects(l.acquire('fast'), error(TypeError, 'options'))
  assert.deepEqual(methodsCalled(store), [], 'no store call was made')
  assert.equal(await l.acquire({ timeout: 0, retryDelay: 0 }), true)
  assert.deepEqual(methodsCalled(store), ['acquire'])
  setLockStore(new MemoryLockStore())
})

test('a misspelt option is a TypeError naming it, not a silent default', async () => {
  const store = setLockStore(new AsyncMapLockStore())
  const l = lock('k')
  for (const options of [{ timeot: 1_000 }, { timeout: 5, retrydelay: 5 }, { autoextend: true }, { abortSignal: new AbortController().signal }]) {
    const name = Object.keys(options).find((k) => !['timeout', 'retryDelay', 'autoExtend'].includes(k))
    await assert.rejects(l.run(() => {}, options), error(TypeError, 'Lock.run', `unknown option "${name}"`, 'timeout, retryDelay, autoExtend, signal'))
    await assert.rejects(l.acquire(options), error(TypeError, 'Lock.acquire', `unknown option "${name}"`))
  }
  assert.deepEqual(methodsCalled(store), [], 'no store call was made')
  setLockStore(new MemoryLockStore())
})

test('options.signal must be an AbortSignal, checked before any store call', async () => {
  const store = setLockStore(new AsyncMapLockStore())
  const l = lock('k')
  for (const bad of [null, 'abort', 1, {}, { aborted: false }, new AbortController(), new EventTarget()]) {
    await assert.rejects(l.acquire({ timeout: 100, signal: bad }), error(TypeError, 'Lock.acquire', 'options.signal', 'AbortSignal'))
    await assert.rejects(l.run(() => {}, { signal: bad }), error(TypeError, 'Lock.run', 'options.signal', 'AbortSignal'))
  }
  assert.deepEqual(methodsCalled(store), [], 'no store call was made')
  // undefined is no signal; a real one is taken
  assert.equal(await l.acquire({ signal: undefined }), true)
  assert.equal(await lock('k2').acquire({ signal: new AbortController().signal }), true)
  assert.equal(await lock('k3').acquire({ signal: AbortSignal.timeout(10_000) }), true)
  setLockStore(new MemoryLockStore())
})

test('run() needs a function, checked before the lock is taken', async () => {
  const store = setLockStore(new AsyncMapLockStore())
  for (const fn of [undefined, null, 'fn', 42, {}]) {
    await assert.rejects(lock('k').run(fn), error(TypeError, 'fn', 'function'))
    await assert.rejects(lock('k').runImmediately(fn), error(TypeError, 'fn'))
  }
  assert.deepEqual(methodsCalled(store), [])
  setLockStore(new MemoryLockStore())
})

test('extend() checks its TTL', async () => {
  const l = lock('k')
  await l.acquire()
  await assert.rejects(l.extend(0), error(RangeError, 'ttlMs'))
  await assert.rejects(l.extend('60s'), error(TypeError, 'ttlMs'))
  await l.extend(1_000)
  await l.release()
})

test('setLockStore() needs all five store methods, naming the missing ones', () => {
  const before = getLockStore()
  const full = {
    acquire() {},
    release() {},
    extend() {},
    isLocked() {},
    remainingTime() {},
  }
  for (const method of Object.keys(full)) {
    const partial = { ...full }
    delete partial[method]
    assert.throws(() => setLockStore(partial), error(TypeError, method))
    assert.throws(() => setLockStore({ ...full, [method]: 'not a function' }), error(TypeError, method))
  }
  assert.throws(() => setLockStore({}), error(TypeError, 'acquire, release, extend, isLocked, remainingTime'))
  for (const bad of [undefined, null, 42, 'redis']) {
    assert.throws(() => setLockStore(bad), error(TypeError, 'store'))
  }
  assert.equal(getLockStore(), before, 'a rejected store is not installed')
})

test('restoreLock() of anything malformed throws a TypeError', () => {
  const malformed = [
    '',
    '{',
    'null',
    '[]',
    '"string"',
    '{}',
    '{"key":1,"ttlMs":1}',
    '{"key":"k"}',
    '{"key":"k","ttlMs":"30000"}',
    '{"key":"k","ttlMs":0}',
    '{"key":"k","ttlMs":-1}',
    '{"key":"k","ttlMs":1e999}',
    '{"key":"k","ttlMs":30000,"owner":5}',
    '{"key":"k","ttlMs":30000,"owner":""}',
    '{"key":"\\ud800","ttlMs":30000}',
    '{"key":"k","ttlMs":30000,"owner":"a"} trailing',
  ]
  for (const s of malformed) assert.throws(() => restoreLock(s), error(TypeError, 'restoreLock'), s)
  for (const bad of [undefined, null, 42, {}, { key: 'k', ttlMs: 1 }]) {
    assert.throws(() => restoreLock(bad), error(TypeError, 'serialized'))
  }
})

test('MemoryLockStore used directly checks its arguments too', async () => {
  const store = new MemoryLockStore()
  await assert.rejects(store.acquire(1, 'o', 1000), error(TypeError, 'key'))
  await assert.rejects(store.acquire('k', 7, 1000), error(TypeError, 'owner'))
  await assert.rejects(store.acquire('k', '', 1000), error(TypeError, 'owner'))
  await assert.rejects(store.acquire('k', 'o', -5), error(RangeError, 'ttlMs'))
  await assert.rejects(store.extend('k', 'o', NaN), error(RangeError, 'ttlMs'))
  await assert.rejects(store.release('k'), error(TypeError, 'owner'))
  await assert.rejects(store.isLocked(), error(TypeError, 'key'))
  await assert.rejects(store.remainingTime(null), error(TypeError, 'key'))
})
