// The in-run baseline: the documented lock algorithm written in plain JS, as
// a Node developer would write it without this package. A fresh owner from
// crypto.randomUUID() per acquisition, set-if-absent, compare-and-delete, and
// waiting by polling every retryDelay.

import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'

export class PlainLock {
  #owner = null
  constructor(store, key, ttlMs = 30_000) {
    this.store = store
    this.key = key
    this.ttlMs = ttlMs
  }

  async acquire({ timeout = 0, retryDelay = 50 } = {}) {
    const owner = randomUUID()
    const deadline = Date.now() + timeout
    for (;;) {
      if (await this.store.acquire(this.key, owner, this.ttlMs)) {
        this.#owner = owner
        return true
      }
      if (Date.now() >= deadline) return false
      await sleep(retryDelay)
    }
  }

  async release() {
    const owner = this.#owner
    if (owner === null) return false
    this.#owner = null
    return this.store.release(this.key, owner)
  }

  async run(fn, options) {
    if (!(await this.acquire(options))) return [false, undefined]
    try {
      return [true, await fn(this)]
    } finally {
      await this.release()
    }
  }
}

/** The in-memory store of the baseline: a Map with wall-clock expiry. */
export class PlainMemoryStore {
  #held = new Map()
  async acquire(key, owner, ttlMs) {
    const e = this.#held.get(key)
    if (e !== undefined && e.expiresAt > Date.now()) return false
    this.#held.set(key, { owner, expiresAt: Date.now() + ttlMs })
    return true
  }
  async release(key, owner) {
    const e = this.#held.get(key)
    if (e === undefined || e.owner !== owner) return false
    this.#held.delete(key)
    return e.expiresAt > Date.now()
  }
  async extend(key, owner, ttlMs) {
    const e = this.#held.get(key)
    if (e === undefined || e.owner !== owner || e.expiresAt <= Date.now()) return false
    e.expiresAt = Date.now() + ttlMs
    return true
  }
  async isLocked(key) {
    return (this.#held.get(key)?.expiresAt ?? 0) > Date.now()
  }
  async remainingTime(key) {
    const left = (this.#held.get(key)?.expiresAt ?? 0) - Date.now()
    return left > 0 ? left : null
  }
}
