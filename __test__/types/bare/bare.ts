// Our types alone: no @types/node, no lib "esnext.disposable", no DOM. A project
// that has none of them still type-checks against index.d.ts (Symbol.asyncDispose
// and Lock.signal included).
import { lock, setLockStore, type LockStore } from '@shaferllc/keel/core'

class MapStore implements LockStore {
  #held = new Map<string, string>()
  async acquire(key: string, owner: string, _ttlMs: number): Promise<boolean> {
    if (this.#held.has(key)) return false
    this.#held.set(key, owner)
    return true
  }
  async release(key: string, owner: string): Promise<boolean> {
    return this.#held.get(key) === owner && this.#held.delete(key)
  }
  async extend(key: string, owner: string, _ttlMs: number): Promise<boolean> {
    return this.#held.get(key) === owner
  }
  async isLocked(key: string): Promise<boolean> {
    return this.#held.has(key)
  }
  async remainingTime(_key: string): Promise<number | null> {
    return null
  }
}

export async function bare(): Promise<void> {
  setLockStore(new MapStore())
  const l = lock('k')
  const disposed: Promise<void> = l[Symbol.asyncDispose]()
  await disposed
  const [ran, n] = await l.run(async (held) => {
    // What the package's own API hands out compiles without @types/node or the DOM lib.
    if (held.signal.aborted) throw held.signal.reason
    held.signal.throwIfAborted()
    return 1
  })
  const sum: number = ran ? (n ?? 0) + 1 : 0
  void sum
  // A signal from the package itself stops a wait, still with no DOM or Node types.
  const waited: boolean = await lock('k2').acquire({ timeout: 10, signal: l.signal })
  void waited
}
