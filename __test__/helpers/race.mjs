// The abort race across processes: several processes (race-child.mjs) take
// a few keys with waits their signals cancel at random moments, beside a
// client outside lock(); processes are SIGKILLed at random moments, others
// started in their place. Every critical section of every process is then
// laid out per key on the shared monotonic clock: two that overlap are two
// holders at once, and a fencing token smaller than one before it on the
// same key is a stale holder.

import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'
import { uniqueKey } from '../../support/servers.mjs'
import { node } from './node.mjs'

const CHILD = fileURLToPath(new URL('./race-child.mjs', import.meta.url))

/**
 * The floor of critical sections a second on MySQL, which only says the race
 * ran: there a hand-over across processes is two transactions of the line's
 * procedure and a wake, each heavier than PostgreSQL's function (measured on
 * 2 cores: 1,100 to 2,200 sections in 6 s alone, 200 to 700 beside the rest
 * of the suite; PostgreSQL about 5,000 and 2,000 to 2,800).
 */
export const MYSQL_PER_SECOND = 20

/**
 * The floor on etcd, a cluster of 3 members on the same 2 cores whose leader
 * is down for 30% of the run: each hand-over is a commit of the cluster, a
 * watch's wake and a read, and each wait aborted costs its process's place
 * in line, a commit to leave and one to come back (411 to 749 sections in
 * 6 s alone, 236 beside the rest of the suite, 152 beside a second suite).
 */
export const ETCD_PER_SECOND = 20

/**
 * The race on the store `env` names for `seconds`, asserting what must hold:
 * no overlap, no fencing token going back, no store error, and every path
 * taken (waits aborted, processes killed, at least `perSecond` critical
 * sections a second). `during(seconds)`, if given, runs beside the race
 * (a server's member killed and started again) and is awaited with it.
 * Resolves to what was seen.
 */
export async function raceWithAborts(env, seconds, { perSecond = 100, during = undefined } = {}) {
  const [seen] = await Promise.all([raceAcrossProcesses({ env, seconds }), during?.(seconds)])
  assert.deepEqual(seen.examples, [], 'two holders at once')
  assert.equal(seen.overlaps, 0)
  assert.equal(seen.backwards, 0, 'a fencing token went back')
  assert.equal(seen.errors, 0, `store errors: ${seen.failures.join('; ')}`)
  assert.equal(seen.killed, 2, 'processes killed mid-run')
  assert.ok(seen.sections > perSecond * seconds, `only ${seen.sections} critical sections`)
  assert.ok(seen.aborted > 10 * seconds, `only ${seen.aborted} waits aborted`)
  return seen
}

/**
 * Run the race for `seconds` with the store `env` names (helpers/stores.mjs);
 * resolves to what was seen: `{ sections, overlaps, backwards, aborted,
 * timedOut, errors, failures, killed, examples }` (`failures`: the first
 * few store errors of each process that lived to the end).
 */
export async function raceAcrossProcesses({ env, seconds, processes = 4, workers = 4, keys = 3, kills = 2 }) {
  const dir = mkdtempSync(join(tmpdir(), 'keel-race-'))
  const names = Array.from({ length: keys }, (_, k) => uniqueKey(`race-${k}`))
  const ends = Date.now() + seconds * 1_000
  /** pid -> when it died (ns, the children's clock): its open section ends there */
  const died = new Map()
  const finished = []
  let started = 0
  const live = new Set()

  function start() {
    const log = join(dir, `${started++}.log`)
    const child = spawn(...node([CHILD, log, String(Math.max(ends - Date.now(), 500)), names.join(','), String(workers)]), {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let out = ''
    let err = ''
    child.stdout.on('data', (d) => (out += d))
    child.stderr.on('data', (d) => (err += d))
    const done = new Promise((resolve, reject) =>
      child.once('exit', (code, signal) => {
        died.set(child.pid, process.hrtime.bigint())
        live.delete(entry)
        if (signal === 'SIGKILL') return resolve({ killed: true })
        if (code !== 0) return reject(new Error(`a racing process exited with ${code ?? signal}:\n${err}`))
        resolve(JSON.parse(out.trim().split('\n').pop()))
      }),
    )
    const entry = { child, done, log }
    live.add(entry)
    finished.push(done)
    return entry
  }

  try {
    for (let i = 0; i < processes; i++) start()
    // Kills at random moments of the middle of the run, each process replaced.
    const moments = Array.from({ length: kills }, () => (0.2 + Math.random() * 0.6) * seconds * 1_000).sort((a, b) => a - b)
    const began = Date.now()
    for (const at of moments) {
      await sleep(Math.max(0, began + at - Date.now()))
      const victims = [...live]
      if (victims.length === 0) break
      // Out of the running at once: its exit is heard later, and a second
      // kill that came before would pick the same process again.
      const victim = victims[Math.floor(Math.random() * victims.length)]
      live.delete(victim)
      victim.child.kill('SIGKILL')
      start()
    }
    const results = await Promise.all(finished)
    const logs = Array.from({ length: started }, (_, i) => join(dir, `${i}.log`))
    return { ...tally(logs, died), ...sum(results.filter((r) => !r.killed)), killed: results.filter((r) => r.killed).length }
  } finally {
    for (const { child } of live) child.kill('SIGKILL')
    rmSync(dir, { recursive: true, force: true })
  }
}

/** Sections per key from the logs, checked for overlaps and fencing tokens going back. */
function tally(logs, died) {
  /** @type {Map<string, { key: string, start: bigint, end: bigint | undefined, token: number | undefined, pid: number }>} */
  const sections = new Map()
  for (const log of logs) {
    let text
    try {
      text = readFileSync(log, 'utf8')
    } catch {
      continue // started, killed before it opened its log
    }
    for (const line of text.split('\n')) {
      const [kind, at, key, id, token] = line.split(' ')
      if (kind === 'S') sections.set(id, { key, start: BigInt(at), end: undefined, token: token === '-' ? undefined : Number(token), pid: Number(id.split('.')[0]) })
      else if (kind === 'E') sections.get(id).end = BigInt(at)
    }
  }
  let overlaps = 0
  let backwards = 0
  const examples = []
  const byKey = new Map()
  for (const s of sections.values()) {
    if (!byKey.has(s.key)) byKey.set(s.key, [])
    byKey.get(s.key).push(s)
  }
  for (const [key, list] of byKey) {
    // An open section is one its process died in: it ran until then at the latest.
    for (const s of list) s.end ??= died.get(s.pid) ?? s.start
    list.sort((a, b) => (a.start < b.start ? -1 : 1))
    let latest
    let lastToken
    for (const s of list) {
      if (latest !== undefined && s.start < latest.end) {
        overlaps++
        if (examples.length < 5) examples.push(`${key}: a section of ${s.pid} (token ${s.token}) began ${Number(latest.end - s.start) / 1e6} ms before one of ${latest.pid} (token ${latest.token}) ended`)
      }
      if (latest === undefined || s.end > latest.end) latest = s
      if (s.token !== undefined) {
        if (lastToken !== undefined && s.token <= lastToken) backwards++
        lastToken = s.token
      }
    }
  }
  return { sections: sections.size, overlaps, backwards, examples }
}

function sum(results) {
  const total = { aborted: 0, abortedAtOnce: 0, timedOut: 0, errors: 0 }
  for (const r of results) for (const name of Object.keys(total)) total[name] += r[name]
  return { ...total, failures: results.flatMap((r) => r.failures) }
}
