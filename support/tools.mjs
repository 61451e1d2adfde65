// The programs the tests run besides Node, where each comes from, and what
// goes without it. redis-server and PostgreSQL are needed by most of the
// suite: without them `npm test` stops at once, saying what to install. The
// others are needed by a few files only: without one, those tests are
// skipped, naming the tool and the command that installs it (in the test
// report and in the one line `node support/tools.mjs` prints before the
// run). KEEL_TEST_REQUIRE_ALL=1 (CI) turns every such skip into a failure.
//
//   node support/tools.mjs   prints what is missing and what that skips, in one
//                            line; exits 1 if the suite cannot run at all (or,
//                            with KEEL_TEST_REQUIRE_ALL=1, if anything is missing)

import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** The path of `cmd` on the PATH (or in `extraDirs`), or null. */
export function which(cmd, extraDirs = []) {
  for (const dir of [...(process.env.PATH ?? '').split(':'), ...extraDirs]) {
    if (dir && existsSync(join(dir, cmd))) return join(dir, cmd)
  }
  return null
}

/** The folder of PostgreSQL's server programs (initdb, pg_ctl), newest version first, or null. */
export function postgresBin() {
  const versions = existsSync('/usr/lib/postgresql')
    ? readdirSync('/usr/lib/postgresql').sort((a, b) => Number(b) - Number(a))
    : []
  for (const v of versions) {
    const dir = `/usr/lib/postgresql/${v}/bin`
    if (existsSync(join(dir, 'initdb'))) return dir
  }
  const initdb = which('initdb')
  return initdb ? join(initdb, '..') : null
}

/**
 * MariaDB's server, the script that makes a data folder and the command-line
 * client (`{ server, installDb, client }`), or null when one is missing.
 */
export function mariadbPrograms() {
  // mariadbd is in /usr/sbin, which a user's PATH often lacks.
  const server = which('mariadbd', ['/usr/sbin', '/usr/local/sbin'])
  const installDb = which('mariadb-install-db')
  const client = which('mariadb')
  return server && installDb && client ? { server, installDb, client } : null
}

/**
 * Each tool: how it is found, its Debian package, and what goes without it
 * (`required`: most of the suite, so nothing runs).
 */
let namespaces
/** Whether `ip netns` can make a namespace here (as root, with iproute2): asked once. */
function namespacesWork() {
  if (namespaces === undefined) {
    const ip = which('ip', ['/usr/sbin', '/sbin'])
    const probe = `keel-probe-${process.pid}`
    namespaces = Boolean(ip) && spawnSync(ip, ['netns', 'add', probe]).status === 0
    if (namespaces) spawnSync(ip, ['netns', 'del', probe])
  }
  return namespaces
}

export const TOOLS = {
  'redis-server': {
    find: () => which('redis-server', ['/usr/sbin', '/usr/local/bin']),
    package: 'redis-server',
    required: true,
    needs: 'most tests start their own Redis',
  },
  postgresql: {
    find: postgresBin,
    package: 'postgresql',
    required: true,
    needs: 'the PostgreSQL tests start their own cluster with initdb and pg_ctl',
  },
  'redis-cli': {
    find: () => which('redis-cli', ['/usr/bin', '/usr/local/bin']),
    package: 'redis-tools',
    needs: 'the Redis Cluster tests (stores/redis-cluster)',
  },
  openssl: {
    find: () => which('openssl'),
    package: 'openssl',
    needs: 'the TLS tests (stores/redis-tls, stores/postgres-tls, their contract runs)',
  },
  pgbouncer: {
    find: () => which('pgbouncer', ['/usr/sbin', '/usr/local/bin', '/usr/bin']),
    package: 'pgbouncer',
    needs: 'the PgBouncer tests (stores/postgres-pgbouncer, its contract runs)',
  },
  faketime: {
    find: () => which('faketime'),
    package: 'faketime',
    needs: 'the clock-skew test (stores/postgres-clock)',
  },
  ss: {
    find: () => which('ss', ['/usr/bin', '/bin', '/usr/sbin', '/sbin']),
    package: 'iproute2',
    needs: 'the test of a MySQL connection reset on the way (stores/mysql-faults), which closes the socket with ss -K',
  },
  etcd: {
    find: () => which('etcd', ['/usr/bin', '/usr/local/bin']),
    package: 'etcd-server',
    needs: 'the etcd tests (stores/etcd-store, its contract runs), which start their own members',
  },
  etcdctl: {
    find: () => which('etcdctl', ['/usr/bin', '/usr/local/bin']),
    package: 'etcd-client',
    needs: 'the etcd tests, which ask it which member leads',
  },
  netns: {
    find: namespacesWork,
    package: 'iproute2',
    asRoot: true,
    needs: 'the etcd partition test, which puts each member in a network namespace of its own (support/netns.mjs)',
  },
  mariadb: {
    find: mariadbPrograms,
    package: 'mariadb-server',
    needs: 'the MySQL/MariaDB tests, which start their own server',
  },
}

