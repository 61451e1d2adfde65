// `acquire` and `release`, the two calls of every lock cycle, are registered
// straight with napi (src/napi/direct.rs) over their `#[napi]` selves: the
// addon's exports are those, they answer as the lock expects, and a bad
// argument is a thrown error, not a crash. In a child process, on the test
// build (--features test-hooks), which counts the calls made through them.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('../..', import.meta.url))

/** Runs `body` (a script with `native`, the test build, in scope) in a child; what it printed, parsed. */
function inChild(body) {
  const script = `const native = require('./target/test-hooks/keel.node');\n${body}`
  const r = spawnSync(process.execPath, ['-e', script], { cwd: root, encoding: 'utf8' })
  assert.equal(r.signal, null, r.stderr)
  assert.equal(r.status, 0, r.stderr)
  return JSON.parse(r.stdout)
}

test('a lock cycle goes through the directly registered acquire and release, which answer as before', () => {
  const out = inChild(`
    const store = native.createMemoryStore()
    const before = native.directCalls()
    const owner = native.acquire(store, 'invoice:1', native.HoldKind.Lock, 0, 1000, 0, 0)
    const refused = native.acquire(store, 'invoice:1', native.HoldKind.Lock, 0, 1000, 0, 0)
    const wrongOwner = native.release(store, 'invoice:1', native.HoldKind.Lock, 'someone-else')
    const released = native.release(store, 'invoice:1', native.HoldKind.Lock, owner)
    const permit = native.acquire(store, 'pool', native.HoldKind.Permit, 2, 1000, 0, 0)
    console.log(JSON.stringify({ calls: native.directCalls() - before, owner, refused, wrongOwner, released, permit }))
  `)
  assert.equal(out.calls, 5)
  assert.match(out.owner, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
  assert.equal(out.refused, null)
  assert.equal(out.wrongOwner, false)
  assert.equal(out.released, true)
  assert.ok(Array.isArray(out.permit) && typeof out.permit[0] === 'string' && out.permit[1] >= 1, JSON.stringify(out.permit))
})

test('a bad argument to them is a thrown error naming what was wrong; the process lives on', () => {
  const out = inChild(`
    const store = native.createMemoryStore()
    const thrown = (f) => { try { f(); return null } catch (e) { return e instanceof Error ? e.message : String(e) } }
    console.log(JSON.stringify({
      notAHandle: thrown(() => native.acquire({}, 'k', native.HoldKind.Lock, 0, 1000, 0, 0)),
      missing: thrown(() => native.release(store, 'k')),
      notAKind: thrown(() => native.acquire(store, 'k', 9, 0, 1000, 0, 0)),
      after: typeof native.acquire(store, 'k', native.HoldKind.Lock, 0, 1000, 0, 0),
    }))
  `)
  assert.match(out.notAHandle, /store handle/)
  assert.match(out.missing, /^release: an argument is not what it should be/)
  assert.match(out.notAKind, /HoldKind/)
  assert.equal(out.after, 'string')
})
