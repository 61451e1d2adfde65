// The README's Install section, run as written: each of its install blocks in
// a fresh npm project, through sh, with KEEL set to this checkout (as the
// README tells the reader to set it), offline; then the README's quick start
// runs in that project against what was installed.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { fileURLToPath } from 'node:url'

const exec = promisify(execFile)
const root = fileURLToPath(new URL('../..', import.meta.url)).replace(/\/$/, '')
const readme = readFileSync(join(root, 'README.md'), 'utf8')
const dir = mkdtempSync(join(tmpdir(), 'keel-install-'))
after(() => rmSync(dir, { recursive: true, force: true }))

const blocks = Object.fromEntries(
  [...readme.matchAll(/<!-- install: (\w+) -->\n```sh\n([\s\S]*?)```/g)].map((m) => [m[1], m[2]]),
)
const quickStart = readme.slice(readme.indexOf('\n## Quick start')).match(/```js\n([\s\S]*?)```/)[1]

test('the README has both install blocks, the platforms package.json builds for, and a quick start', () => {
  assert.deepEqual(Object.keys(blocks).sort(), ['checkout', 'tarballs'])
  const install = readme.slice(readme.indexOf('\n## Install'), readme.indexOf('\n## Quick start'))
  const { napi, engines } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))
  for (const target of napi.targets) assert.ok(install.includes(`\`${target}\``), `Install names ${target}`)
  assert.ok(install.includes(`Node.js ${engines.node.replace('>=', '')} or later`), 'Install names the Node.js versions')
  assert.match(quickStart, /from "@shaferllc\/keel\/core"/)
})

for (const name of ['checkout', 'tarballs']) {
  test(`the README's install (${name}) works as written, and the quick start runs on it`, async () => {
    const app = join(dir, name)
    mkdirSync(app)
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: `app-${name}`, version: '1.0.0', private: true }))
    const env = { ...process.env, KEEL: root, npm_config_offline: 'true', npm_config_audit: 'false', npm_config_fund: 'false' }
    await exec('sh', ['-ec', blocks[name]], { cwd: app, env, timeout: 120_000 }).catch((error) => {
      assert.fail(`the README's commands failed:\n${blocks[name]}\n${error.stdout}${error.stderr}`)
    })
    const installed = JSON.parse(readFileSync(join(app, 'package.json'), 'utf8')).dependencies
    assert.ok(installed['@shaferllc/keel'], 'the package is a dependency of the project')
    if (name === 'tarballs') assert.ok(installed['@shaferllc/keel-linux-x64-gnu'], 'the platform package too')
    writeFileSync(join(app, 'quick-start.mjs'), quickStart)
    const { stdout } = await exec(process.execPath, ['quick-start.mjs'], { cwd: app })
    assert.equal(stdout, "[ 'charged', 'already charged' ]\n1\n")
    // The copy loaded is the installed one.
    const where = await exec(process.execPath, ['-p', 'require("fs").realpathSync(require.resolve("@shaferllc/keel/core"))'], { cwd: app })
    const expected = name === 'checkout' ? join(root, 'index.js') : join(app, 'node_modules', '@shaferllc', 'keel', 'index.js')
    assert.equal(where.stdout.trim(), expected)
  })
}
