// The docs' testing pattern under Vitest, written in TypeScript, run with
// pool "threads" (worker_threads) and pool "forks" (child processes): a fresh
// MemoryLockStore per test, nothing leaking between tests, LockNotHeldError
// caught with `rejects.toBeInstanceOf`, a store written as a TypeScript class,
// and the lock's clocks under vi.useFakeTimers() (the TTL is real time, and
// so are autoExtend's renewals; waiting follows the fake clock).
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest'
import {
  lock,
  setLockStore,
  getLockStore,
  MemoryLockStore,
  LockNotHeldError,
  verifyLockStore,
  type LockStore,
} from '@shaferllc/keel/core'

// The real clock, taken before any test fakes it.
const realSetTimeout = setTimeout
const realSleep = (ms: number) => new Promise<void>((resolve) => realSetTimeout(resolve, ms))

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
  await expect(l.extend()).rejects.toThrow(/not held/)
})

test('bad input is a TypeError naming the argument', () => {
  // @ts-expect-error a key is a string
  expect(() => lock(42)).toThrow(TypeError)
  expect(() => lock('k', -1)).toThrow(/ttlMs/)
})

/** A store written in TypeScript, as the docs' "Writing a store" describes. */
class MapStore implements LockStore {
  readonly held = new Map<string, { owner: string; until: number }>()
  async acquire(key: string, owner: string, ttlMs: number): Promise<boolean> {
    const entry = this.held.get(key)
    if (entry && entry.until > Date.now()) return false
    this.held.set(key, { owner, until: Date.now() + ttlMs })
    return true
  }
  async release(key: string, owner: string): Promise<boolean> {
    if (this.held.get(key)?.owner !== owner) return false
    return this.held.delete(key)
  }
  async extend(key: string, owner: string, ttlMs: number): Promise<boolean> {
    const entry = this.held.get(key)
    if (entry?.owner !== owner || entry.until <= Date.now()) return false
    entry.until = Date.now() + ttlMs
    return true
  }
  async isLocked(key: string): Promise<boolean> {
    return (this.held.get(key)?.until ?? 0) > Date.now()
  }
  async remainingTime(key: string): Promise<number | null> {
    const left = (this.held.get(key)?.until ?? 0) - Date.now()
    return left > 0 ? left : null
  }
}

test('a TypeScript class store: run() infers its result type and excludes a second caller', async () => {
  const store = setLockStore(new MapStore())
  const [ran, total] = await lock('invoice:42').run(async () => {
    expect(await lock('invoice:42').acquire()).toBe(false)
    return 1 + 1
  })
  expect(ran).toBe(true)
  const sum: number | undefined = total
  expect(sum).toBe(2)
  expect(store.held.size).toBe(0)
})

test('the store passes verifyLockStore (the check in "Writing a store")', async () => {
  const report = await verifyLockStore(new MapStore())
  expect(report.checks.filter((check) => !check.ok)).toEqual([])
  expect(report.ok).toBe(true)
})

describe('under fake timers', () => {
  beforeEach(() => {
    vi.useFakeTimers()
  })
  afterEach(() => {
    vi.useRealTimers()
  })

  test('a TTL is real time: advancing the fake clock does not expire a lock', async () => {
    const l = lock('ttl', 200)
    expect(await l.acquire()).toBe(true)
    await vi.advanceTimersByTimeAsync(60_000)
    expect(await l.isLocked()).toBe(true)
    expect(await l.release()).toBe(true)
  })

  test('waiting follows the fake clock: a waiter gives up once the clock passes its timeout', async () => {
    await getLockStore().acquire('busy', 'someone else', 60_000)
    let settled = false
    const waiting = lock('busy')
      .acquire({ timeout: 5_000 })
      .finally(() => (settled = true))
    await vi.advanceTimersByTimeAsync(4_000)
    expect(settled).toBe(false)
    await vi.advanceTimersByTimeAsync(1_000)
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
