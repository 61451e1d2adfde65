// MemoryLockStore, the default store, keeps to the whole store contract
// (../contract.mjs). It is in-process: it lets go exactly when the lock's own
// clock says so, it keeps each hold's fencing token (a restored handle finds
// it), and no other process can open it.
import { MemoryLockStore } from '@shaferllc/keel/core'
import { storeContract } from '../contract.mjs'

storeContract('MemoryLockStore', {
  open: async () => ({ store: new MemoryLockStore(), close() {} }),
  fencing: true,
  fencingByOwner: true,
  expiresExactly: true,
  anyKey: true,
  semaphores: 'native',
  readWrite: true,
})
