// Stores written in JS, for the tests. The lock calls a JS store's methods
// itself (through the path every user-written store takes), so these are how
// the tests reach that path: a store over a Map, answering plain values or
// promises, and a store that passes each call on to another except the
// methods a test replaces.

/**
 * A LockStore over a Map, answering plain values (not promises). `held` maps
 * each key to `{ owner, expiresAt }`; `calls` lists every call as
 * `[method, ...args]`, in order. The methods live on the prototype and reach
 * the store's state through `this` (a private field too), so a call made with
 * any other `this` throws. `now` is the store's clock in milliseconds:
 * `() => 0` stops time, so nothing expires and remainingTime() answers exactly
 * the TTL last given.
 */
export class MapLockStore {
  held = new Map()
  calls = []
  #now

  constructor({ now = Date.now } = {}) {
    this.#now = now
  }

  /** The live entry for `key`, or undefined; an expired one is dropped on the way. */
  entry(key) {
    const entry = this.held.get(key)
    if (entry && entry.expiresAt <= this.#now()) this.held.delete(key)
    return this.held.get(key)
  }

  acquire(key, owner, ttlMs) {
    this.calls.push(['acquire', key, owner, ttlMs])
    if (this.entry(key)) return false
    this.held.set(key, { owner, expiresAt: this.#now() + ttlMs })
    return true
  }

  release(key, owner) {
    this.calls.push(['release', key, owner])
    if (this.entry(key)?.owner !== owner) return false
    return this.held.delete(key)
  }

  extend(key, owner, ttlMs) {
    this.calls.push(['extend', key, owner, ttlMs])
    const entry = this.entry(key)
    if (entry?.owner !== owner) return false
    entry.expiresAt = this.#now() + ttlMs
    return true
  }

  isLocked(key) {
    this.calls.push(['isLocked', key])
    return this.entry(key) !== undefined
  }

  remainingTime(key) {
    this.calls.push(['remainingTime', key])
    const entry = this.entry(key)
    return entry ? entry.expiresAt - this.#now() : null
  }
}

/** The same store as a class with async methods, answering promises as a networked store does. */
export class AsyncMapLockStore extends MapLockStore {
  async acquire(key, owner, ttlMs) {
    return super.acquire(key, owner, ttlMs)
  }

  async release(key, owner) {
    return super.release(key, owner)
  }

  async extend(key, owner, ttlMs) {
    return super.extend(key, owner, ttlMs)
  }

  async isLocked(key) {
    return super.isLocked(key)
  }

  async remainingTime(key) {
    return super.remainingTime(key)
  }
}

/**
 * A JS store (so the lock calls its methods, not the addon's) that passes
 * each call on to `inner`, except the methods given in `overrides`. Its
 * methods are own properties, so a test may also swap one afterwards.
 */
export function jsStoreOver(inner, overrides = {}) {
  return {
    acquire: (k, o, t) => inner.acquire(k, o, t),
    release: (k, o) => inner.release(k, o),
    extend: (k, o, t) => inner.extend(k, o, t),
    isLocked: (k) => inner.isLocked(k),
    remainingTime: (k) => inner.remainingTime(k),
    ...overrides,
  }
}
