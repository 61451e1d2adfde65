//! The line a plain lock's waiters wait in on MySQL (`store::line`), in
//! SQL: a table of places, the procedure that does every step of it, and
//! the procedure a waiting process's ear waits in.
//!
//! `<table>_line` holds one row per process waiting for a key: the key (its
//! row id and its bytes), the process's id, when it arrived (µs on the
//! server's clock), when its place lapses, the owner token a hand-over makes
//! the lock and when the process asked for that (`asked`,
//! `store::line::Asked`); once the lock went to it, the fencing token it was
//! handed with (`handed`), until it claims it, and which of its ear's waits
//! told it (`told`, 0 until one did).
//!
//! A key's steps of the line run one at a time: the procedure starts a
//! transaction and locks the key's row of the lock table first (making it,
//! free, if missing), and every plain statement on the key waits for that
//! row too. A row's `expires_at` is kept even while nobody waits for its
//! key, and made odd (one ms later) by a waiter taking its place; it stays
//! odd, held or free, until the line is empty (a lock handed over is odd
//! until claimed, so that giving it back clears the place it was handed
//! to). So a plain acquire stays one INSERT, which takes only an even row
//! (free, or already this owner's): refused, a waiter sends the procedure
//! next, which takes the lock if it is its turn or takes a place. A release
//! stays one UPDATE, which frees the row keeping its mark and says whether
//! it was marked: then the procedure hands the lock on. So the TTL a row
//! keeps is rounded up to the even millisecond (at most 2 ms past what was
//! asked, never short of it), and the time left is told 1 ms short, never
//! past what was asked.
//!
//! MySQL has no LISTEN/NOTIFY. A process with waiters keeps one connection
//! in the ear procedure: it holds the user lock `keel:ear:<hash>` named
//! after the process's id (so whoever hands it a lock finds that session's
//! id, `IS_USED_LOCK`) and waits for a user lock another connection of the
//! process holds; a hand-over, once committed, ends the wait with `KILL
//! QUERY`, and the ear answers what was handed to its process. Killing the query of a session needs no privilege when both run
//! as the same user; where one may not (another user, a proxy that gives
//! other ids), the hand-over still happens and the waiter finds it at its
//! next attempt, within its retryDelay or the line's renewal.

use crate::store::line::{CLAIM_MS, LEASE_MS};

/// The line's objects and the statements that call them, for one table.
pub(super) struct LineSql {
    /// The line's table.
    pub create_table: String,
    /// The procedure of its steps, and the ear's.
    pub create_procedures: [String; 2],
    /// Their names (`<table>_line_<hash>`, `<table>_ear_<hash>`), for the
    /// check that they exist; each may have its database in front.
    pub names: [String; 2],
    /// `CALL` of the line's procedure: `?` the step, key id, key bytes,
    /// owner, TTL, this process's id, how it waits (`Wait` as 0, 1, 2), a
    /// spare owner token, when it asked.
    pub call: String,
}

