// How the kinds' tests register: the checks every store passes once per
// store, each suite with a fresh store as the default, then the checks only
// MemoryLockStore passes (fencing tokens, its exact expiry).
import { describe, beforeEach } from 'node:test'
import { setLockStore, MemoryLockStore } from '@shaferllc/keel/core'

/**
 * @param {[name: string, make: () => object][]} stores
 * @param {() => void} everyStore
 * @param {() => void} memoryOnly
 */
export function onStores(stores, everyStore, memoryOnly) {
  for (const [name, makeStore] of [['MemoryLockStore', () => new MemoryLockStore()], ...stores]) {
    describe(`on ${name}`, () => {
      beforeEach(() => setLockStore(makeStore()))
      everyStore()
    })
  }
  describe('on MemoryLockStore only', () => {
    beforeEach(() => setLockStore(new MemoryLockStore()))
    memoryOnly()
  })
}
