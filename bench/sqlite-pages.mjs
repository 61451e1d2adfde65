// node bench/sqlite-pages.mjs [--rounds=5]: what the page size of the file
// does to a sequential lock cycle, side by side in rounds, on fresh files in
// the temporary folder: keel's SqliteLockStore (`lock(k).run`) and the
// plain-JS baseline over better-sqlite3 (`PlainSqliteStore`, acquire and
// release), each on a file made with SQLite's default 4096-byte pages and on
// one with 1024-byte pages (what SqliteLockStore makes). Writes
// bench/sqlite-pages.json and prints the median and every round.

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import Database from 'better-sqlite3'
import { lock, setLockStore, SqliteLockStore } from '@shaferllc/keel/core'
import { PlainSqliteStore } from './baseline.mjs'

const rounds = Number(process.argv.find((a) => a.startsWith('--rounds='))?.slice(9) ?? 5)
const CYCLES = 20_000
const noop = async () => {}
const folder = mkdtempSync(join(tmpdir(), 'keel-pages-'))

/** A fresh file with pages of `size` bytes. */
function fileWithPages(size) {
  const path = join(mkdtempSync(join(folder, 'f-')), 'locks.db')
  const db = new Database(path)
  db.pragma(`page_size = ${size}`)
  db.exec('CREATE TABLE made_first (a)')
  db.close()
  return path
}

async function plain(size) {
  const store = new PlainSqliteStore(Database, fileWithPages(size))
  const started = performance.now()
  for (let i = 0; i < CYCLES; i++) {
    if (!(await store.acquire('k', 'o', 10_000))) throw new Error('refused')
    await noop()
    await store.release('k', 'o')
  }
  const us = ((performance.now() - started) * 1000) / CYCLES
  store.close()
  return us
}

async function keel(size) {
  const store = setLockStore(new SqliteLockStore(fileWithPages(size)))
  const started = performance.now()
  for (let i = 0; i < CYCLES; i++) if (!(await lock('k').run(noop))[0]) throw new Error('refused')
  const us = ((performance.now() - started) * 1000) / CYCLES
  await store.close()
  return us
}

const rows = {
  'plain JS + better-sqlite3, 4096-byte pages': () => plain(4096),
  'plain JS + better-sqlite3, 1024-byte pages': () => plain(1024),
  'keel SqliteLockStore, 4096-byte pages': () => keel(4096),
  'keel SqliteLockStore, 1024-byte pages': () => keel(1024),
}
const seen = Object.fromEntries(Object.keys(rows).map((name) => [name, []]))
for (let round = 0; round < rounds; round++) {
  for (const [name, run] of Object.entries(rows)) seen[name].push(await run())
}
rmSync(folder, { recursive: true, force: true })
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]
const result = { at: new Date().toISOString(), cycles: CYCLES, rounds, usPerCycle: seen }
for (const [name, values] of Object.entries(seen)) {
  console.log(`${name.padEnd(44)} median ${median(values).toFixed(1)} us/cycle  (${values.map((v) => v.toFixed(1)).join(' ')})`)
}
writeFileSync(fileURLToPath(new URL('./sqlite-pages.json', import.meta.url)), `${JSON.stringify(result, null, 2)}\n`)
