// The docs' database store, as the docs write it; only `connection` comes from
// a local declaration (the core package has no database layer of its own).
import type { LockStore } from "@shaferllc/keel/core";
import { connection } from "./connection.js";

export const databaseLockStore = (table = "locks"): LockStore => ({
  async acquire(key, owner, ttlMs) {
    const now = Date.now();
    // Clear the row first if it has expired, then insert. The PK makes the
    // insert the atomic step: two racing writers, one unique-violation.
    await connection().write(`DELETE FROM ${table} WHERE key = ? AND expires_at <= ?`, [key, now]);
    try {
      await connection().write(
        `INSERT INTO ${table} (key, owner, expires_at) VALUES (?, ?, ?)`,
        [key, owner, now + ttlMs],
      );
      return true;
    } catch {
      return false; // someone else holds it
    }
  },
  async release(key, owner) {
    const res = await connection().write(`DELETE FROM ${table} WHERE key = ? AND owner = ?`, [key, owner]);
    return res.changes > 0;
  },
  async extend(key, owner, ttlMs) {
    const res = await connection().write(
      `UPDATE ${table} SET expires_at = ? WHERE key = ? AND owner = ? AND expires_at > ?`,
      [Date.now() + ttlMs, key, owner, Date.now()],
    );
    return res.changes > 0;
  },
  async isLocked(key) {
    const rows = await connection().select(
      `SELECT 1 FROM ${table} WHERE key = ? AND expires_at > ?`,
      [key, Date.now()],
    );
    return rows.length > 0;
  },
  async remainingTime(key) {
    const rows = await connection().select(`SELECT expires_at FROM ${table} WHERE key = ?`, [key]);
    const row = rows[0] as { expires_at: number } | undefined;
    if (!row) return null;
    const left = Number(row.expires_at) - Date.now();
    return left > 0 ? left : null;
  },
});
