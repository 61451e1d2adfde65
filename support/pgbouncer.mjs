// A PgBouncer of our own in front of a PostgreSQL cluster (postgres.mjs),
// for the tests that check the store behind a pooler: an ini and a userlist
// in a temporary folder, on a free loopback port, as the `postgres` user
// when run as root (PgBouncer refuses to run as root), stopped when the
// test file ends. A pool of very few server connections, so clients really
// do share them.

import { spawn, spawnSync } from 'node:child_process'
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { freePort, listening } from './servers.mjs'
import { TOOLS, missing } from './tools.mjs'

/** Where pgbouncer is, or null (the tests that need it are then skipped, saying so). */
export function pgbouncerBin() {
  return TOOLS.pgbouncer.find()
}

/** Why tests through PgBouncer are skipped, or false when they can run. */
export const pgbouncerMissing = () => missing('pgbouncer')

/**
 * PgBouncer in `mode` (`transaction` or `session`) in front of `upstream`
 * (a `postgres://user@127.0.0.1:port/db` URL of a trust-auth cluster), with
 * `poolSize` server connections at most, ignoring the startup parameters
 * `ignoreStartupParameters` names. Returns `{ url, port, log(), close() }`.
 */
export async function startPgBouncer({ upstream, mode, poolSize = 3, ignoreStartupParameters = 'extra_float_digits,options,application_name' }) {
  const bin = pgbouncerBin()
  if (!bin) throw new Error(pgbouncerMissing() || 'pgbouncer is not installed')
  if (mode !== 'transaction' && mode !== 'session') throw new Error(`mode must be transaction or session, got ${mode}`)
  const target = new URL(upstream)
  const user = decodeURIComponent(target.username || 'postgres')
  const database = target.pathname.slice(1) || user
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'keel-pgbouncer-'))
  const logFile = join(dir, 'log')
  const ini = `[databases]
${database} = host=${target.hostname} port=${target.port || 5432} dbname=${database} user=${user}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = ${port}
unix_socket_dir =
auth_type = trust
auth_file = ${join(dir, 'userlist.txt')}
pool_mode = ${mode}
default_pool_size = ${poolSize}
min_pool_size = 0
reserve_pool_size = 0
max_client_conn = 500
; PgBouncer 1.18 refuses a client whose startup packet has parameters it
; does not track (the store sends options, and connects again without it
; when refused); ignored, they are not applied.
ignore_startup_parameters = ${ignoreStartupParameters}
logfile = ${logFile}
pidfile = ${join(dir, 'pid')}
log_connections = 0
log_disconnections = 0
`
  writeFileSync(join(dir, 'pgbouncer.ini'), ini)
  writeFileSync(join(dir, 'userlist.txt'), `"${user}" ""\n`)
  const asRoot = process.getuid?.() === 0
  if (asRoot) {
    const [uid, gid] = [Number(id('-u')), Number(id('-g'))]
    for (const file of ['', 'pgbouncer.ini', 'userlist.txt']) chownSync(join(dir, file), uid, gid)
  }
  const [file, argv] = asRoot
    ? ['runuser', ['-u', 'postgres', '--', bin, join(dir, 'pgbouncer.ini')]]
    : [bin, [join(dir, 'pgbouncer.ini')]]
  const child = spawn(file, argv, { stdio: ['ignore', 'ignore', 'pipe'], detached: false })
  let stderr = ''
  child.stderr.on('data', (d) => (stderr += d))
  const log = () => (existsSync(logFile) ? readFileSync(logFile, 'utf8') : '') + stderr
  const remove = () => {
    try {
      child.kill('SIGTERM')
    } catch {}
    rmSync(dir, { recursive: true, force: true })
  }
  process.once('exit', remove)
  const deadline = Date.now() + 10_000
  for (;;) {
    if (child.exitCode !== null) throw new Error(`pgbouncer exited at start (${child.exitCode}):\n${log()}`)
    if (await listening(port)) break
    if (Date.now() > deadline) throw new Error(`pgbouncer did not listen on 127.0.0.1:${port} within 10 s:\n${log()}`)
    await sleep(25)
  }
  return {
    url: `postgres://${encodeURIComponent(user)}@127.0.0.1:${port}/${database}`,
    port,
    log,
    async close() {
      process.removeListener('exit', remove)
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve))
        child.kill('SIGTERM')
        await Promise.race([exited, sleep(3_000)])
        if (child.exitCode === null) child.kill('SIGKILL')
      }
      rmSync(dir, { recursive: true, force: true })
    },
  }
}


function id(flag) {
  return spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout.trim()
}
