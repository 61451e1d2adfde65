// Packaging: the tarballs `npm publish` would upload (scripts/pack.js), the
// files in them, and a fresh project that installs them with no network:
// import, require, TypeScript resolving the types, and the loader's error
// when the platform package is missing (the README's install commands).
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { execFile, execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { fileURLToPath } from 'node:url'

const exec = promisify(execFile)
const root = fileURLToPath(new URL('../..', import.meta.url))
const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc')
const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
const dir = mkdtempSync(join(tmpdir(), 'keel-pack-'))
let tarballs

const filesIn = (tarball) =>
  execFileSync('tar', ['-tzf', tarball], { encoding: 'utf8' }).trim().split('\n').sort()

/** A new npm project in `dir/name` with these tarballs installed, offline. */
async function project(name, ...packages) {
  const at = join(dir, name)
  mkdirSync(at)
  writeFileSync(join(at, 'package.json'), JSON.stringify({ name, version: '1.0.0', private: true }))
  await exec(npm, ['install', '--offline', '--no-audit', '--no-fund', ...packages], { cwd: at })
  return at
}

before(async () => {
  const { stdout } = await exec(process.execPath, [join(root, 'scripts', 'pack.js'), join(dir, 'tarballs')])
  tarballs = JSON.parse(stdout)
})
after(() => rmSync(dir, { recursive: true, force: true }))

test('package.json has what npm and users need', () => {
  assert.equal(manifest.name, '@shaferllc/keel')
  assert.equal(manifest.license, 'MIT')
  assert.match(manifest.repository.url, /github\.com\/shaferllc\/keel/)
  assert.equal(manifest.engines.node, '>=20')
  assert.deepEqual(manifest.files, ['index.js', 'index.mjs', 'index.d.ts', 'lib/*.js'])
  for (const entry of ['.', './core']) {
    const conditions = manifest.exports[entry]
    assert.equal(Object.keys(conditions)[0], 'types', `exports["${entry}"]: "types" comes first`)
    assert.deepEqual(conditions, { types: './index.d.ts', import: './index.mjs', require: './index.js' })
  }
  assert.equal(manifest.napi.binaryName, 'keel')
  assert.deepEqual(manifest.napi.targets, ['x86_64-unknown-linux-gnu'])
  // The published manifest names the platform package; the checkout's does not
  // (it is not on the registry while developing, and npm ci would want it locked).
  assert.equal(manifest.optionalDependencies, undefined)
  const packed = JSON.parse(execFileSync('tar', ['-xzOf', tarballs.main, 'package/package.json'], { encoding: 'utf8' }))
  assert.deepEqual(packed.optionalDependencies, { '@shaferllc/keel-linux-x64-gnu': manifest.version })
  assert.deepEqual({ ...packed, optionalDependencies: undefined }, { ...manifest, optionalDependencies: undefined })
  const platform = JSON.parse(readFileSync(join(root, 'npm', 'linux-x64-gnu', 'package.json'), 'utf8'))
  assert.equal(platform.name, '@shaferllc/keel-linux-x64-gnu')
  assert.equal(platform.version, manifest.version)
  assert.equal(platform.main, 'keel.linux-x64-gnu.node')
  assert.deepEqual([platform.os, platform.cpu, platform.libc], [['linux'], ['x64'], ['glibc']])
})

test('the tarballs hold only what a user needs: no target/, no tests, no sources', () => {
  const lib = ['abort', 'acquire', 'check', 'errors', 'handed', 'hold', 'js-read-write', 'js-store', 'kinds', 'lock', 'marks', 'mysql-options', 'native', 'postgres-options', 'protocol', 'redis-options', 'stores', 'timers', 'tls-options', 'tracing', 'verify', 'verify-read-write', 'waiter', 'waiting']
  assert.deepEqual(
    filesIn(tarballs.main),
    [
      'package/README.md',
      'package/index.d.ts',
      'package/index.js',
      'package/index.mjs',
      ...lib.map((name) => `package/lib/${name}.js`),
      'package/package.json',
    ].sort(),
  )
  assert.deepEqual(filesIn(tarballs.platforms['linux-x64-gnu']), [
    'package/README.md',
    'package/keel.linux-x64-gnu.node',
    'package/package.json',
  ])
})

test('a fresh project installs both tarballs offline; import, require and TypeScript all work', async () => {
  const app = await project('app', tarballs.main, tarballs.platforms['linux-x64-gnu'])
  writeFileSync(
    join(app, 'esm.mjs'),
    'import { lock } from "@shaferllc/keel/core";\n' +
      'const [ran, result] = await lock("invoice:42").run(async () => "charged");\n' +
      'console.log(ran, result);\n',
  )
  assert.equal((await exec(process.execPath, ['esm.mjs'], { cwd: app })).stdout, 'true charged\n')
  writeFileSync(
    join(app, 'cjs.cjs'),
    'const { lock, LockNotHeldError } = require("@shaferllc/keel/core");\n' +
      'lock("k").extend().catch((e) => console.log(e instanceof LockNotHeldError));\n',
  )
  assert.equal((await exec(process.execPath, ['cjs.cjs'], { cwd: app })).stdout, 'true\n')
  // The installed copy is the one loaded, with the binary from the platform package.
  const where = await exec(process.execPath, ['-p', 'require.resolve("@shaferllc/keel/core")'], { cwd: app })
  assert.equal(where.stdout.trim(), join(app, 'node_modules', '@shaferllc', 'keel', 'index.js'))

  writeFileSync(
    join(app, 'app.ts'),
    'import { lock, type Lock, type LockStore } from "@shaferllc/keel/core";\n' +
      'export async function charge(): Promise<string | undefined> {\n' +
      '  const [ran, result] = await lock("invoice:42").run(async (l: Lock) => l.key);\n' +
      '  const store: LockStore | undefined = undefined;\n' +
      '  void store;\n' +
      '  return ran ? result : undefined;\n' +
      '}\n' +
      '// @ts-expect-error the types are resolved: a number is not a key\n' +
      'lock(42);\n',
  )
  for (const [module, resolution] of [['node16', 'node16'], ['nodenext', 'nodenext'], ['esnext', 'bundler']]) {
    writeFileSync(
      join(app, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { target: 'ES2022', module, moduleResolution: resolution, strict: true, noEmit: true, types: [] },
        files: ['app.ts'],
      }),
    )
    await exec(process.execPath, [tsc, '-p', app]).catch((error) => {
      assert.fail(`tsc (moduleResolution ${resolution}) in the installed project:\n${error.stdout}${error.stderr}`)
    })
  }
})

