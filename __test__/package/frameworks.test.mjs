// Jest and Vitest, run for real on their own suites (__test__/frameworks/*,
// each with its own devDependencies, installed by scripts/setup.js), against
// this checkout. Their JSON reports are read, so a skipped or missing test
// fails here just like a failing one.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { fileURLToPath } from 'node:url'

const exec = promisify(execFile)
const frameworks = fileURLToPath(new URL('../frameworks/', import.meta.url))
const tsc = fileURLToPath(new URL('../../node_modules/typescript/bin/tsc', import.meta.url))

function installed(name, bin) {
  const path = join(frameworks, name, 'node_modules', ...bin)
  assert.ok(existsSync(path), `${path} is missing: run \`npm ci\` in __test__/frameworks/${name} (scripts/setup.js does)`)
  return path
}

/** Runs a framework, which writes its JSON report to a file; returns the report and its output. */
async function runReporting(name, args) {
  const dir = mkdtempSync(join(tmpdir(), `keel-${name}-`))
  const report = join(dir, 'report.json')
  const { NODE_TEST_CONTEXT, ...env } = process.env
  let output
  try {
    const r = await exec(process.execPath, args(report), { cwd: join(frameworks, name), env: { ...env, CI: 'true' }, timeout: 180_000 })
    output = r.stdout + r.stderr
  } catch (error) {
    output = `${error.stdout}${error.stderr}`
    if (!existsSync(report)) throw new Error(`${name} failed without a report:\n${output}`)
  }
  try {
    return { report: JSON.parse(readFileSync(report, 'utf8')), output }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

function assertAllPassed(name, report, output, files, tests) {
  const failed = report.testResults
    .flatMap((file) => file.assertionResults)
    .filter((t) => t.status !== 'passed')
    .map((t) => `${t.status}: ${t.fullName ?? t.title}`)
  assert.deepEqual(failed, [], `${name}:\n${output}`)
  assert.equal(report.numFailedTests, 0, output)
  assert.equal(report.numPendingTests + (report.numTodoTests ?? 0), 0, `${name} skipped tests:\n${output}`)
  assert.equal(report.testResults.length, files, `${name} ran ${report.testResults.length} files:\n${output}`)
  assert.equal(report.numPassedTests, tests, `${name} passed ${report.numPassedTests} tests:\n${output}`)
  // Their workers are forked with an IPC channel; the suites set their store, so no warning.
  assert.doesNotMatch(output, /KEEL_LOCK_DEFAULT_STORE/, `${name} warned of the default store:\n${output}`)
}

test('Jest: the docs testing pattern in CommonJS and ESM test files, inside Jest sandboxes', async () => {
  const jest = installed('jest', ['jest', 'bin', 'jest.js'])
  const { report, output } = await runReporting('jest', (out) => [
    '--experimental-vm-modules',
    '--disable-warning=ExperimentalWarning',
    jest,
    '--json',
    `--outputFile=${out}`,
  ])
  assertAllPassed('jest', report, output, 2, 14)
})

for (const pool of ['threads', 'forks']) {
  test(`Vitest, pool ${pool}: the docs testing pattern, a TypeScript store, fake timers`, async () => {
    const vitest = installed('vitest', ['vitest', 'vitest.mjs'])
    const { report, output } = await runReporting('vitest', (out) => [
      vitest,
      'run',
      `--pool=${pool}`,
      '--reporter=json',
      `--outputFile=${out}`,
    ])
    assertAllPassed(`vitest (${pool})`, report, output, 2, 12)
  })
}

test('the Vitest suite type-checks against index.d.ts (misuse marked @ts-expect-error must fail)', async () => {
  await exec(process.execPath, [tsc, '-p', join(frameworks, 'vitest')])
})
