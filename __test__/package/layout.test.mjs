// The layout docs/how-it-is-built.md describes is the layout there is:
// lib/ files depend one way, in the order it walks them; no source file is
// past ~400 lines; the shipped binary has no test-only export.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync, readdirSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('../..', import.meta.url))
const howItIsBuilt = readFileSync(join(root, 'docs', 'how-it-is-built.md'), 'utf8')

test('lib/ files use only the files before them, in the order docs/how-it-is-built.md walks them', () => {
  const order = [...howItIsBuilt.matchAll(/`lib\/([a-z-]+)\.js`/g)].map((m) => m[1]).filter((f, i, all) => all.indexOf(f) === i)
  const files = readdirSync(join(root, 'lib')).filter((f) => f.endsWith('.js')).map((f) => f.slice(0, -3))
  assert.deepEqual([...order].sort(), [...files].sort(), 'docs/how-it-is-built.md names every lib/ file, and only those')
  for (const [at, file] of order.entries()) {
    const source = readFileSync(join(root, 'lib', `${file}.js`), 'utf8')
    for (const [, used] of source.matchAll(/require\('\.\/([a-z-]+)\.js'\)/g)) {
      assert.ok(order.indexOf(used) < at, `lib/${file}.js uses lib/${used}.js, which comes after it`)
    }
  }
})

test('no source file is past about 400 lines', () => {
  const sources = []
  const walk = (dir) => {
    for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
      const path = join(dir, entry.name)
      if (entry.isDirectory()) walk(path)
      else if (/\.(rs|js)$/.test(entry.name)) sources.push(path)
    }
  }
  for (const dir of ['src', 'lib']) walk(dir)
  sources.push('index.js')
  const long = sources
    .map((path) => [path, readFileSync(join(root, path), 'utf8').split('\n').length])
    .filter(([, lines]) => lines > 420)
  assert.deepEqual(long, [], 'files this long usually hold two concerns')
})

test('the shipped binary has no test-only export; the test build has them', () => {
  const require = createRequire(import.meta.url)
  const shipped = require(join(root, `keel.${process.platform}-${process.arch}-gnu.node`))
  assert.equal(shipped.panicForTest, undefined)
  assert.equal(typeof shipped.acquire, 'function')
  const testBuild = join(root, 'target', 'test-hooks', 'keel.node')
  const script = `console.log(typeof require(${JSON.stringify(testBuild)}).panicForTest)`
  const { execFileSync } = require('node:child_process')
  assert.equal(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' }).trim(), 'function')
})
