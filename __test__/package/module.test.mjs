// The package loads by name, as users load it: ESM import, CommonJS require,
// one shared module instance, and a process that exits when its work is done.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { fileURLToPath } from 'node:url'
import * as esm from '@shaferllc/keel/core'
import { createRequire } from 'node:module'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'

const run = promisify(execFile)
const root = fileURLToPath(new URL('../..', import.meta.url))
const require = createRequire(import.meta.url)
const JS_STORES = new URL('../helpers/js-stores.mjs', import.meta.url).href
// The documented API: every value index.d.ts declares.
const EXPORTS = [...readFileSync(join(root, 'index.d.ts'), 'utf8').matchAll(/^export declare (?:class|function|const) (\w+)/gm)]
  .map((m) => m[1])
  .filter((name, i, all) => all.indexOf(name) === i)
  .sort()

test('import and require give the same exports and the same module state', () => {
  const cjs = require('@shaferllc/keel/core')
  for (const name of EXPORTS) assert.equal(esm[name], cjs[name], name)
  assert.equal(cjs.getLockStore(), esm.getLockStore())
  assert.equal(require('@shaferllc/keel'), cjs, 'the package root is the same module')
})

test('the export list is exactly the documented API', () => {
  assert.ok(EXPORTS.includes('lock') && EXPORTS.includes('MemoryLockStore'), 'index.d.ts read')
  assert.deepEqual(Object.keys(esm).sort(), EXPORTS)
  assert.deepEqual(Object.keys(require('@shaferllc/keel/core')).sort(), EXPORTS)
})

test('a CommonJS script can require the package and take a lock', async () => {
  const script = `
    const { lock, getLockStore, MemoryLockStore } = require('@shaferllc/keel/core')
    lock('invoice:42').run(() => 'charged').then(([ran, r]) => {
      console.log(JSON.stringify({ ran, r, memory: getLockStore() instanceof MemoryLockStore }))
    })
  `
  const { stdout } = await run(process.execPath, ['-e', script], { cwd: root })
  assert.deepEqual(JSON.parse(stdout), { ran: true, r: 'charged', memory: true })
})

test('a script that takes and releases locks then falls off its end exits at once', async () => {
  const script = `
    import { lock } from '@shaferllc/keel/core'
    for (let i = 0; i < 100; i++) await lock('k' + i, 60_000).run(async () => {})
    const held = lock('left-held', 60_000)
    await held.acquire() // a held lock must not keep the process alive either
    await lock('left-held').acquire({ timeout: 30, retryDelay: 5 })
    console.log('done')
  `
  const started = Date.now()
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: root, timeout: 10_000 })
  assert.equal(stdout.trim(), 'done')
  assert.ok(Date.now() - started < 5_000, `took ${Date.now() - started} ms`)
})

test('a script with a JS store exits once its work is done', async () => {
  const script = `
    import { lock, setLockStore } from '@shaferllc/keel/core'
    import { AsyncMapLockStore } from ${JSON.stringify(JS_STORES)}
    setLockStore(new AsyncMapLockStore())
    lock('k').run(async () => 1).then(() => console.log('done'))
  `
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: root, timeout: 10_000 })
  assert.equal(stdout.trim(), 'done')
})
