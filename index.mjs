// ESM entry: the same module instance as `require("@shaferllc/keel/core")`, so a
// program that mixes import and require shares one default store.
import core from './index.js'

export const {
  lock,
  semaphore,
  readLock,
  writeLock,
  restoreLock,
  setLockStore,
  getLockStore,
  Lock,
  MemoryLockStore,
  RedisLockStore,
  PostgresLockStore,
  MySqlLockStore,
  LockNotHeldError,
  LockStoreError,
  verifyLockStore,
  channels,
} = core
