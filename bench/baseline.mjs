// The in-run baseline: the documented lock algorithm written in plain JS, as
// a Node developer would write it without this package. A fresh owner from
// crypto.randomUUID() per acquisition, set-if-absent, compare-and-delete, and
// waiting by polling every retryDelay.

import { createHash, randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'

export class PlainLock {
  #owner = null
  constructor(store, key, ttlMs = 30_000) {
    this.store = store
    this.key = key
    this.ttlMs = ttlMs
  }

  async acquire({ timeout = 0, retryDelay = 50 } = {}) {
    const owner = randomUUID()
    const deadline = Date.now() + timeout
    for (;;) {
      if (await this.store.acquire(this.key, owner, this.ttlMs)) {
        this.#owner = owner
        return true
      }
      if (Date.now() >= deadline) return false
      await sleep(retryDelay)
    }
  }

  async release() {
    const owner = this.#owner
    if (owner === null) return false
    this.#owner = null
    return this.store.release(this.key, owner)
  }

  async run(fn, options) {
    if (!(await this.acquire(options))) return [false, undefined]
    try {
      return [true, await fn(this)]
    } finally {
      await this.release()
    }
  }
}

/** The in-memory store of the baseline: a Map with wall-clock expiry. */
export class PlainMemoryStore {
  #held = new Map()
  async acquire(key, owner, ttlMs) {
    const e = this.#held.get(key)
    if (e !== undefined && e.expiresAt > Date.now()) return false
    this.#held.set(key, { owner, expiresAt: Date.now() + ttlMs })
    return true
  }
  async release(key, owner) {
    const e = this.#held.get(key)
    if (e === undefined || e.owner !== owner) return false
    this.#held.delete(key)
    return e.expiresAt > Date.now()
  }
  async extend(key, owner, ttlMs) {
    const e = this.#held.get(key)
    if (e === undefined || e.owner !== owner || e.expiresAt <= Date.now()) return false
    e.expiresAt = Date.now() + ttlMs
    return true
  }
  async isLocked(key) {
    return (this.#held.get(key)?.expiresAt ?? 0) > Date.now()
  }
  async remainingTime(key) {
    const left = (this.#held.get(key)?.expiresAt ?? 0) - Date.now()
    return left > 0 ? left : null
  }
}

// The server's clock in epoch ms (and µs, a fresh key's first token), as
// MySqlLockStore reads it: every expiry is decided by the database server.
const NOW_MS = 'CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)'
const NOW_US = 'CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)'

/**
 * The MySQL/MariaDB store of the baseline, over a mysql2/promise pool, on
 * MySqlLockStore's table design: a row per key, found by the SHA-256 of the
 * key, the key beside it, the owner, `expires_at` on the server's clock and
 * the key's last fencing token, kept in the row (a release leaves the row,
 * free). Acquire is MySqlLockStore's own statement, an INSERT that takes
 * over a lapsed row (ON DUPLICATE KEY UPDATE), its token told by
 * LAST_INSERT_ID (0: refused); release and extend are owner-conditional
 * UPDATEs. Prepared statements (`execute`), as mysql2's README writes
 * parameterized SQL: prepared once per connection, then one round trip each.
 */
export class PlainMySqlStore {
  constructor(pool, table = 'plain_locks') {
    this.pool = pool
    this.table = table
    this.sql = {
      acquire: `INSERT INTO ${table} (id, k, owner, expires_at, token)
        VALUES (?, ?, ?, ${NOW_MS} + ?, LAST_INSERT_ID(${NOW_US}))
        ON DUPLICATE KEY UPDATE
          token = IF(expires_at <= ${NOW_MS} OR owner = VALUES(owner),
                     LAST_INSERT_ID(GREATEST(token + 1, ${NOW_US})), token + LAST_INSERT_ID(0)),
          owner = IF(LAST_INSERT_ID() > 0, VALUES(owner), owner),
          expires_at = IF(LAST_INSERT_ID() > 0, VALUES(expires_at), expires_at)`,
      release: `UPDATE ${table} SET owner = '', expires_at = ${NOW_MS}
        WHERE id = ? AND owner = ? AND expires_at > ${NOW_MS}`,
      extend: `UPDATE ${table} SET expires_at = ${NOW_MS} + ?
        WHERE id = ? AND owner = ? AND expires_at > ${NOW_MS}`,
      isLocked: `SELECT 1 FROM ${table} WHERE id = ? AND expires_at > ${NOW_MS}`,
    }
  }
  async createTable() {
    await this.pool.query(`CREATE TABLE IF NOT EXISTS ${this.table} (
      id BINARY(32) NOT NULL PRIMARY KEY, k MEDIUMBLOB NOT NULL, owner BLOB NOT NULL,
      expires_at BIGINT NOT NULL, token BIGINT NOT NULL) ENGINE=InnoDB`)
  }
  async acquire(key, owner, ttlMs) {
    const [r] = await this.pool.execute(this.sql.acquire, [id(key), Buffer.from(key), owner, ttlMs])
    // The fencing token (a caller would hand it on); 0 when refused.
    return r.insertId > 0
  }
  async release(key, owner) {
    const [r] = await this.pool.execute(this.sql.release, [id(key), owner])
    return r.affectedRows > 0
  }
  async extend(key, owner, ttlMs) {
    const [r] = await this.pool.execute(this.sql.extend, [ttlMs, id(key), owner])
    return r.affectedRows > 0
  }
  async isLocked(key) {
    const [rows] = await this.pool.execute(this.sql.isLocked, [id(key)])
    return rows.length > 0
  }
}

const id = (key) => createHash('sha256').update(key).digest()

/**
 * The SQLite store of the baseline, over better-sqlite3 (synchronous, as its
 * README uses it), on SqliteLockStore's table design and settings: WAL,
 * `synchronous = NORMAL`, a busy timeout; a row per key with its owner, its
 * expiry (the wall clock, as plain JS reads it) and a fencing token from a
 * counter row. Acquire is one IMMEDIATE transaction (read the row, take it
 * if free, count the token), release one owner-conditional DELETE: the same
 * statements SqliteLockStore runs, each prepared once.
 */
export class PlainSqliteStore {
  constructor(Database, path) {
    const db = new Database(path)
    db.pragma('journal_mode = WAL')
    db.pragma('synchronous = NORMAL')
    db.pragma('busy_timeout = 5000')
    db.exec(`CREATE TABLE IF NOT EXISTS plain_locks (
        key TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at INTEGER NOT NULL, token INTEGER NOT NULL) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS plain_counter (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
      INSERT OR IGNORE INTO plain_counter VALUES ('fencing', 0)`)
    const held = db.prepare('SELECT expires_at FROM plain_locks WHERE key = ?').pluck()
    const next = db.prepare("UPDATE plain_counter SET value = value + 1 WHERE name = 'fencing' RETURNING value").pluck()
    const take = db.prepare(
      `INSERT INTO plain_locks VALUES (?, ?, ?, ?) ON CONFLICT (key) DO UPDATE
         SET owner = excluded.owner, expires_at = excluded.expires_at, token = excluded.token`,
    )
    const release = db.prepare('DELETE FROM plain_locks WHERE key = ? AND owner = ? AND expires_at > ?')
    this.db = db
    this.acquireNow = db.transaction((key, owner, ttlMs) => {
      const now = Date.now()
      const expires = held.get(key)
      if (expires !== undefined && expires > now) return 0
      const token = next.get()
      take.run(key, owner, now + ttlMs, token)
      return token
    }).immediate
    this.releaseNow = (key, owner) => release.run(key, owner, Date.now()).changes > 0
  }
  async acquire(key, owner, ttlMs) {
    // The fencing token (a caller would hand it on); 0 when refused.
    return this.acquireNow(key, owner, ttlMs) > 0
  }
  async release(key, owner) {
    return this.releaseNow(key, owner)
  }
  close() {
    this.db.close()
  }
}