/** True when KEEL_TEST_REQUIRE_ALL asks for every tool (CI). */
export const requireAll = () => ['1', 'true', 'yes'].includes(String(process.env.KEEL_TEST_REQUIRE_ALL ?? '').toLowerCase())

/** Why `tool` cannot be used ("... is not installed: apt-get install ..."), or false when it can. */
export function missing(tool) {
  const entry = TOOLS[tool]
  if (!entry) throw new Error(`unknown tool ${tool} (known: ${Object.keys(TOOLS).join(', ')})`)
  if (entry.asRoot && process.getuid?.() !== 0) return `${tool} needs root: run the tests as root`
  if (entry.find()) return false
  return `${tool} is not installed: apt-get install ${entry.package}`
}

/** Why tests needing all of `tools` are skipped, or false when they can run. */
export function skipReason(tools) {
  const reasons = tools.map(missing).filter(Boolean)
  return reasons.length ? reasons.join('; ') : false
}

/** The one line the check before a run prints, and whether the run may go on. */
export function checkLine() {
  const absent = Object.keys(TOOLS).filter((tool) => !TOOLS[tool].find())
  if (absent.length === 0) return { line: `tools: all found (${Object.keys(TOOLS).join(', ')})`, ok: true }
  const required = absent.filter((tool) => TOOLS[tool].required)
  const what = absent.map((tool) => `${tool} (${TOOLS[tool].required ? 'needed: ' : 'skips '}${TOOLS[tool].needs})`)
  const install = `apt-get install ${absent.map((tool) => TOOLS[tool].package).join(' ')}`
  const verdict = required.length
    ? 'the tests cannot run'
    : requireAll()
      ? 'KEEL_TEST_REQUIRE_ALL=1 makes those skips failures'
      : 'those tests are skipped'
  return { line: `tools: missing ${what.join(', ')}; ${verdict}. Install: ${install}`, ok: required.length === 0 && !requireAll() }
}

/**
 * What building for the Rust `targets` through zig (scripts/build.js) needs and
 * this machine lacks, with `extra` checks of the caller's own: each as
 * "what (the command that installs it)". Empty when everything is there.
 *
 * @param {string[]} targets
 * @param {Array<[string, () => unknown, string]>} extra [what, found?, install command]
 */
export function missingToCross(targets, extra = []) {
  const runs = (cmd, args) => spawnSync(cmd, args, { encoding: 'utf8' }).status === 0
  const installed = spawnSync('rustup', ['target', 'list', '--installed'], { encoding: 'utf8' }).stdout ?? ''
  return [
    ['zig', () => which('zig') || runs('python3', ['-m', 'ziglang', 'version']), 'pip install ziglang'],
    ['cargo-zigbuild', () => which('cargo-zigbuild', [join(process.env.HOME ?? '', '.cargo', 'bin')]), 'cargo install --locked cargo-zigbuild'],
    ...targets.map((target) => [`Rust's ${target} standard library`, () => installed.includes(target), `rustup target add ${target}`]),
    ...extra,
  ]
    .filter(([, found]) => !found())
    .map(([what, , install]) => `${what} (${install})`)
}

/**
 * Ends a script that cannot run for want of `absent` (missingToCross), saying
 * so: a skip, or a failure under CI=true or KEEL_TEST_REQUIRE_ALL=1.
 *
 * @param {string} label
 * @param {string[]} absent
 */
export function stopIfMissing(label, absent) {
  if (absent.length === 0) return
  console.error(`${label}: skipped: missing ${absent.join(', ')}`)
  process.exit(requireAll() || process.env.CI === 'true' ? 1 : 0)
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { line, ok } = checkLine()
  console.error(line)
  process.exit(ok ? 0 : 1)
}
