// A store written in plain JS whose methods answer plain values, not
// promises (the lock calls it directly on the JS thread, and from its own
// thread when a waiter retries), keeps to the whole store contract
// (../contract.mjs).
import { storeContract } from '../contract.mjs'
import { MapLockStore } from '../../helpers/js-stores.mjs'

storeContract('a JS store answering plain values, over a Map', {
  async open() {
    const store = new MapLockStore()
    return { store, close() {}, deleteKey: (key) => store.held.delete(key) }
  },
  anyKey: true,
})
