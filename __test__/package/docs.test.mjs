// README.md and every page of docs/ say only what is true:
// - every ```js block runs as written, as an ES module in a child process (the
//   Redis, PostgreSQL, MySQL and etcd ones against servers this test starts, given
//   to the example as REDIS_URL, DATABASE_URL, MYSQL_URL and ETCD_ENDPOINTS), and prints what its `// value`
//   comments say, unless the line before it is `<!-- not run: reason -->`;
// - every ```ts block type-checks (strict), and those that are tests run under
//   Vitest;
// - every relative link and #anchor resolves, by GitHub's anchor rules;
// - every repository path a page names exists; no page hides a soft hyphen;
// - the performance tables are what scripts/perf-table.js makes of bench/;
// - verifyLockStore takes as long as its docs say.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { execFile } from 'node:child_process'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { promisify } from 'node:util'

import { redisForTests } from '../../support/servers.mjs'
import { postgresForTests } from '../../support/postgres.mjs'
import { mariadbForTests } from '../../support/mariadb.mjs'
import { startEtcd } from '../../support/etcd.mjs'
import { skipReason } from '../../support/tools.mjs'
import { root, pages, blocks, links, anchors, paths, exists, NOT_RUN } from './docs-check.mjs'

const run = promisify(execFile)
const require = createRequire(import.meta.url)
const all = pages()
const byFile = Object.fromEntries(all.map((p) => [p.file, p.text]))

test('README.md is a way in: short, and links every page of docs/', () => {
  const readme = byFile['README.md']
  assert.ok(readme.split('\n').length <= 300, `README.md has ${readme.split('\n').length} lines`)
  for (const { file } of all.filter((p) => p.file.startsWith('docs/'))) {
    assert.ok(readme.includes(`](${file})`), `README.md links ${file}`)
  }
  for (const heading of ['## Install', '## Quick start', '## Choosing a store', '## Testing your code']) {
    assert.ok(readme.includes(`\n${heading}\n`), `README.md has ${heading}`)
  }
})

test('no page hides a soft hyphen (U+00AD), nor do the types or lib/', () => {
  const files = [...all.map((p) => p.file), 'index.d.ts', 'bench/RUNS.md']
  for (const file of files) {
    const text = readFileSync(join(root, file), 'utf8')
    const at = text.indexOf('\u00ad')
    assert.equal(at, -1, `${file} has a soft hyphen at line ${text.slice(0, at).split('\n').length}`)
  }
})

test('every relative link and #anchor of the README and docs/ resolves', () => {
  const broken = []
  for (const { file, text } of all) {
    for (const link of links(file, text)) {
      if (!existsSync(join(root, link.file))) broken.push(`${file}: ${link.target} (no such file)`)
      else if (link.anchor !== undefined) {
        const target = byFile[link.file] ?? (link.file.endsWith('.md') ? readFileSync(join(root, link.file), 'utf8') : null)
        if (target === null || !anchors(target).has(link.anchor)) broken.push(`${file}: ${link.target} (no such heading)`)
      }
    }
  }
  assert.deepEqual(broken, [])
})

test('the anchors follow GitHub: punctuation dropped, spaces as hyphens, repeats numbered', () => {
  const text = '# `Lock.run(fn, options?)`\n## `readLock(key, ttlMs?)` / `writeLock(key, ttlMs?)`\n## Stores\n## Stores\n```\n# not a heading\n```\n'
  assert.deepEqual([...anchors(text)], ['lockrunfn-options', 'readlockkey-ttlms--writelockkey-ttlms', 'stores', 'stores-1'])
  assert.deepEqual(links('docs/api.md', 'see [a](stores.md#x), [b](#y), `[c](#z)` and [d](https://e.f)'), [
    { target: 'stores.md#x', file: 'docs/stores.md', anchor: 'x' },
    { target: '#y', file: 'docs/api.md', anchor: 'y' },
  ])
})

