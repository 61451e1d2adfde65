// A PostgreSQL cluster of our own for the tests and the benchmarks (initdb
// and pg_ctl in a temporary folder, on a free loopback port, as the
// `postgres` user when run as root), stopped when the test file ends; or the
// server KEEL_TEST_DATABASE_URL names (DATABASE_URL, which may name a
// developer's own database, is never read). Not installed is a failure that
// says what to install (support/tools.mjs).

import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync, chownSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort } from './servers.mjs'
import { missing, postgresBin } from './tools.mjs'

/** The PostgreSQL URL the tests use: KEEL_TEST_DATABASE_URL if set, else a cluster of our own. */
export async function postgresForTests() {
  if (process.env.KEEL_TEST_DATABASE_URL) return { url: process.env.KEEL_TEST_DATABASE_URL, async close() {} }
  return startPostgres()
}

/**
 * A throwaway PostgreSQL cluster (initdb + pg_ctl in a temporary folder, on a
 * free port). With `password`, the `postgres` user needs it (scram-sha-256).
 * Commits do not wait for their WAL (faster tests) unless `durable`: then a
 * crash (`stop()`) loses nothing committed, as on a server left at its defaults.
 * With `statements` ('top', or true: nested ones too), it counts the
 * statements it runs (pg_stat_statements, whose extension the caller creates).
 * With `tls: { cert, key }` (PEM), the server speaks TLS with that certificate,
 * listens on 127.0.0.1 and 127.0.0.2, and accepts TLS connections only.
 * Returns `{ url, socketUrl, port, log(), stop(), start(), restart(), close() }`:
 * `stop()` kills the server (immediate mode, as a crash would), `start()`
 * brings it back on the same port and data, `log()` is the server's log.
 */
export async function startPostgres({ password, durable = false, tls, statements = false } = {}) {
  const bin = postgresBin()
  if (!bin) throw new Error(`${missing('postgresql')} (these tests start their own cluster with initdb and pg_ctl)`)
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'keel-pg-'))
  const data = join(dir, 'data')
  const logFile = join(dir, 'log')
  // PostgreSQL refuses to run as root: as root, the cluster belongs to `postgres`.
  const asRoot = process.getuid?.() === 0
  if (asRoot) chownSync(dir, Number(id('-u')), Number(id('-g')))
  const run = (cmd, args) => {
    const [file, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', join(bin, cmd), ...args]] : [join(bin, cmd), args]
    const r = spawnSync(file, argv, { encoding: 'utf8', cwd: dir })
    if (r.error || r.status !== 0) {
      throw new Error(`${cmd} ${args.join(' ')} failed: ${r.error?.message ?? ''}${r.stdout}${r.stderr}`)
    }
  }
  const auth = password === undefined ? ['-A', 'trust'] : ['-A', 'scram-sha-256', '--pwfile', join(dir, 'pw')]
  if (password !== undefined) {
    writeFileSync(join(dir, 'pw'), `${password}\n`)
    if (asRoot) chownSync(join(dir, 'pw'), Number(id('-u')), Number(id('-g')))
  }
  run('initdb', ['-D', data, ...auth, '-U', 'postgres', '-E', 'UTF8', '--no-sync', '--no-instructions'])
  if (tls) {
    const method = password === undefined ? 'trust' : 'scram-sha-256'
    const files = {
      'server.crt': tls.cert,
      'server.key': tls.key,
      'pg_hba.conf': `local all all trust\nhostssl all all 127.0.0.1/32 ${method}\nhostssl all all 127.0.0.2/32 ${method}\n`,
    }
    for (const [name, text] of Object.entries(files)) {
      writeFileSync(join(data, name), text, { mode: 0o600 })
      if (asRoot) chownSync(join(data, name), Number(id('-u')), Number(id('-g')))
    }
  }
  const listen = tls ? '127.0.0.1,127.0.0.2' : '127.0.0.1'
  const settings =
    `-p ${port} -k ${dir} -c listen_addresses=${listen} -c fsync=off -c full_page_writes=off` +
    (durable ? '' : ' -c synchronous_commit=off') +
    (tls ? ' -c ssl=on' : '') +
    (statements
      ? ` -c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=${statements === true ? 'all' : statements}`
      : '')
  const start = () => {
    try {
      run('pg_ctl', ['-D', data, '-l', logFile, '-w', '-t', '30', '-o', settings, 'start'])
    } catch (e) {
      const log = existsSync(logFile) ? readFileSync(logFile, 'utf8') : ''
      throw new Error(`${e.message}\n${log}`)
    }
  }
  const stop = () => {
    try {
      run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop'])
    } catch {}
  }
  const remove = () => {
    stop()
    rmSync(dir, { recursive: true, force: true })
  }
  start()
  // A test file that dies mid-run still stops its cluster.
  process.once('exit', remove)
  const credentials = password === undefined ? 'postgres' : `postgres:${encodeURIComponent(password)}`
  return {
    url: `postgres://${credentials}@127.0.0.1:${port}/postgres`,
    // The same server through its unix socket (in the cluster's folder).
    socketUrl: `postgres://${credentials}@${encodeURIComponent(dir)}:${port}/postgres`,
    port,
    log: () => (existsSync(logFile) ? readFileSync(logFile, 'utf8') : ''),
    stop,
    start,
    restart() {
      stop()
      start()
    },
    async close() {
      process.removeListener('exit', remove)
      remove()
    },
  }
}

function id(flag) {
  return spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout.trim()
}