impl LineSql {
    /// `table` as the store was given it (`name` or `db.name`), `name`
    /// without its database (a routine's statements run in the database it
    /// belongs to, which is the tables').
    pub fn new(table: &str, name: &str) -> Self {
        let line = format!("{table}_line");
        let body = LINE_PROCEDURE
            .replace("{join_who}", &JOIN.replace("{next}", "who"))
            .replace("{join_spare}", &JOIN.replace("{next}", "spare"))
            .replace("{hand_over}", HAND_OVER)
            .replace("{mark}", MARK)
            .replace("{ear_of_wake}", &ear_name(name, "wake"))
            .replace("{even_ttl}", &even("now_ms + ttl"))
            .replace("{even_claim}", &even(&format!("now_ms + {CLAIM_MS}")))
            .replace("{lease}", &LEASE_MS.to_string())
            .replace("{claim}", &CLAIM_MS.to_string())
            .replace("{line}", &format!("{name}_line"))
            .replace("{table}", name);
        let ear_body = EAR_PROCEDURE
            .replace("{ear}", &ear_name(name, "me"))
            .replace("{line}", &format!("{name}_line"));
        let qualified = |kind: &str, body: &str| {
            let named = format!(
                "{name}_{kind}_{}",
                super::hashes::hash_hex(body.as_bytes())[..8].to_ascii_lowercase()
            );
            match table.split_once('.') {
                Some((database, _)) => format!("{database}.{named}"),
                None => named,
            }
        };
        let (procedure, ear) = (qualified("line", &body), qualified("ear", &ear_body));
        let create = |name: &str, params: &str, body: &str| {
            format!(
                "CREATE PROCEDURE /*!80029 IF NOT EXISTS */ /*M!100103 IF NOT EXISTS */ {name}({params})
                 MODIFIES SQL DATA SQL SECURITY INVOKER{body}"
            )
        };
        LineSql {
            create_table: format!(
                "CREATE TABLE IF NOT EXISTS {line} (
                   id BINARY(32) NOT NULL,
                   process VARBINARY(64) NOT NULL,
                   k MEDIUMBLOB NOT NULL,
                   arrived BIGINT NOT NULL,
                   lapses_at BIGINT NOT NULL,
                   next_owner BLOB NOT NULL,
                   handed BIGINT NULL,
                   asked BIGINT NOT NULL,
                   told BIGINT NOT NULL DEFAULT 0,
                   PRIMARY KEY (id, process),
                   KEY (process)
                 ) ENGINE=InnoDB"
            ),
            create_procedures: [
                create(
                    &procedure,
                    "op VARCHAR(8), h BINARY(32), k MEDIUMBLOB, who BLOB, ttl BIGINT, me VARBINARY(64),
                     code INT, spare BLOB, asked_ms BIGINT",
                    &body,
                ),
                create(&ear, "me VARBINARY(64), bed VARCHAR(64), most_s DOUBLE", &ear_body),
            ],
            call: format!("CALL {procedure}(?, ?, ?, ?, ?, ?, ?, ?, ?)"),
            names: [procedure, ear],
        }
    }
}

/// `expr` (a time in ms) rounded up to the even millisecond: a held row's
/// expiry, which a waiter's mark makes odd.
pub(super) fn even(expr: &str) -> String {
    format!("((({expr}) + 1) DIV 2 * 2)")
}

/// The user lock the ear of the process whose id is in the variable
/// `process` holds, named after the routine's database, the lock table and
/// the process (user locks are server-wide; at most 64 characters).
fn ear_name(table: &str, process: &str) -> String {
    format!("CONCAT('keel:ear:', LEFT(SHA2(CONCAT(DATABASE(), '.{table}', CHAR(0), {process}), 256), 40))")
}

/// Mark the held row (its expiry made odd) if anyone waits in line, so its
/// release calls the procedure.
const MARK: &str = "UPDATE {table} SET expires_at = expires_at | 1
      WHERE id = h AND expires_at > now_ms AND expires_at & 1 = 0
        AND EXISTS (SELECT 1 FROM {line} WHERE id = h AND handed IS NULL);";

/// Take (or keep) this process's place at the back of the line, for the
/// owner token `{next}` a hand-over would make the lock, asked for at
/// `asked_ms`. A place kept keeps its arrival; one whose lock was handed
/// over (and not claimed) is a new one. (Assignments run left to right:
/// `arrived` reads the old `handed`.)
const JOIN: &str =
    "INSERT INTO {line} (id, process, k, arrived, lapses_at, next_owner, handed, asked, told)
      VALUES (h, me, k, now_us, now_ms + {lease}, {next}, NULL, asked_ms, 0)
      ON DUPLICATE KEY UPDATE
        arrived = IF(handed IS NULL, arrived, VALUES(arrived)),
        lapses_at = VALUES(lapses_at), next_owner = VALUES(next_owner), handed = NULL,
        asked = VALUES(asked), told = 0;";

/// The lock (free) goes to the first in line, held for it the claim window
/// (and marked, so that its release, if it is given back unclaimed, clears
/// the place it went to), with a fencing token; its process's ear is woken
/// once this commits (unless it is this process, which learns it from the
/// answer). Sets `first_p`, `first_next`, `first_asked`, `tok` (`first_p`
/// NULL when nobody was handed it).
const HAND_OVER: &str = "
    SET first_p = NULL, first_next = NULL, first_asked = NULL;
    SELECT process, next_owner, asked INTO first_p, first_next, first_asked FROM {line}
      WHERE id = h AND handed IS NULL ORDER BY arrived, process LIMIT 1;
    IF first_p IS NOT NULL THEN
      IF EXISTS (SELECT 1 FROM {table} WHERE id = h AND expires_at <= now_ms) THEN
        UPDATE {table} SET token = GREATEST(token + 1, now_us), owner = first_next,
          expires_at = {even_claim} + 1 WHERE id = h;
        SELECT token INTO tok FROM {table} WHERE id = h;
        UPDATE {line} SET handed = tok, lapses_at = now_ms + {claim}, told = 0
          WHERE id = h AND process = first_p;
        IF first_p <> me THEN SET wake = first_p; END IF;
      ELSE
        SET first_p = NULL;
      END IF;
    END IF;";