test('every file and folder a page names exists', () => {
  const missing = []
  for (const { file, text } of all) for (const path of paths(text)) if (!exists(path)) missing.push(`${file}: ${path}`)
  assert.deepEqual(missing, [])
  // The failure tables name test files, not nicknames.
  const guarantees = byFile['docs/guarantees.md']
  for (const row of guarantees.split('\n').filter((l) => l.startsWith('| ') && !l.startsWith('| failure'))) {
    const last = row.split(' | ').at(-1)
    assert.match(last, /`__test__\/[^`]+`/, `the row names its test file: ${row.slice(0, 80)}`)
  }
})

test('Migrating and the guarantees cover what came since the TypeScript lock: PostgreSQL, semaphores, read-write locks, holders()', () => {
  const migrating = byFile['docs/migrating.md'].slice(byFile['docs/migrating.md'].indexOf('## New here'))
  for (const name of ['`PostgresLockStore`', '`semaphore(key, limit)`', '`readLock`/`writeLock`', '`holders()`', '`RedisLockStore`']) {
    assert.ok(migrating.includes(name), `New here names ${name}`)
  }
  const guarantees = byFile['docs/guarantees.md']
  const fencing = guarantees.split('\n- ').find((item) => item.startsWith('Each acquisition through'))
  assert.match(fencing, /`PostgresLockStore`/)
  assert.match(fencing, /semaphore permit, a reader or a writer/)
  assert.match(guarantees, /`PostgresLockStore` computes every expiry from the database server's/)
  assert.match(guarantees, /`holders\(\)` counts/)
})

test('the performance tables are what scripts/perf-table.js makes of bench/', () => {
  const { render, tables } = require('../../scripts/perf-table.js')
  const page = byFile['docs/performance.md']
  assert.equal(page, render(page), 'docs/performance.md differs from bench/: run node scripts/perf-table.js')
  const results = JSON.parse(readFileSync(join(root, 'bench', 'results.json'), 'utf8'))
  const { lock } = tables()
  assert.ok(lock.includes(results.date.slice(0, 10)), 'the table says which run it is')
  const keel = results.scenarios['1 sequential']['keel RedisLockStore']
  assert.ok(lock.includes(`(${keel.vsBaseline.toFixed(2)}x)`), 'a figure of the run is in the table')
})

test('verifyLockStore takes as long as its docs say', async () => {
  const api = byFile['docs/api.md']
  assert.match(api, /`floor\(ttlMs \/ 3\) \+ ttlMs \+ 100` ms in all \(500 ms at\nthe default 300\)/)
  assert.match(readFileSync(join(root, 'index.d.ts'), 'utf8'), /`floor\(ttlMs \/ 3\) \+ ttlMs \+ 100` ms in all \(500 at the default\)/)
  // Timed in a process of its own, so nothing else on this test's event loop delays its timers.
  const script = `
    import { verifyLockStore, MemoryLockStore } from '@shaferllc/keel/core'
    import { MapReadWriteStore } from './__test__/helpers/js-stores.mjs'
    for (const store of [new MemoryLockStore(), new MapReadWriteStore()]) {
      const started = performance.now()
      const report = await verifyLockStore(store)
      console.log(JSON.stringify({ ms: performance.now() - started, failed: report.checks.filter((c) => !c.ok) }))
    }`
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: root })
  const [plain, readWrite] = stdout.trim().split('\n').map((line) => JSON.parse(line))
  assert.deepEqual([plain.failed, readWrite.failed], [[], []])
  assert.ok(plain.ms >= 500 && plain.ms < 1400, `MemoryLockStore: ${plain.ms} ms, the docs say 500 ms plus its calls`)
  assert.ok(readWrite.ms >= 1400 && readWrite.ms < 2400, `a read-write store: ${readWrite.ms} ms, the docs say 1.4 s plus its calls`)
})

// The examples, each in a child process.
const examples = all.flatMap(({ file, text }) => blocks(text, 'js').map((b) => ({ file, ...b })))
const typescript = all.flatMap(({ file, text }) => blocks(text, 'ts').map((b) => ({ file, ...b })))

test('the pages have examples, and few are marked not to run', () => {
  assert.ok(examples.length >= 25, `found ${examples.length} js blocks`)
  assert.ok(typescript.length >= 4, `found ${typescript.length} ts blocks`)
  const notRun = examples.filter((e) => e.notRun)
  assert.ok(notRun.length <= 2, `not run: ${notRun.map((e) => `${e.file}:${e.line}`).join(', ')}`)
  for (const e of notRun) assert.match(`<!-- not run: ${e.notRun} -->\n`, NOT_RUN)
})

// The Redis examples connect to REDIS_URL, the PostgreSQL ones to DATABASE_URL, the MySQL ones
// to MYSQL_URL, the etcd ones to ETCD_ENDPOINTS: servers of this test's own. Without etcd
// installed, its examples are skipped, saying what to install.
const withoutEtcd = skipReason(['etcd', 'etcdctl'])
const [redis, postgres, mariadb, etcd] = await Promise.all([
  redisForTests(),
  postgresForTests(),
  mariadbForTests(),
  withoutEtcd ? undefined : startEtcd(),
])
after(async () => {
  await redis.close()
  await postgres.close()
  await mariadb.close()
  await etcd?.close()
})

for (const { file, line, source, notRun } of examples) {
  const title = source.split('\n').find((l) => l && !l.startsWith('import')) ?? ''
  const skip = (notRun && `marked not run: ${notRun}`) || (source.includes('ETCD_ENDPOINTS') && withoutEtcd)
  test(`${file}:${line} runs: ${title.slice(0, 50)}`, { skip }, async () => {
    const { stdout, stderr } = await run(process.execPath, ['--input-type=module', '-e', source], {
      cwd: root,
      timeout: 20_000,
      env: { ...process.env, REDIS_URL: redis.url, DATABASE_URL: postgres.url, MYSQL_URL: mariadb.url, ETCD_ENDPOINTS: etcd?.endpoints },
    }).catch((error) => assert.fail(`${file}:${line} failed:\n${error.stderr}`))
    assert.equal(stderr, '')
    // Lines annotated with `// value` print that value, in order.
    const expected = source
      .split('\n')
      .filter((l) => /^\s*console\.log\(/.test(l) && l.includes(');'))
      .map((l) => l.slice(l.lastIndexOf(');') + 2).match(/^\s*\/\/\s*(.*)$/)?.[1])
    const printed = stdout.trimEnd().split('\n')
    expected.forEach((comment, n) => {
      if (comment === undefined || comment.startsWith('~') || printed[n] === undefined) return
      const value = comment.split(':')[0].trim()
      assert.ok(
        printed[n].startsWith(value) || value.startsWith(printed[n]),
        `line ${n + 1} printed "${printed[n]}", ${file} says "${comment}"`,
      )
    })
  })
}

// The TypeScript blocks: type-checked together, each its own module, with
// vitest from the Vitest suite's dependencies (`node scripts/setup.js test`).
const vitest = join(root, '__test__', 'frameworks', 'vitest', 'node_modules', 'vitest')
const snippets = join(root, 'target', `doc-snippets-${process.pid}`)
const tsFiles = typescript.map((t) => ({
  ...t,
  name: `${t.file.replace(/\W/g, '-')}-${t.line}${/\btest\(/.test(t.source) ? '.spec' : ''}.ts`,
}))

test('every ts block type-checks, and the ones that are tests pass under Vitest', async (t) => {
  assert.ok(existsSync(vitest), 'Vitest is missing: node scripts/setup.js test installs it')
  rmSync(snippets, { recursive: true, force: true })
  mkdirSync(join(snippets, 'node_modules', '@shaferllc'), { recursive: true })
  after(() => rmSync(snippets, { recursive: true, force: true }))
  symlinkSync(vitest, join(snippets, 'node_modules', 'vitest'))
  symlinkSync(root, join(snippets, 'node_modules', '@shaferllc', 'keel'))
  writeFileSync(join(snippets, 'package.json'), JSON.stringify({ name: 'doc-snippets', private: true, type: 'module' }))
  for (const { name, source } of tsFiles) writeFileSync(join(snippets, name), source)
  // Under @types/node 20 (the devDependencies') and 22 (__test__/types/node22, which
  // scripts/setup.js test installs): a reader may have either.
  const typesOfNode = {
    20: join(root, 'node_modules', '@types'),
    22: join(root, '__test__', 'types', 'node22', 'node_modules', '@types'),
  }
  const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc')
  for (const [version, typeRoot] of Object.entries(typesOfNode)) {
    assert.ok(existsSync(join(typeRoot, 'node')), `@types/node ${version} is missing: node scripts/setup.js test installs it`)
    writeFileSync(
      join(snippets, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          lib: ['ES2022', 'ESNext.Disposable'],
          module: 'nodenext',
          moduleResolution: 'nodenext',
          strict: true,
          noEmit: true,
          skipLibCheck: true,
          types: ['node'],
          typeRoots: [typeRoot],
        },
        files: tsFiles.map((f) => f.name),
      }),
    )
    await run(process.execPath, [tsc, '-p', snippets]).catch((error) => {
      const where = tsFiles.map((f) => `${f.name}: ${f.file}:${f.line}`).join('\n')
      assert.fail(`tsc on the docs' ts blocks with @types/node ${version}:\n${error.stdout}${error.stderr}\n${where}`)
    })
  }
  const specs = tsFiles.filter((f) => f.name.endsWith('.spec.ts'))
  assert.ok(specs.length >= 2, 'the README and docs/testing.md have Vitest examples')
  await t.test('the Vitest examples pass', async () => {
    await run(process.execPath, [join(vitest, 'vitest.mjs'), 'run', '--root', snippets, '--reporter=verbose'], {
      cwd: snippets,
      timeout: 120_000,
      env: { ...process.env, CI: '1', NO_COLOR: '1' },
    }).then(
      ({ stdout }) => {
        for (const spec of specs) assert.ok(stdout.includes(`✓ ${spec.name} > `), `${spec.name} ran and passed:\n${stdout}`)
      },
      (error) => assert.fail(`vitest on the docs' test examples:\n${error.stdout}${error.stderr}`),
    )
  })
})
