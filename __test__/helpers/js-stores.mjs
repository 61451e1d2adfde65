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

  /** The store's clock, in ms. */
  clock() {
    return this.#now()
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
 * MapLockStore with the eight read-write methods a store opts into, over a
 * Map of its own: `groups` maps each key to `{ readers: Map<owner, expiresAt>,
 * writer: { owner, expiresAt } | null, waitingUntil }`. Plain values, as the
 * base class answers.
 */
export class MapReadWriteStore extends MapLockStore {
  groups = new Map()

  /** `key`'s group, lapsed holds and mark dropped. */
  group(key) {
    const now = this.clock()
    let group = this.groups.get(key)
    if (group === undefined) this.groups.set(key, (group = { readers: new Map(), writer: null, waitingUntil: 0 }))
    for (const [owner, expiresAt] of group.readers) if (expiresAt <= now) group.readers.delete(owner)
    if (group.writer !== null && group.writer.expiresAt <= now) group.writer = null
    if (group.waitingUntil <= now) group.waitingUntil = 0
    return group
  }

  acquireRead(key, owner, ttlMs) {
    this.calls.push(['acquireRead', key, owner, ttlMs])
    const group = this.group(key)
    if (group.writer !== null || group.waitingUntil > 0) return false
    group.readers.set(owner, this.clock() + ttlMs)
    return true
  }

  acquireWrite(key, owner, ttlMs) {
    this.calls.push(['acquireWrite', key, owner, ttlMs])
    const group = this.group(key)
    const expiresAt = this.clock() + ttlMs
    if (group.writer?.owner === owner || (group.writer === null && group.readers.size === 0)) {
      group.writer = { owner, expiresAt }
      group.waitingUntil = 0
      return true
    }
    group.waitingUntil = Math.max(group.waitingUntil, expiresAt)
    return false
  }

  releaseHold(key, owner) {
    this.calls.push(['releaseHold', key, owner])
    const group = this.group(key)
    if (group.writer?.owner !== owner) return group.readers.delete(owner)
    group.writer = null
    return true
  }

  extendHold(key, owner, ttlMs) {
    this.calls.push(['extendHold', key, owner, ttlMs])
    const group = this.group(key)
    const expiresAt = this.clock() + ttlMs
    if (group.writer?.owner === owner) group.writer.expiresAt = expiresAt
    else if (group.readers.has(owner)) group.readers.set(owner, expiresAt)
    else return false
    return true
  }

  holdRemaining(key, owner) {
    this.calls.push(['holdRemaining', key, owner])
    const group = this.group(key)
    const expiresAt = group.writer?.owner === owner ? group.writer.expiresAt : group.readers.get(owner)
    return expiresAt === undefined ? null : expiresAt - this.clock()
  }

  holders(key) {
    this.calls.push(['holders', key])
    const group = this.group(key)
    return group.readers.size + (group.writer === null ? 0 : 1)
  }

  readersWait(key) {
    this.calls.push(['readersWait', key])
    const group = this.group(key)
    return group.writer !== null || group.waitingUntil > 0
  }

  withdrawWriter(key) {
    this.calls.push(['withdrawWriter', key])
    this.group(key).waitingUntil = 0
  }
}

/** MapReadWriteStore answering promises, as a networked store does. */
export class AsyncMapReadWriteStore extends MapReadWriteStore {}
for (const name of ['acquire', 'release', 'extend', 'isLocked', 'remainingTime', 'acquireRead', 'acquireWrite', 'releaseHold', 'extendHold', 'holdRemaining', 'holders', 'readersWait', 'withdrawWriter']) {
  const method = MapReadWriteStore.prototype[name]
  Object.defineProperty(AsyncMapReadWriteStore.prototype, name, {
    async value(...args) {
      return method.apply(this, args)
    },
    writable: true,
  })
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
