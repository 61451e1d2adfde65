// Publishing: `npm run release -- --registry <url>` against a local npm
// registry (verdaccio, from __test__/registry, which scripts/setup.js
// installs), then a fresh project on a PATH with no Rust (no cargo, no rustc)
// installs `@shaferllc/keel` from it by name, as a user will from the public
// registry, and runs a lock cycle: npm picks this platform's binary package
// from the main package's optional dependencies and skips the rest.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { execFile, spawn } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { delimiter, join } from 'node:path'
import { promisify } from 'node:util'
import { fileURLToPath } from 'node:url'
import { freePort } from '../../support/servers.mjs'
import { declaredPlatforms, hostPlatform } from '../../lib/platforms.js'

const exec = promisify(execFile)
const root = fileURLToPath(new URL('../..', import.meta.url))
const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))
const verdaccio = join(root, '__test__', 'registry', 'node_modules', 'verdaccio', 'bin', 'verdaccio')
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
const dir = mkdtempSync(join(tmpdir(), 'keel-release-'))
let registry
let server
let published

/** This PATH without the folders that hold cargo or rustc: a machine with no Rust. */
const pathWithoutRust = (process.env.PATH ?? '')
  .split(delimiter)
  .filter((folder) => folder && !['cargo', 'rustc'].some((tool) => existsSync(join(folder, tool))))
  .join(delimiter)

before(async () => {
  assert.ok(existsSync(verdaccio), `${verdaccio} is missing: run \`npm ci\` in __test__/registry (scripts/setup.js test does)`)
  const port = await freePort()
  registry = `http://127.0.0.1:${port}/`
  writeFileSync(
    join(dir, 'verdaccio.yaml'),
    [
      `storage: ${join(dir, 'storage')}`,
      'auth:',
      `  htpasswd: { file: ${join(dir, 'htpasswd')}, max_users: 10 }`,
      'uplinks: {}',
      'packages:',
      "  '**': { access: $all, publish: $authenticated }",
      'web: { enable: false }',
      'log: { type: stdout, format: pretty, level: warn }',
      '',
    ].join('\n'),
  )
  server = spawn(process.execPath, [verdaccio, '--config', join(dir, 'verdaccio.yaml'), '--listen', `127.0.0.1:${port}`], {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  server.stdout.on('data', (d) => (output += d))
  server.stderr.on('data', (d) => (output += d))
  const until = Date.now() + 30_000
  for (;;) {
    const up = await fetch(`${registry}-/ping`).then((r) => r.ok, () => false)
    if (up) break
    if (server.exitCode !== null || Date.now() > until) assert.fail(`verdaccio did not start:\n${output}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  // A user on the registry, and npm's credentials for it in a config file of the test's own.
  const user = await fetch(`${registry}-/user/org.couchdb.user:keel`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'keel', password: 'release-test-password' }),
  })
  assert.equal(user.status, 201, await user.clone().text())
  const { token } = await user.json()
  writeFileSync(join(dir, 'npmrc'), `//127.0.0.1:${port}/:_authToken=${token}\n`)
  // As the README writes it.
  published = await exec(npm, ['run', '--silent', 'release', '--', '--registry', registry], {
    cwd: root,
    env: { ...process.env, NPM_CONFIG_USERCONFIG: join(dir, 'npmrc'), npm_config_cache: join(dir, 'cache') },
    timeout: 120_000,
  }).catch((error) => assert.fail(`npm run release failed:\n${error.stdout}${error.stderr}`))
})

after(() => {
  server?.kill()
  rmSync(dir, { recursive: true, force: true })
})

const isBuilt = ({ name }) => existsSync(join(root, `keel.${name}.node`))
const built = () => declaredPlatforms().filter(isBuilt)

test('release publishes every built platform package, then the main package naming all of them', async () => {
  assert.match(published.stderr, new RegExp(`published .*${hostPlatform()}.* and the main package`))
  for (const { name } of built()) {
    const view = await fetch(`${registry}${manifest.name.replace('/', '%2f')}-${name}`).then((r) => r.json())
    assert.equal(view['dist-tags']?.latest, manifest.version, `${manifest.name}-${name} is on the registry`)
    assert.deepEqual(view.versions[manifest.version].os, [declaredPlatforms().find((p) => p.name === name).os])
  }
  const main = await fetch(`${registry}${manifest.name.replace('/', '%2f')}`).then((r) => r.json())
  assert.deepEqual(
    main.versions[manifest.version].optionalDependencies,
    Object.fromEntries(declaredPlatforms().map(({ name }) => [`${manifest.name}-${name}`, manifest.version])),
  )
  const unbuilt = declaredPlatforms().filter((p) => !isBuilt(p))
  if (unbuilt.length > 0) assert.match(published.stderr, new RegExp(`no binary here for ${unbuilt.map((p) => p.name).join(', ')}`))
})

test('a project on a machine without Rust installs @shaferllc/keel from the registry by name and takes a lock', async () => {
  const env = { ...process.env, PATH: pathWithoutRust, npm_config_cache: join(dir, 'user-cache') }
  delete env.NPM_CONFIG_USERCONFIG
  await assert.rejects(exec('sh', ['-c', 'command -v cargo || command -v rustc'], { env }), 'no cargo or rustc on this PATH')
  const app = join(dir, 'app')
  mkdirSync(app)
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true, type: 'module' }))
  // The README's command, word for word but the URL.
  const readme = readFileSync(join(root, 'README.md'), 'utf8')
  assert.ok(readme.includes('```sh\nnpm install @shaferllc/keel --registry <url>\n```'), 'the README gives this command')
  await exec(npm, ['install', manifest.name, '--registry', registry], { cwd: app, env, timeout: 120_000 }).catch((error) => {
    assert.fail(`npm install ${manifest.name} --registry ${registry} failed:\n${error.stdout}${error.stderr}`)
  })
  // This platform's package and no other.
  const scope = join(app, 'node_modules', '@shaferllc')
  assert.deepEqual(readdirSync(scope).sort(), ['keel', `keel-${hostPlatform()}`])
  for (const pkg of readdirSync(scope)) assert.match(readFileSync(join(scope, pkg, 'LICENSE'), 'utf8'), /^MIT License/)
  writeFileSync(
    join(app, 'cycle.js'),
    'import { lock } from "@shaferllc/keel/core";\n' +
      'const [ran, result] = await lock("invoice:42").run(async () => "charged");\n' +
      'console.log(ran, result);\n',
  )
  const { stdout } = await exec(process.execPath, ['cycle.js'], { cwd: app, env })
  assert.equal(stdout, 'true charged\n')
})
