// Runs test files in a `node --test` of their own (a child process), as
// `npm test` would, for the tests of the test setup itself: which programs
// it finds, and which servers it touches.
import { spawn } from 'node:child_process'
import { mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const root = fileURLToPath(new URL('../..', import.meta.url))

/**
 * Runs `node ...args` in the checkout with `env` over this process's (a
 * value of undefined removes a variable); resolves to `{ code, output, ms }`.
 *
 * @param {string[]} args
 * @param {Record<string, string | undefined>} env
 */
export function runNode(args, env = {}, timeout = 300_000) {
  // The child reports to its own terminal, not to this run's test harness.
  const merged = { ...process.env, ...env }
  delete merged.NODE_TEST_CONTEXT
  for (const [name, value] of Object.entries(merged)) if (value === undefined) delete merged[name]
  const started = Date.now()
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: root, env: merged, stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.on('data', (d) => (output += d))
    child.stderr.on('data', (d) => (output += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), timeout)
    child.once('error', reject)
    child.once('close', (code, signal) => {
      clearTimeout(timer)
      resolve({ code: code ?? signal, output, ms: Date.now() - started })
    })
  })
}

/**
 * A PATH with every program of this one but `programs`: a folder of links
 * to the rest. Returns `{ path, remove() }`.
 *
 * @param {string[]} programs
 */
export function pathWithout(programs) {
  const dir = mkdtempSync(join(tmpdir(), 'keel-path-'))
  const linked = new Set(programs)
  for (const from of (process.env.PATH ?? '').split(':')) {
    let names = []
    try {
      names = readdirSync(from)
    } catch {
      continue
    }
    for (const name of names) {
      if (linked.has(name)) continue
      linked.add(name)
      symlinkSync(join(from, name), join(dir, name))
    }
  }
  return { path: dir, remove: () => rmSync(dir, { recursive: true, force: true }) }
}