/// Every step of the line. `op`: `acquire` (take the lock if it is free and
/// nobody else's turn, or claim it if it was handed to this process; if
/// refused and `code` is not 0, wait in line), `release` (the plain
/// release freed `who`'s marked row: clear a place it was handed to, and
/// hand it on),
/// `claim`, `leave`. `code` 2: more of this process wait behind this one,
/// so once it has the lock the process keeps a place at the back, for the
/// owner `spare`. It answers one row.
const LINE_PROCEDURE: &str = r#"
BEGIN
  DECLARE now_us, now_ms, tok, first_asked, mine_token, ear BIGINT DEFAULT NULL;
  DECLARE first_p, wake VARBINARY(64) DEFAULT NULL;
  DECLARE first_next, mine_owner BLOB DEFAULT NULL;
  DECLARE answer BLOB DEFAULT NULL;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION;
  INSERT INTO {table} (id, k, owner, expires_at, token) VALUES (h, k, '', 0, 0)
    ON DUPLICATE KEY UPDATE token = token;
  -- The clock is read once the key is ours: the wait for it does not count.
  SET now_us = CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000 AS SIGNED);
  SET now_ms = now_us DIV 1000;
  DELETE FROM {line} WHERE id = h AND lapses_at <= now_ms;
  step: BEGIN
    IF op = 'acquire' THEN
      IF me <> '' THEN
        SELECT next_owner, handed INTO mine_owner, mine_token FROM {line}
          WHERE id = h AND process = me AND handed IS NOT NULL;
        IF mine_token IS NOT NULL THEN
          DELETE FROM {line} WHERE id = h AND process = me;
          IF EXISTS (SELECT 1 FROM {table} WHERE id = h AND owner = mine_owner AND expires_at > now_ms) THEN
            UPDATE {table} SET expires_at = {even_ttl} WHERE id = h;
            IF code = 2 THEN {join_spare} END IF;
            {mark}
            SET answer = CONCAT('h ', mine_token, ' ', mine_owner);
            LEAVE step;
          END IF;
        END IF;
      END IF;
      SELECT process INTO first_p FROM {line}
        WHERE id = h AND handed IS NULL ORDER BY arrived, process LIMIT 1;
      -- Free and nobody else's turn, or this owner's already (an acquire
      -- sent again after its answer was lost).
      IF EXISTS (SELECT 1 FROM {table} WHERE id = h AND owner = who AND expires_at > now_ms)
        OR ((first_p IS NULL OR first_p = me)
          AND EXISTS (SELECT 1 FROM {table} WHERE id = h AND expires_at <= now_ms)) THEN
        UPDATE {table} SET token = GREATEST(token + 1, now_us), owner = who, expires_at = {even_ttl}
          WHERE id = h;
        SELECT token INTO tok FROM {table} WHERE id = h;
        IF first_p = me THEN DELETE FROM {line} WHERE id = h AND process = me; END IF;
        IF code = 2 THEN {join_spare} END IF;
        {mark}
        SET answer = tok;
        LEAVE step;
      END IF;
      IF first_p IS NOT NULL AND first_p <> me
        AND NOT EXISTS (SELECT 1 FROM {table} WHERE id = h AND expires_at > now_ms) THEN
        {hand_over}
      END IF;
      IF code = 0 OR me = '' THEN LEAVE step; END IF;
      {join_who}
      -- Mark the held row: a release waiting for it sees the mark. Free,
      -- the lock goes to the first in line now (this one, maybe).
      IF EXISTS (SELECT 1 FROM {table} WHERE id = h AND expires_at > now_ms) THEN
        UPDATE {table} SET expires_at = expires_at | 1 WHERE id = h;
        LEAVE step;
      END IF;
      {hand_over}
      IF first_p IS NULL OR first_p <> me THEN LEAVE step; END IF;
      DELETE FROM {line} WHERE id = h AND process = me;
      UPDATE {table} SET expires_at = {even_ttl} WHERE id = h AND owner = first_next;
      {mark}
      SET answer = CONCAT('h ', tok, ' ', first_next);
    ELSEIF op = 'release' THEN
      IF me <> '' THEN
        DELETE FROM {line} WHERE id = h AND process = me AND handed IS NOT NULL AND next_owner = who;
      END IF;
      IF NOT EXISTS (SELECT 1 FROM {table} WHERE id = h AND expires_at > now_ms) THEN
        {hand_over}
      END IF;
      SET answer = '1';
      IF first_p = me THEN
        SET answer = CONCAT(answer, ' ', tok, ' ', first_asked, ' ', first_next);
      END IF;
    ELSEIF op = 'claim' THEN
      DELETE FROM {line} WHERE id = h AND process = me AND handed IS NOT NULL AND next_owner = who;
      IF NOT EXISTS (SELECT 1 FROM {table} WHERE id = h AND owner = who AND expires_at > now_ms) THEN
        SET answer = '0';
        LEAVE step;
      END IF;
      UPDATE {table} SET expires_at = {even_ttl} WHERE id = h;
      IF code = 2 THEN {join_spare} END IF;
      {mark}
      SET answer = '1';
    ELSEIF op = 'leave' THEN
      -- A lock handed to the place stays this process's, and the place with
      -- it, until claimed, given back or lapsed: the message telling it may
      -- yet reach a waiter of this process that came since.
      DELETE FROM {line} WHERE id = h AND process = me
        AND (handed IS NULL OR NOT EXISTS (
          SELECT 1 FROM {table} WHERE id = h AND owner = {line}.next_owner AND expires_at > now_ms));
      IF NOT EXISTS (SELECT 1 FROM {table} WHERE id = h AND expires_at > now_ms) THEN
        {hand_over}
      END IF;
      SET answer = '1';
    END IF;
  END step;
  -- A free row nobody waits for is unmarked again: plain acquires take it.
  UPDATE {table} SET expires_at = expires_at - 1
    WHERE id = h AND expires_at <= now_ms AND expires_at & 1 = 1
      AND NOT EXISTS (SELECT 1 FROM {line} WHERE id = h);
  COMMIT;
  IF wake IS NOT NULL THEN
    wake: BEGIN
      -- Its ear has gone (1094), or may not be woken by this user (1095):
      -- the waiter finds the lock at its next attempt.
      DECLARE CONTINUE HANDLER FOR 1094, 1095 BEGIN END;
      SET ear = IS_USED_LOCK({ear_of_wake});
      IF ear IS NOT NULL THEN KILL QUERY ear; END IF;
    END wake;
  END IF;
  SELECT answer;
