// A second test file, so each pool runs more than one file (and, for
// "threads", loads the addon in more than one worker thread and tears them down).
import { beforeEach, expect, test } from 'vitest'
import { lock, setLockStore, getLockStore, MemoryLockStore } from '@shaferllc/keel/core'

beforeEach(() => setLockStore(new MemoryLockStore()))

test('locks from another file never reach this one', async () => {
  expect(await getLockStore().isLocked('leaky')).toBe(false)
  expect(await getLockStore().isLocked('busy')).toBe(false)
})

test('many callers, one holder at a time', async () => {
  let inside = 0
  let most = 0
  const results = await Promise.all(
    Array.from({ length: 20 }, () =>
      lock('shared').run(
        async () => {
          inside++
          most = Math.max(most, inside)
          await new Promise((resolve) => setTimeout(resolve, 1))
          inside--
        },
        { timeout: 5_000 },
      ),
    ),
  )
  expect(results.every(([ran]) => ran)).toBe(true)
  expect(most).toBe(1)
})
