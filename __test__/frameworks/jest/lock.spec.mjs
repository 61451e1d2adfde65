// The same pattern from an ES module test file (Jest's ESM support, run with
// --experimental-vm-modules): the package's `import` entry in Jest's sandbox.
import { jest } from '@jest/globals'
import { lock, setLockStore, getLockStore, MemoryLockStore, LockNotHeldError } from '@shaferllc/keel/core'

beforeEach(() => setLockStore(new MemoryLockStore()))

test('a test that leaves a lock held...', async () => {
  expect(await lock('leaky', 60_000).acquire()).toBe(true)
})

test('...does not leak it into the next test', async () => {
  expect(await getLockStore().isLocked('leaky')).toBe(false)
})

test('extend() of a lock never acquired rejects with LockNotHeldError', async () => {
  const l = lock('never-taken')
  await expect(l.extend()).rejects.toBeInstanceOf(LockNotHeldError)
})

test('TypeErrors for bad input are the sandbox TypeError', () => {
  expect(() => lock(42)).toThrow(TypeError)
})

test('under fake timers the TTL is real time, and waiting follows the fake clock', async () => {
  jest.useFakeTimers()
  try {
    const l = lock('ttl', 200)
    expect(await l.acquire()).toBe(true)
    await jest.advanceTimersByTimeAsync(60_000)
    expect(await l.isLocked()).toBe(true)
    const waiting = lock('ttl').acquire({ timeout: 1_000 })
    await jest.advanceTimersByTimeAsync(1_000)
    await expect(waiting).resolves.toBe(false)
  } finally {
    jest.useRealTimers()
  }
})
