// The layout docs/how-it-is-built.md describes is the layout there is:
// lib/ files depend one way, in the order it walks them; no source file is
// past ~400 lines; the shipped binary has no test-only export.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync, readdirSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('../..', import.meta.url))
const howItIsBuilt = readFileSync(join(root, 'docs', 'how-it-is-built.md'), 'utf8')

/** Every file under `dir` (relative to the root) whose name matches `pattern`. */
function filesUnder(dir, pattern) {
  const found = []
  const walk = (at) => {
    for (const entry of readdirSync(join(root, at), { withFileTypes: true })) {
      const path = join(at, entry.name)
      if (entry.isDirectory()) walk(path)
      else if (pattern.test(entry.name)) found.push(path)
    }
  }
  walk(dir)
  return found
}

test('lib/ files use only the files before them, in the order docs/how-it-is-built.md walks them', () => {
  const order = [...howItIsBuilt.matchAll(/`(lib\/[a-z/-]+\.js)`/g)].map((m) => m[1]).filter((f, i, all) => all.indexOf(f) === i)
  const files = filesUnder('lib', /\.js$/)
  assert.deepEqual([...order].sort(), [...files].sort(), 'docs/how-it-is-built.md names every lib/ file, and only those')
  for (const [at, file] of order.entries()) {
    const source = readFileSync(join(root, file), 'utf8')
    for (const [, used] of source.matchAll(/require\('(\.\.?\/[a-z/.-]+\.js)'\)/g)) {
      const path = join(dirname(file), used)
      assert.ok(order.indexOf(path) !== -1 && order.indexOf(path) < at, `${file} uses ${path}, which comes after it`)
    }
  }
})

test('lib/ shows its layers: a folder each, few files at its top, and no store named outside lib/stores/', () => {
  const top = readdirSync(join(root, 'lib'), { withFileTypes: true })
  assert.ok(top.filter((entry) => entry.isFile()).length <= 8, 'at most 8 files at the top of lib/')
  assert.ok(top.filter((entry) => entry.isDirectory()).length >= 5, 'its layers in folders')
  const naming = /redis|postgres|mysql|mariadb|memorylockstore|in-memory store|pgbouncer/i
  for (const file of filesUnder('lib', /\.js$/).filter((f) => !f.startsWith(join('lib', 'stores')))) {
    const lines = readFileSync(join(root, file), 'utf8').split('\n')
    const named = lines.findIndex((line) => naming.test(line))
    assert.equal(named, -1, `${file}:${named + 1} names a store: ${lines[named]?.trim()}`)
  }
})

test('no source file is past about 400 lines', () => {
  const sources = [...filesUnder('src', /\.(rs|js)$/), ...filesUnder('lib', /\.(rs|js)$/), 'index.js']
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
