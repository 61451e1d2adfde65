// Running child.mjs: to completion, or as a holder to kill; and other
// processes that print a JSON result.

import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { node } from './node.mjs'

const CHILD = fileURLToPath(new URL('./child.mjs', import.meta.url))

function start(env, args) {
  return spawn(...node([CHILD, ...args]), {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
}

/** Run a child to its end; resolves to the JSON it printed. */
export function runChild(env, ...args) {
  return finished(start(env, args), `child ${args.join(' ')}`)
}

/**
 * Run `file` with `args` (and `env` over this process's) to its end;
 * resolves to the last JSON line it printed. For children that need a
 * wrapper, such as faketime.
 */
export function runProcess(file, args, env) {
  const child = spawn(file, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  return finished(child, `${file} ${args.join(' ')}`)
}

function finished(child, name) {
  let out = ''
  let err = ''
  child.stdout.on('data', (d) => (out += d))
  child.stderr.on('data', (d) => (err += d))
  return new Promise((resolve, reject) => {
    child.once('error', reject)
    child.once('exit', (code, signal) => {
      if (code !== 0) return reject(new Error(`${name} exited with ${code ?? signal}:\n${err}`))
      try {
        resolve(JSON.parse(out.trim().split('\n').pop()))
      } catch {
        reject(new Error(`${name} printed no result:\n${out}\n${err}`))
      }
    })
  })
}

/** Start a child that prints one JSON line and keeps running; resolves to `{ child, result }`. */
export function startHolder(env, ...args) {
  const child = start(env, args)
  let out = ''
  let err = ''
  child.stderr.on('data', (d) => (err += d))
  return new Promise((resolve, reject) => {
    child.once('exit', (code, signal) => reject(new Error(`holder exited early (${code ?? signal}):\n${err}`)))
    child.stdout.on('data', (d) => {
      out += d
      if (out.includes('\n')) resolve({ child, result: JSON.parse(out.split('\n')[0]) })
    })
  })
}

/** SIGKILL a child and wait until it is gone. */
export function killHard(child) {
  return new Promise((resolve) => {
    child.removeAllListeners('exit')
    if (child.exitCode !== null || child.signalCode !== null) return resolve()
    child.once('exit', resolve)
    child.kill('SIGKILL')
  })
}