END"#;

/// The ear of the process `me`: it holds the process's user lock (waiting
/// for it while an ear of the process from before, whose connection died,
/// still holds it), then answers every lock handed to the process that no
/// ear told yet (`handed`, `asked`, `next_owner`, `k`), marking them told;
/// if there are none, it waits up to `most_s` for the user lock `bed`, which
/// another connection of the process holds all along (a hand-over ends the
/// wait), and looks once more. No row: nothing was handed meanwhile. One row
/// of NULLs: another connection holds the process's user lock, or nobody
/// holds `bed` (its connection is gone). (A wait for a user lock, not
/// `SLEEP()`: MariaDB 10.11 was seen to hang a `KILL QUERY` of a session in
/// `SLEEP()` inside a procedure, and every new connection with it.)
const EAR_PROCEDURE: &str = r#"
BEGIN
  DECLARE ear VARCHAR(64) DEFAULT {ear};
  DECLARE n BIGINT DEFAULT UUID_SHORT();
  IF NOT (IS_USED_LOCK(ear) <=> CONNECTION_ID()) AND NOT (GET_LOCK(ear, most_s) <=> 1) THEN
    SELECT NULL, NULL, NULL, NULL;
  ELSE
    UPDATE {line} SET told = n WHERE process = me AND handed IS NOT NULL AND told = 0;
    IF ROW_COUNT() = 0 AND GET_LOCK(bed, most_s) <=> 1 THEN
      DO RELEASE_LOCK(bed);
      SELECT NULL, NULL, NULL, NULL;
    ELSE
      UPDATE {line} SET told = n WHERE process = me AND handed IS NOT NULL AND told = 0;
      SELECT handed, asked, next_owner, k FROM {line} WHERE process = me AND told = n;
    END IF;
  END IF;
END"#;
