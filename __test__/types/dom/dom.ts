// Lock.signal where the DOM's AbortSignal is loaded (a browser-targeted
// tsconfig, with or without @types/node): our declaration merges with theirs,
// and the signal goes wherever theirs is expected.
import { lock } from '@shaferllc/keel/core'

export async function withTheDom(url: string): Promise<void> {
  await lock('k').run(async (held) => {
    const response = await fetch(url, { signal: held.signal })
    held.signal.addEventListener('abort', () => console.log(held.signal.reason))
    const dom: AbortSignal = AbortSignal.timeout(10)
    const mixed: AbortSignal = AbortSignal.any([held.signal, dom])
    if (held.signal.aborted || mixed.aborted) held.signal.throwIfAborted()
    return response.status
  })
}
