// Packaging: the tarballs `npm publish` would upload (scripts/pack.js), the
// files in them, and a fresh project that installs them with no network:
// import, require, TypeScript resolving the types, and the loader's error
// when the platform package is missing (the README's install commands).
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { execFile, execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { fileURLToPath } from 'node:url'
import { declaredPlatforms } from '../../lib/platforms.js'

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
  assert.deepEqual(manifest.files, ['index.js', 'index.mjs', 'index.d.ts', 'lib/**/*.js'])
  for (const entry of ['.', './core']) {
    const conditions = manifest.exports[entry]
    assert.equal(Object.keys(conditions)[0], 'types', `exports["${entry}"]: "types" comes first`)
    assert.deepEqual(conditions, { types: './index.d.ts', import: './index.mjs', require: './index.js' })
  }
  assert.deepEqual(manifest.typesVersions, { '*': { core: ['./index.d.ts'] } })
  assert.equal(manifest.napi.binaryName, 'keel')
  assert.deepEqual(manifest.napi.targets, [
    'x86_64-unknown-linux-gnu',
    'x86_64-unknown-linux-musl',
    'aarch64-unknown-linux-gnu',
    'aarch64-unknown-linux-musl',
    'armv7-unknown-linux-gnueabihf',
    'x86_64-apple-darwin',
    'aarch64-apple-darwin',
    'x86_64-pc-windows-msvc',
    'aarch64-pc-windows-msvc',
  ])
  // The published manifest names every platform package; the checkout's does not
  // (they are not on the registry while developing, and npm ci would want them locked).
  assert.equal(manifest.optionalDependencies, undefined)
  const packed = JSON.parse(execFileSync('tar', ['-xzOf', tarballs.main, 'package/package.json'], { encoding: 'utf8' }))
  assert.deepEqual(packed.optionalDependencies, Object.fromEntries(declaredPlatforms().map((p) => [`@shaferllc/keel-${p.name}`, manifest.version])))
  assert.deepEqual({ ...packed, optionalDependencies: undefined }, { ...manifest, optionalDependencies: undefined })
})

test('each declared platform has its package in npm/, matched by os, cpu and libc, at the main version', () => {
  const expected = {
    'linux-x64-gnu': ['linux', 'x64', 'glibc'],
    'linux-x64-musl': ['linux', 'x64', 'musl'],
    'linux-arm64-gnu': ['linux', 'arm64', 'glibc'],
    'linux-arm64-musl': ['linux', 'arm64', 'musl'],
    'linux-arm-gnueabihf': ['linux', 'arm', 'glibc'],
    'darwin-x64': ['darwin', 'x64', undefined],
    'darwin-arm64': ['darwin', 'arm64', undefined],
    'win32-x64-msvc': ['win32', 'x64', undefined],
    'win32-arm64-msvc': ['win32', 'arm64', undefined],
  }
  assert.deepEqual(declaredPlatforms().map((p) => p.name), Object.keys(expected))
  assert.deepEqual(readdirSync(join(root, 'npm')).sort(), Object.keys(expected).sort(), 'npm/ holds the declared platforms, no others')
  for (const [name, [os, cpu, libc]] of Object.entries(expected)) {
    const platform = JSON.parse(readFileSync(join(root, 'npm', name, 'package.json'), 'utf8'))
    assert.equal(platform.name, `@shaferllc/keel-${name}`)
    assert.equal(platform.version, manifest.version, `${name}: the main package's version`)
    assert.deepEqual([platform.os, platform.cpu, platform.libc], [[os], [cpu], libc && [libc]], name)
    assert.equal(platform.main, `keel.${name}.node`)
    assert.deepEqual(platform.files, [`keel.${name}.node`])
    assert.equal(platform.license, 'MIT')
    assert.deepEqual(platform.engines, manifest.engines)
    assert.deepEqual(platform.repository, { ...manifest.repository, directory: `npm/${name}` })
  }
})

