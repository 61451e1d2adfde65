// The docs' testing pattern under Jest, CommonJS: a fresh MemoryLockStore per
// test, nothing leaking between tests, LockNotHeldError caught inside Jest's
// sandbox, errors that are instances of the sandbox's own classes, and the
// lock's clocks under fake timers (the TTL is real time, and so are autoExtend's
// renewals; waiting follows the fake clock).
const { lock, setLockStore, getLockStore, MemoryLockStore, RedisLockStore, LockNotHeldError, LockStoreError, restoreLock } =
  require('@shaferllc/keel/core')
// The real clock, taken before any test fakes it.
const { setTimeout: realSetTimeout } = require('node:timers')
const realSleep = (ms) => new Promise((resolve) => realSetTimeout(resolve, ms))

beforeEach(() => setLockStore(new MemoryLockStore()))

describe('one fresh store per test', () => {
  test('a test that leaves a lock held...', async () => {
    expect(await lock('leaky', 60_000).acquire()).toBe(true)
  })

  test('...does not leak it into the next test', async () => {
    expect(await getLockStore().isLocked('leaky')).toBe(false)
    const [ran, value] = await lock('leaky').run(async () => 42)
    expect(ran).toBe(true)
    expect(value).toBe(42)
  })
})

test('extend() of a lock never acquired rejects with LockNotHeldError', async () => {
  const l = lock('never-taken')
  await expect(l.extend()).rejects.toBeInstanceOf(LockNotHeldError)
  await expect(l.extend()).rejects.toThrow(LockNotHeldError)
  await expect(l.extend()).rejects.toBeInstanceOf(Error)
})

test('errors are instances of the classes this test sees, whoever raised them', async () => {
  expect(() => lock(42)).toThrow(TypeError)
  expect(() => restoreLock('{"not":"a lock"}')).toThrow(TypeError)
  expect(() => new RedisLockStore({ url: 'redis://x', tls: { ca: 'x' } })).toThrow(TypeError)
  expect(() => new RedisLockStore('http://not-redis')).toThrow(TypeError)
  const badStore = {
    acquire: async () => 'yes',
    release: async () => true,
    extend: async () => true,
    isLocked: async () => false,
    remainingTime: async () => null,
  }
  setLockStore(badStore)
  await expect(lock('k').acquire()).rejects.toBeInstanceOf(TypeError)
  const unreachable = new RedisLockStore({ url: 'redis://127.0.0.1:1', connectTimeout: 100, commandTimeout: 100 })
  setLockStore(unreachable)
  await expect(lock('k').acquire()).rejects.toBeInstanceOf(Error)
  await expect(lock('k').acquire()).rejects.toMatchObject({ code: 'ERR_LOCK_STORE_CONNECTION' })
  await expect(lock('k').acquire()).rejects.toBeInstanceOf(LockStoreError)
  const inTheSandbox = async function callerInTheSandbox() {
    await unreachable.isLocked('k')
  }
  await expect(inTheSandbox()).rejects.toThrow(LockStoreError)
  await expect(inTheSandbox()).rejects.toMatchObject({ stack: expect.stringMatching(/at (async )?callerInTheSandbox /) })
  await unreachable.close()
})

describe('under fake timers', () => {
  beforeEach(() => jest.useFakeTimers())
  afterEach(() => jest.useRealTimers())

  test('a TTL is real time: advancing the fake clock does not expire a lock', async () => {
    const l = lock('ttl', 200)
    expect(await l.acquire()).toBe(true)
    await jest.advanceTimersByTimeAsync(60_000)
    expect(await l.isLocked()).toBe(true)
    expect(await l.release()).toBe(true)
  })

  test('waiting follows the fake clock: a waiter gives up once the clock passes its timeout', async () => {
    await getLockStore().acquire('busy', 'someone else', 60_000)
    let settled = false
    const waiting = lock('busy')
      .acquire({ timeout: 5_000 })
      .finally(() => (settled = true))
    await jest.advanceTimersByTimeAsync(4_000)
    expect(settled).toBe(false)
    await jest.advanceTimersByTimeAsync(1_000)
    await expect(waiting).resolves.toBe(false)
  })

  test('autoExtend renews on the real clock: a 100 ms lock stays held across 500 ms the fake clock never sees', async () => {
    const l = lock('renewed', 100)
    expect(await l.acquire({ autoExtend: true })).toBe(true)
    await realSleep(500)
    expect(await l.isExpired()).toBe(false)
    expect(l.signal.aborted).toBe(false)
    expect(await lock('renewed').acquireImmediately()).toBe(false)
    expect(await l.release()).toBe(true)
  })

  test('a release hands the lock to a waiter without any clock moving', async () => {
    const holder = lock('handoff')
    expect(await holder.acquire()).toBe(true)
    const waiting = lock('handoff').acquire({ timeout: 5_000 })
    expect(await holder.release()).toBe(true)
    await expect(waiting).resolves.toBe(true)
  })
})

test('the module can be loaded again (jest.resetModules) and still works', async () => {
  jest.resetModules()
  const again = require('@shaferllc/keel/core')
  expect(again.lock).not.toBe(lock)
  again.setLockStore(new again.MemoryLockStore())
  const [ran] = await again.lock('reloaded').run(async () => {
    await expect(again.lock('reloaded').acquire()).resolves.toBe(false)
  })
  expect(ran).toBe(true)
  await expect(again.lock('x').extend()).rejects.toBeInstanceOf(again.LockNotHeldError)
})
