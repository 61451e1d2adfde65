// node bench/mysql-ceiling.mjs [--rounds=3]: the MySQL locks against what
// the server itself does with a lock cycle, on a MariaDB of its own started
// twice: durable (every commit synced: the server's default, and how
// `npm run bench` runs it) and with commits written at once but synced about
// once a second (innodb_flush_log_at_trx_commit = 2, as `npm run bench` runs
// PostgreSQL: fsync off), so the disk's sync time is out of the figures. On
// each, in rounds, side by side: `mariadb-slap` (the server's own load
// client, in C) sending a cycle's two statements, the acquire's INSERT ...
// ON DUPLICATE KEY UPDATE and the release's UPDATE, as text, one round trip
// each, each client on a key of its own, at 1 and 64 clients; then keel's
// MySqlLockStore and the plain-JS baseline over mysql2 in scenarios 1
// (sequential) and 2 (64 keys) of `npm run bench`, at their defaults (4
// connections each). Cycles per second are the server's INSERTs
// (Com_insert) over the time mariadb-slap reports. Writes
// bench/mysql-ceiling.json and prints a table per setting.

import { spawnSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { cpus } from 'node:os'
import { fileURLToPath } from 'node:url'
import mysql from 'mysql2/promise'
import { startMariaDb } from '../support/mariadb.mjs'
import { IMPLEMENTATIONS } from './implementations.mjs'
import { sequential, distinctKeys, median } from './scenarios.mjs'

const rounds = Number(process.argv.find((a) => a.startsWith('--rounds='))?.split('=')[1] ?? 3)
const MS = 3_000
const SLAP = 'mariadb-slap, the two statements as text'
const NAMES = ['keel MySqlLockStore', 'plain JS + mysql2 (baseline)']
const BASELINE = NAMES[1]
const NOW_MS = 'CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)'
const NOW_US = 'CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)'
// Each mariadb-slap client locks a key of its own: its connection's id.
const ID = 'UNHEX(SHA2(CONNECTION_ID(), 256))'
const CYCLE = [
  `INSERT INTO slap_locks (id, k, owner, expires_at, token)
   VALUES (${ID}, CONNECTION_ID(), 'o', ${NOW_MS} + 30000, LAST_INSERT_ID(${NOW_US}))
   ON DUPLICATE KEY UPDATE
     token = IF(expires_at <= ${NOW_MS} OR owner = VALUES(owner), LAST_INSERT_ID(GREATEST(token + 1, ${NOW_US})), token + LAST_INSERT_ID(0)),
     owner = IF(LAST_INSERT_ID() > 0, VALUES(owner), owner),
     expires_at = IF(LAST_INSERT_ID() > 0, VALUES(expires_at), expires_at)`,
  `UPDATE slap_locks SET owner = '', expires_at = ${NOW_MS} WHERE id = ${ID} AND owner = 'o' AND expires_at > ${NOW_MS}`,
]
  .map((s) => s.replace(/\s+/g, ' '))
  .join(';')

const probe = spawnSync('mariadb-slap', ['--version'], { encoding: 'utf8' })
if (probe.error) {
  console.error('mariadb-slap is missing: apt-get install mariadb-client')
  process.exit(1)
}

/** Every figure on a server started with `durable`: { name: { 1: [per round], 64: [...] } }. */
async function measure(durable) {
  const server = await startMariaDb({ durable })
  const admin = await mysql.createConnection(server.url)
  await admin.query(`CREATE TABLE slap_locks (id BINARY(32) NOT NULL PRIMARY KEY, k MEDIUMBLOB NOT NULL,
    owner BLOB NOT NULL, expires_at BIGINT NOT NULL, token BIGINT NOT NULL) ENGINE=InnoDB`)
  const inserts = async () => Number((await admin.query("SHOW GLOBAL STATUS LIKE 'Com_insert'"))[0][0].Value)
  /** mariadb-slap's cycles per second with `clients` clients, each running `cycles` cycles. */
  const slap = async (clients, cycles) => {
    const before = await inserts()
    const args = ['--host=127.0.0.1', `--port=${server.port}`, '--user=root', '--create-schema=test', `--concurrency=${clients}`]
    args.push('--iterations=1', `--number-of-queries=${2 * cycles * clients}`, '--delimiter=;', `--query=${CYCLE}`)
    const out = spawnSync('mariadb-slap', args, { encoding: 'utf8' })
    const seconds = Number(/Average number of seconds to run all queries: ([\d.]+)/.exec(out.stdout)?.[1])
    if (!(seconds > 0)) throw new Error(`mariadb-slap: ${out.stderr || out.stdout}`)
    return ((await inserts()) - before) / seconds
  }
  const opened = {}
  for (const name of NAMES) opened[name] = await IMPLEMENTATIONS[name].open({ mysqlUrl: server.url })
  const results = Object.fromEntries([SLAP, ...NAMES].map((n) => [n, { 1: [], 64: [] }]))
  // mariadb-slap runs a count of cycles: calibrated to about MS a run.
  const rate = { 1: await slap(1, 200), 64: await slap(64, 20) }
  for (let round = 0; round < rounds; round++) {
    for (const clients of [1, 64]) {
      results[SLAP][clients].push(await slap(clients, Math.max(10, Math.round((rate[clients] * MS) / 1000 / clients))))
      for (const name of NAMES) {
        opened[name].install?.()
        const scenario = clients === 1 ? sequential : distinctKeys
        results[name][clients].push((await scenario(opened[name], { ms: MS })).cyclesPerSec)
      }
    }
    process.stderr.write(`${durable ? 'durable' : 'not synced'}: round ${round + 1}/${rounds} done\n`)
  }
  for (const impl of Object.values(opened)) await impl.close()
  await admin.end()
  await server.close()
  return results
}

const ratio = (a, b) => median(a.map((v, i) => v / b[i]))
const settings = []
for (const durable of [true, false]) {
  const results = await measure(durable)
  const rows = Object.entries(results).map(([name, by]) => ({
    name,
    sequential: median(by[1]),
    loops64: median(by[64]),
    sequentialVsSlap: ratio(by[1], results[SLAP][1]),
    loops64VsSlap: ratio(by[64], results[SLAP][64]),
    sequentialVsBaseline: ratio(by[1], results[BASELINE][1]),
    loops64VsBaseline: ratio(by[64], results[BASELINE][64]),
  }))
  settings.push({ durable, rows })
}
const report = { date: new Date().toISOString(), machine: `${cpus().length} cores (${cpus()[0]?.model})`, rounds, ms: MS, settings }
writeFileSync(fileURLToPath(new URL('./mysql-ceiling.json', import.meta.url)), `${JSON.stringify(report, null, 2)}\n`)
for (const { durable, rows } of settings) {
  console.log(`\n${durable ? 'Durable (every commit synced)' : 'Commits not synced each time (innodb_flush_log_at_trx_commit = 2)'}`)
  console.log('| implementation | (1) sequential, cycles/s | (2) 64 keys, cycles/s |')
  console.log('|---|---|---|')
  const cell = (v, slap, base) => `${Math.round(v)} (${slap.toFixed(2)}x mariadb-slap, ${base.toFixed(2)}x baseline)`
  for (const r of rows) {
    console.log(`| ${r.name} | ${cell(r.sequential, r.sequentialVsSlap, r.sequentialVsBaseline)} | ${cell(r.loops64, r.loops64VsSlap, r.loops64VsBaseline)} |`)
  }
}