test('every link in a packed README resolves from the registry: absolute, and to a file this repository has', () => {
  for (const tarball of [tarballs.main, ...Object.values(tarballs.platforms)]) {
    const readme = execFileSync('tar', ['-xzOf', tarball, 'package/README.md'], { encoding: 'utf8' })
    const headings = new Set([...readme.matchAll(/^#+ (.+)$/gm)].map((m) => m[1].toLowerCase().replace(/[^\w\- ]/g, '').replace(/ /g, '-')))
    const links = [...readme.matchAll(/\]\(([^)\s]+)\)|<(https?:[^>]+)>/g)].map((m) => m[1] ?? m[2])
    assert.ok(links.length > 0, tarball)
    for (const link of links) {
      if (link.startsWith('#')) {
        assert.ok(headings.has(link.slice(1)), `${tarball}: ${link} is a heading of the README`)
        continue
      }
      assert.match(link, /^https:\/\//, `${tarball}: ${link} is absolute`)
      const own = /^https:\/\/github\.com\/shaferllc\/keel\/blob\/main\/([^#]+)/.exec(link)
      if (own) assert.ok(existsSync(join(root, own[1])), `${tarball}: ${link} names ${own[1]}, which the repository has`)
    }
  }
})

test('the tarballs hold only what a user needs: no target/, no tests, no sources', () => {
  // Every JS file of lib/, and nothing else of it (its types and tsconfig stay here).
  const lib = readdirSync(join(root, 'lib'), { recursive: true, encoding: 'utf8' }).filter((path) => path.endsWith('.js'))
  assert.ok(lib.includes(join('core', 'check.js')) && lib.includes('native.js'))
  assert.deepEqual(
    filesIn(tarballs.main),
    [
      'package/LICENSE',
      'package/README.md',
      'package/index.d.ts',
      'package/index.js',
      'package/index.mjs',
      ...lib.map((path) => `package/lib/${path}`),
      'package/package.json',
    ].sort(),
  )
  assert.deepEqual(filesIn(tarballs.platforms['linux-x64-gnu']), [
    'package/LICENSE',
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
      'import { lock as sameLock } from "@shaferllc/keel";\n' +
      'export const same: typeof lock = sameLock;\n' +
      'export async function charge(): Promise<string | undefined> {\n' +
      '  const [ran, result] = await lock("invoice:42").run(async (l: Lock) => l.key);\n' +
      '  const store: LockStore | undefined = undefined;\n' +
      '  void store;\n' +
      '  return ran ? result : undefined;\n' +
      '}\n' +
      '// @ts-expect-error the types are resolved: a number is not a key\n' +
      'lock(42);\n',
  )
  // node10 (`moduleResolution: "node"`, still many projects' default) knows no `exports`: it finds
  // `@shaferllc/keel/core` through `typesVersions`.
  for (const [module, resolution] of [['commonjs', 'node10'], ['node16', 'node16'], ['nodenext', 'nodenext'], ['esnext', 'bundler']]) {
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

test('without the platform package the loader says what to do (the README\'s install commands), not a dlopen error', async () => {
  const bare = await project('bare', tarballs.main)
  const load = (prelude = '') =>
    exec(process.execPath, ['-e', `${prelude}require("@shaferllc/keel/core")`], { cwd: bare }).then(
      () => assert.fail('loaded without a binary'),
      (error) => error.stderr,
    )
  const missing = await load()
  assert.match(missing, /no native binary for this platform \(linux-x64-gnu\)/)
  assert.match(missing, /as the optional dependency @shaferllc\/keel-linux-x64-gnu, and it is not here/)
  assert.match(missing, /--omit=optional/)
  // Every command of the README's Install section that installs from a checkout, as written there.
  const readme = readFileSync(join(root, 'README.md'), 'utf8')
  const commands = [...readme.matchAll(/<!-- install: (checkout|tarballs) -->\n```sh\n([\s\S]*?)```/g)].flatMap((m) => m[2].trim().split('\n'))
  assert.equal(commands.length, 3, 'the README has its install commands')
  for (const command of commands) assert.ok(missing.includes(`  ${command}\n`), `the error gives "${command}":\n${missing}`)
  // A platform nothing is built for says which are, and how to build from source.
  const elsewhere = await load('Object.defineProperty(process, "platform", { value: "freebsd" });')
  assert.match(elsewhere, /no native binary for this platform \(freebsd-x64\)/)
  assert.match(elsewhere, new RegExp(`built for ${declaredPlatforms().map((p) => p.name).join(', ')} only`))
  assert.match(elsewhere, /needs Rust/)
  // Linux without glibc is musl (Alpine): its own package.
  const alpine = await load('const getReport = process.report.getReport.bind(process.report); process.report.getReport = () => { const r = getReport(); delete r.header.glibcVersionRuntime; return r };')
  assert.match(alpine, /\(linux-x64-musl\)[^]*@shaferllc\/keel-linux-x64-musl/)
})

test('a platform package that is there but cannot load says which binary failed, and why', async () => {
  const broken = await project('broken', tarballs.main, tarballs.platforms['linux-x64-gnu'])
  writeFileSync(join(broken, 'node_modules', '@shaferllc', 'keel-linux-x64-gnu', 'keel.linux-x64-gnu.node'), 'not an ELF file')
  const { stderr } = await exec(process.execPath, ['-e', 'require("@shaferllc/keel/core")'], { cwd: broken }).then(
    () => assert.fail('loaded a broken binary'),
    (error) => error,
  )
  assert.match(stderr, /could not load its binary for this platform \(linux-x64-gnu, from @shaferllc\/keel-linux-x64-gnu\)/)
  assert.match(stderr, /invalid ELF header|file too short/)
})
