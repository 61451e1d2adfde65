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

test('nothing under src/store/ uses napi: Node is the napi surface\'s business', () => {
  for (const file of filesUnder(join('src', 'store'), /\.rs$/)) {
    const lines = readFileSync(join(root, file), 'utf8').split('\n')
    const at = lines.findIndex((line) => !/^\s*\/\//.test(line) && /\bnapi(_derive|_sys)?::|#\[napi/.test(line))
    assert.equal(at, -1, `${file}:${at + 1} uses napi: ${lines[at]?.trim()}`)
  }
})

test('shared Rust code names no store: only the stores\' folders, their napi files and the lists of them do', () => {
  const own = [/^src\/store\/[a-z_]+\//, /^src\/napi\/stores\//]
  const lists = ['src/lib.rs', 'src/error.rs', 'src/store/mod.rs']
  const naming = /redis|postgres|mysql|mariadb|memorystore|memory store|in-memory|pgbouncer/i
  const named = []
  for (const file of filesUnder('src', /\.rs$/).map((f) => f.split('\\').join('/'))) {
    if (own.some((folder) => folder.test(file)) || lists.includes(file)) continue
    if (readFileSync(join(root, file), 'utf8').split('\n').some((line) => naming.test(line))) named.push(file)
  }
  assert.deepEqual(named.sort(), [])
  // The list of stores names them in its module lines and as paths into
  // their modules (what each brings to the list), never in prose.
  const registry = readFileSync(join(root, 'src/store/mod.rs'), 'utf8').split('\n')
  const prose = registry.filter((line) => {
    if (/^pub (mod|use) /.test(line)) return false
    const code = /^\s*\/\//.test(line) ? line : line.replace(/\b[a-z_]+::[A-Za-z_]+/g, '')
    return naming.test(code)
  })
  assert.deepEqual(prose, [], 'src/store/mod.rs names stores only as modules')
})

/**
 * Which Rust files each Rust file uses, read from its paths (`crate::`,
 * `super::`, `self::`, braces opened one level): each path resolved to the
 * file of its longest module prefix. Comments are left out; tests count.
 */
function rustUses() {
  const files = new Map()
  const moduleOf = (path) => {
    const parts = path.slice('src/'.length, -'.rs'.length).split('/')
    if (parts.at(-1) === 'mod' || parts.at(-1) === 'lib') parts.pop()
    return parts
  }
  const sources = filesUnder('src', /\.rs$/).map((f) => f.split('\\').join('/'))
  for (const path of sources) files.set(moduleOf(path).join('::'), path)
  const fileOf = (segments) => {
    for (let n = segments.length; n >= 0; n--) {
      const found = files.get(segments.slice(0, n).join('::'))
      if (found !== undefined) return found
    }
    return undefined
  }
  const uses = new Map()
  for (const path of sources) {
    const own = moduleOf(path)
    const source = readFileSync(join(root, path), 'utf8').replace(/\/\/[^\n]*/g, '')
    // A file's inline `mod tests` sits one module deeper: its `super::` is the file.
    const inline = source.search(/\n(#\[cfg\(test\)\]\s*)?mod tests \{/)
    const parts = inline < 0 ? [[source, own]] : [[source.slice(0, inline), own], [source.slice(inline), [...own, 'tests']]]
    const used = new Set()
    for (const [text, module] of parts) for (const [whole] of text.matchAll(/\b(?:crate|super|self)(?:::(?:[A-Za-z_]\w*|\{[^;]*?\}))+/g)) {
      const [head, braced] = whole.split('{')
      const prefix = head.replace(/::$/, '').split('::')
      const items = braced === undefined ? [[]] : [[], ...braced.replace(/\}$/, '').split(',').map((item) => [item.trim().split('::')[0]])]
      for (const item of items) {
        const segments = [...prefix, ...item.filter((s) => s && s !== 'self')]
        let at = segments[0] === 'crate' ? [] : [...module]
        let i = segments[0] === 'crate' ? 1 : 0
        for (; segments[i] === 'super' || segments[i] === 'self'; i++) if (segments[i] === 'super') at = at.slice(0, -1)
        const file = fileOf([...at, ...segments.slice(i)])
        if (file !== undefined && file !== path) used.add(file)
      }
    }
    uses.set(path, used)
  }
  return uses
}

test('no two Rust files use each other (a folder\'s mod.rs and its own files included), so each folder reads one way', () => {
  const uses = rustUses()
  assert.ok(uses.get('src/store/mysql/sql.rs')?.has('src/store/mysql/line_sql.rs'), 'paths read')
  assert.ok(uses.get('src/store/redis/transport.rs')?.has('src/store/redis/shared.rs'), 'paths to a sibling read')
  assert.ok(!uses.get('src/store/sweeps.rs')?.has('src/store/mod.rs'), 'an inline test module\'s super:: is its file')
  const both = []
  for (const [a, used] of uses) {
    for (const b of used) if (a < b && uses.get(b)?.has(a)) both.push(`${a} <-> ${b}`)
  }
  assert.deepEqual(both, [])
})
