// A store written in plain JS, a class over a Map whose methods are async,
// keeps to the whole store contract (../contract.mjs) through the path every
// user-written store takes. It gives no fencing tokens: it has no
// fencingToken method.
import { storeContract } from '../contract.mjs'
import { AsyncMapLockStore } from '../../helpers/js-stores.mjs'

storeContract('a JS store with async methods, over a Map', {
  async open() {
    const store = new AsyncMapLockStore()
    return { store, close() {}, deleteKey: (key) => store.held.delete(key) }
  },
  anyKey: true,
})
