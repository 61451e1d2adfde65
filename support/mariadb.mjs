// A MariaDB server of our own for the tests and the benchmarks
// (mariadb-install-db and mariadbd in a temporary folder, on a free loopback
// port, as the `mysql` user when run as root), stopped when the test file
// ends; or the server KEEL_TEST_MYSQL_URL names (MYSQL_URL and DATABASE_URL,
// which may name a developer's own database, are never read). No option
// file is read, by the server or by the client (--no-defaults): the
// machine's /etc/mysql/my.cnf describes the developer's server, its port,
// socket and data folder. Not installed is a failure that says what to
// install (support/tools.mjs).

import { execFile, spawn, spawnSync } from 'node:child_process'
import { chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { freePort, listening } from './servers.mjs'
import { mariadbPrograms, missing } from './tools.mjs'

/** The MySQL URL the tests use: KEEL_TEST_MYSQL_URL if set, else a MariaDB server of our own. */
export async function mariadbForTests() {
  if (process.env.KEEL_TEST_MYSQL_URL) return { url: process.env.KEEL_TEST_MYSQL_URL, async close() {} }
  return startMariaDb()
}

/**
 * A throwaway MariaDB server (mariadb-install-db + mariadbd in a temporary
 * folder, on a free port, listening on 127.0.0.1 and on a unix socket in
 * that folder), with a `test` database. With `password`, every root account
 * needs it (mysql_native_password); without, root has none.
 * A commit writes the redo log but does not sync it (faster tests) unless
 * `durable`; a killed server (`stop()`) loses nothing committed either way,
 * only a machine that goes down would. `maxConnections` sets
 * max_connections (151 when not given). With `tls: { cert, key, ca? }` (PEM),
 * the server also speaks TLS with that certificate (`ca`: the CA it trusts
 * for client certificates); `requireTls` refuses TCP connections without TLS
 * (require_secure_transport, which MariaDB reports as access denied; the
 * unix socket counts as secure).
 * Returns `{ url, socketUrl, port, socket, dataDir, log(), query(sql),
 * source(script), stop(), start(), restart(), close() }`: `query(sql)` runs
 * SQL in `test` through the mariadb client over TCP and resolves to what it
 * prints (tab separated, no column names); `source(script)` gives the client
 * a script on its standard input instead (`mariadb test < file.sql`); `stop()` kills the server (SIGKILL, as a crash
 * would), `start()` brings it back on the same port and data, `restart()`
 * shuts it down cleanly first, `log()` is the server's error log.
 */
export async function startMariaDb({ password, durable = false, maxConnections, tls, requireTls = false } = {}) {
  const programs = mariadbPrograms()
  if (!programs) throw new Error(`${missing('mariadb')} (these tests start their own server with mariadb-install-db and mariadbd)`)
  if (requireTls && !tls) throw new Error('requireTls needs tls: { cert, key }')
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'keel-mariadb-'))
  const data = join(dir, 'data')
  const socket = join(dir, 'sock')
  // The server's temporary files in its own folder, not the shared /tmp, and
  // the install's too: a mariadbd deletes every `#sql*` file in its tmpdir
  // as it starts, so one started by a test file running alongside would take
  // the internal temporary tables of a server in use ("Error on delete of
  // '/tmp/#sql-temptable-...'") or of an install under way ("Could not
  // remove temporary table", then "Unknown table 'mysql.tmp_proxies_priv'").
  const temp = join(dir, 'tmp')
  // With its extension: mariadbd adds `.err` to a log file name without one.
  const logFile = join(dir, 'log.err')
  // mariadbd refuses to run as root: as root, the folder belongs to `mysql`
  // and the programs run as `mysql`. Through spawn's uid, not runuser: the
  // child is then mariadbd itself, which SIGKILL reaches (runuser would pass
  // it on to no one), and PAM's limit of 1024 open files does not cut
  // max_connections down.
  const owner = process.getuid?.() === 0 ? { uid: Number(id('-u')), gid: Number(id('-g')) } : {}
  const own = (path) => owner.uid !== undefined && chownSync(path, owner.uid, owner.gid)
  own(dir)
  mkdirSync(temp)
  own(temp)

  const tlsArgs = []
  if (tls) {
    const files = { 'server-cert.pem': tls.cert, 'server-key.pem': tls.key, ...(tls.ca ? { 'ca.pem': tls.ca } : {}) }
    for (const [name, text] of Object.entries(files)) {
      writeFileSync(join(dir, name), text, { mode: 0o600 })
      own(join(dir, name))
    }
    tlsArgs.push(`--ssl-cert=${join(dir, 'server-cert.pem')}`, `--ssl-key=${join(dir, 'server-key.pem')}`)
    if (tls.ca) tlsArgs.push(`--ssl-ca=${join(dir, 'ca.pem')}`)
    if (requireTls) tlsArgs.push('--require-secure-transport=ON')
  }
  // A small redo log: the default one (96 MB) is most of what a data folder
  // weighs (114 MB, 26 MB with this), and it is made as fast either way.
  const sizes = ['--innodb-log-file-size=8M']
  const args = [
    '--no-defaults', `--datadir=${data}`, `--port=${port}`, '--bind-address=127.0.0.1', `--socket=${socket}`,
    `--pid-file=${join(dir, 'pid')}`, `--log-error=${logFile}`, `--tmpdir=${temp}`, '--skip-log-bin', ...sizes,
    ...(durable ? [] : ['--innodb-flush-log-at-trx-commit=2']),
    ...(maxConnections === undefined ? [] : [`--max-connections=${maxConnections}`]),
    ...tlsArgs,
  ]

  const install = spawnSync(
    programs.installDb,
    ['--no-defaults', `--datadir=${data}`, '--auth-root-authentication-method=normal', '--skip-test-db', `--tmpdir=${temp}`, ...sizes],
    { ...owner, cwd: dir, encoding: 'utf8' },
  )
  if (install.error || install.status !== 0) {
    rmSync(dir, { recursive: true, force: true })
    throw new Error(`mariadb-install-db failed: ${install.error?.message ?? ''}${install.stdout}${install.stderr}`)
  }

  const log = () => (existsSync(logFile) ? readFileSync(logFile, 'utf8') : '')
  // The password the client sends: none until start-up has set root's.
  let sent
  // (With `sql` undefined, `script` goes to its standard input, as `mariadb test < file.sql`.)
  const cli = (sql, database = [], script = undefined) =>
    new Promise((resolve, reject) => {
      const argv = [
        '--no-defaults', '--protocol=tcp', '-h127.0.0.1', `-P${port}`, '-uroot', ...(tls ? ['--ssl'] : []),
        '-N', '-B', ...(sql === undefined ? [] : ['-e', sql]), ...database,
      ]
      // MYSQL_PWD rather than -p: no warning on stderr, nothing in ps; and a
      // MYSQL_PWD, MYSQL_HOST or MYSQL_TCP_PORT of the developer's is not sent along.
      const env = { PATH: process.env.PATH ?? '', ...(sent === undefined ? {} : { MYSQL_PWD: sent }) }
      const client = execFile(programs.client, argv, { env, encoding: 'utf8', timeout: 30_000 }, (error, stdout, stderr) => {
        if (error) reject(new Error(`mariadb ${sql === undefined ? '< script' : `-e ${JSON.stringify(sql)}`} failed: ${stderr.trim() || error.message}`))
        else resolve(stdout)
      })
      client.stdin?.end(script)
    })

  // The running mariadbd, and its watchdog: a test process ended by a
  // signal (node --test's timeout sends SIGTERM) runs no 'exit' handler, so
  // a shell reading a pipe from this process kills the server and removes
  // the folder when that pipe closes, however this process ends.
  let child = null
  let watchdog = null
  const gone = (p) => p.exitCode !== null || p.signalCode !== null

  const start = async () => {
    if (child && !gone(child)) return
    const server = spawn(programs.server, args, { ...owner, cwd: dir, stdio: 'ignore' })
    const exited = new Promise((resolve) => server.once('exit', resolve))
    let failed = null
    server.once('error', (e) => (failed = e))
    server.unref()
    child = Object.assign(server, { exited })
    if (server.pid !== undefined) {
      const script =
        'read _; kill -9 "$1"; i=0; while kill -0 "$1" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; rm -rf "$2"'
      const dog = spawn('sh', ['-c', script, 'sh', String(server.pid), dir], { stdio: ['pipe', 'ignore', 'ignore'] })
      dog.on('error', () => {})
      dog.stdin.on('error', () => {})
      dog.unref()
      dog.stdin.unref()
      watchdog = dog
      // Gone by itself: its pid may come back as another process's.
      exited.then(() => dog.kill('SIGKILL'))
    }
    const deadline = Date.now() + 20_000
    let last = ''
    for (;;) {
      if (failed) throw new Error(`mariadbd could not start: ${failed.message}`)
      if (gone(server)) throw new Error(`mariadbd exited (${server.exitCode ?? server.signalCode}) while starting:\n${log()}`)
      if (await listening(port)) {
        try {
          await cli('SELECT 1')
          return
        } catch (e) {
          last = e.message
        }
      }
      if (Date.now() > deadline) {
        throw new Error(`mariadbd did not accept connections on 127.0.0.1:${port} within 20 s${last ? ` (${last})` : ''}:\n${log()}`)
      }
      await sleep(50)
    }
  }

  /** Ends the server with `signal`; SIGKILL when it has not exited within `ms`. */
  const end = async (signal, ms) => {
    const server = child
    if (!server) return
    if (!gone(server)) {
      server.kill(signal)
      // Also what keeps this process alive meanwhile: the server is unref'd.
      const timer = setInterval(() => server.kill('SIGKILL'), Math.max(ms, 1_000))
      await server.exited
      clearInterval(timer)
    }
    watchdog?.kill('SIGKILL')
    const deadline = Date.now() + 10_000
    while (await listening(port)) {
      if (Date.now() > deadline) throw new Error(`127.0.0.1:${port} still accepts connections after mariadbd exited`)
      await sleep(25)
    }
  }

  const remove = () => {
    try {
      child?.kill('SIGKILL')
      watchdog?.kill('SIGKILL')
      rmSync(dir, { recursive: true, force: true })
    } catch {}
  }
  // A test file that dies mid-run still stops its server.
  process.once('exit', remove)

  try {
    await start()
    if (password !== undefined) {
      // A fresh data folder has root@localhost, root@127.0.0.1, root@::1 and
      // root@<host name>, none with a password; a TCP connection from
      // 127.0.0.1 is taken for localhost, so it is root@localhost too. Each
      // account gets the password, so no way in is left without it.
      const hosts = (await cli("SELECT Host FROM mysql.user WHERE User = 'root'")).trim().split('\n')
      await cli(hosts.map((host) => `ALTER USER root@${literal(host)} IDENTIFIED BY ${literal(password)};`).join(' '))
      sent = password
    }
    await cli('CREATE DATABASE IF NOT EXISTS test')
  } catch (e) {
    process.removeListener('exit', remove)
    await end('SIGKILL', 0).catch(() => {})
    rmSync(dir, { recursive: true, force: true })
    throw e
  }

  const credentials = password === undefined ? 'root' : `root:${encodeURIComponent(password)}`
  return {
    url: `mysql://${credentials}@127.0.0.1:${port}/test`,
    // The same server through its unix socket (in the server's folder).
    socketUrl: `mysql://${credentials}@localhost/test?socket=${encodeURIComponent(socket)}`,
    port,
    socket,
    dataDir: data,
    log,
    query: (sql) => cli(sql, ['test']),
    source: (script) => cli(undefined, ['test'], script),
    stop: () => end('SIGKILL', 0),
    start,
    async restart() {
      await end('SIGTERM', 30_000)
      await start()
    },
    async close() {
      process.removeListener('exit', remove)
      await end('SIGKILL', 0)
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

/** `text` as an SQL string literal (backslashes are escapes at the server's defaults). */
function literal(text) {
  return `'${String(text).replace(/\\/g, '\\\\').replace(/'/g, "''")}'`
}


function id(flag) {
  return spawnSync('id', [flag, 'mysql'], { encoding: 'utf8' }).stdout.trim()
}
