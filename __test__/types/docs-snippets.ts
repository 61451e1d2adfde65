// The docs' TypeScript snippets (run, extend, manual acquisition, serialize /
// restore, inspecting, testing), as written, inside functions so their
// `return`s and the extend example's `l` have a scope. Type-checked only.
import { lock, restoreLock, setLockStore, MemoryLockStore, type Lock } from '@shaferllc/keel/core'

declare const invoice: { id: number }
declare function charge(invoice: { id: number }): Promise<void>
declare function rebuild(): Promise<void>
declare function process(batch: number[]): Promise<void>
declare const batches: number[][]
declare const queue: { dispatch(job: unknown): Promise<void> }
declare class FinishImport {
  constructor(serialized: string)
}
declare const beforeEach: (fn: () => unknown) => void

export async function chargeOnce(): Promise<void> {
  const [ran] = await lock('invoice:42').run(async () => {
    await charge(invoice)
  })
  if (!ran) return // another worker is already charging it
}

export async function runForms(): Promise<void> {
  const [ran, result] = await lock('invoice:42').run(() => charge(invoice))
  void ran
  void result
  // Wait up to 5 seconds for the lock, checking every 100ms.
  const [rebuilt] = await lock('report').run(() => rebuild(), {
    timeout: 5_000,
    retryDelay: 100,
  })
  void rebuilt
  lock('invoice:42') // held for 30s once acquired
  lock('nightly-report', 300_000) // 5 minutes
}

export async function extendFromInside(): Promise<void> {
  // The docs' example uses an `l` it never defines: run() passes the lock.
  await lock('import', 60_000).run(async (l: Lock) => {
    for (const batch of batches) {
      await process(batch)
      await l.extend() // push the expiry out another 60s
    }
  })
}

export async function manual(): Promise<void> {
  const l = lock('invoice:42')
  if (!(await l.acquire({ timeout: 2_000 }))) return

  try {
    await charge(invoice)
  } finally {
    await l.release() // without this, the lock leaks for the rest of its TTL
  }
}

export async function workerA(): Promise<void> {
  const l = lock('import:99', 60_000)
  await l.acquire()
  await queue.dispatch(new FinishImport(l.serialize()))
}

export async function workerB(serialized: string): Promise<void> {
  const l = restoreLock(serialized)
  await l.extend(60_000)
  // ...finish the work...
  await l.release()
}

export async function inspecting(l: Lock): Promise<void> {
  const locked: boolean = await l.isLocked() // does anyone hold this key? (not necessarily you)
  const expired: boolean = await l.isExpired() // did we hold it and lose it?
  const left: number | null = await l.getRemainingTime() // ms until expiry, or null if unheld
  void [locked, expired, left]
}

beforeEach(() => setLockStore(new MemoryLockStore()))