test('without the platform package the loader says what to run (the README\'s install commands), not a dlopen error', async () => {
  const bare = await project('bare', tarballs.main)
  const load = (prelude = '') =>
    exec(process.execPath, ['-e', `${prelude}require("@shaferllc/keel/core")`], { cwd: bare }).then(
      () => assert.fail('loaded without a binary'),
      (error) => error.stderr,
    )
  const missing = await load()
  assert.match(missing, /no native binary for this platform \(linux-x64-gnu\)/)
  assert.match(missing, /@shaferllc\/keel-linux-x64-gnu, which is not on the npm registry/)
  // Every command of the README's Install section, as written there.
  const readme = readFileSync(join(root, 'README.md'), 'utf8')
  const commands = [...readme.matchAll(/<!-- install: \w+ -->\n```sh\n([\s\S]*?)```/g)].flatMap((m) => m[1].trim().split('\n'))
  assert.equal(commands.length, 3, 'the README has its install commands')
  for (const command of commands) assert.ok(missing.includes(`  ${command}\n`), `the error gives "${command}":\n${missing}`)
  assert.match(missing, /--omit=optional/)
  // A platform nothing is built for says what is.
  const elsewhere = await load('Object.defineProperty(process, "platform", { value: "darwin" });')
  assert.match(elsewhere, /no native binary for this platform \(darwin-x64\)/)
  assert.match(elsewhere, /built for linux-x64-gnu only/)
})
