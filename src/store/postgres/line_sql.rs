//! The line a plain lock's waiters wait in on PostgreSQL (`store::line`),
//! in SQL: a table of places and one function that does every step of it.
//!
//! `<table>_line` holds one row per process waiting for a key: its id, when
//! it arrived (µs on the server's clock), when its place lapses, the owner
//! token a hand-over makes the lock and when the process asked for that
//! (`asked`, `store::line::Asked`); once the lock went to it, the fencing
//! token it was handed with (`handed`), until it claims it. The
//! function takes a transaction advisory lock on the key first, so a
//! release and a waiter taking its place never miss each other, and each
//! statement after it (READ COMMITTED, a volatile function) reads what the
//! one before committed. The process whose id is `<id>` is told of a lock
//! handed to it on the channel `keel_wake_<id>`, alone.
//!
//! A plain acquire stays one statement and, for a key nobody holds or
//! waits for, as cheap as a set-if-absent: the function runs only when
//! that insert took nothing; for a waiter whose process keeps its place
//! while the lock stays held, it renews the place without waiting for the
//! key's advisory lock. A release is one plain delete unless someone
//! may wait: a held row's `expires_at` is kept even, and made odd (one ms
//! later) by a waiter taking its place, which updates the row (a lock
//! handed over is odd until claimed, so that giving it back clears the
//! place it was handed to). A release
//! takes the key's advisory lock too, first: it waits for a waiter taking
//! its place and deletes (and returns) that waiter's version of the row,
//! so it always sees the mark, and only then calls the function; a waiter
//! that comes after it finds no row to mark, the lock freed, and hands it
//! on itself. So the TTL a row keeps is rounded up to
//! the even millisecond (at most 2 ms past what was asked, never short of
//! it), and the time left is told 1 ms short, never past what was asked.

/// Where the process whose id follows is told of a lock handed to it.
pub const WAKE_CHANNEL: &str = "keel_wake_";

/// What the store's statements of the line are made of for one table: the
/// objects, and the statements that call the function.
pub(super) struct LineSql {
    /// The line's table and function, made if missing.
    pub create: String,
    /// Whether both are there (one boolean column).
    pub exists: String,
    /// A plain lock's acquire: `$1` key, `$2` owner, `$3` TTL, `$4` this
    /// process's id ("" for one that never waits), `$5` how it waits
    /// (`Wait` as 0, 1, 2), `$6` a spare owner token, `$7` when it asked.
    /// Answers no row or NULL (refused), a fencing token, or `h <token>
    /// <owner>` (a lock handed to this process, claimed for this TTL).
    pub acquire: String,
    /// `$1` key, `$2` owner, `$4` this process's id (`$3`, `$7`: 0): no row
    /// (not held), or `1` or `0` (whether it was still held), then `
    /// <token> <asked> <owner>` when the lock went on to this process.
    pub release: String,
    /// A lock handed to this process claimed for its TTL (`$1`-`$7` as an
    /// acquire's): `1` or `0`.
    pub claim: String,
    /// Every waiter of this process (`$4`) gave up on `$1`: `1`.
    pub leave: String,
    /// Deletes a bounded batch (`$1`) of lapsed places, within the sweep.
    pub sweep: String,
}

impl LineSql {
    /// `now` is the statements' clock CTE, `sequence` the fencing counter.
    pub fn new(table: &str, sequence: &str, now: &str, lease_ms: u64, claim_ms: u64) -> Self {
        let line = format!("{table}_line");
        let join = |next: &str| JOIN.replace("{line}", &line).replace("{next}", next);
        let even_ttl = even("now.ms + $3::bigint");
        let hand_over = HAND_OVER
            .replace("{mark}", MARK)
            .replace("{table}", table)
            .replace("{line}", &line)
            .replace("{sequence}", sequence)
            .replace("{wake}", WAKE_CHANNEL);
        let body = LINE_FUNCTION
            .replace("{mark}", MARK)
            .replace("{join_who}", &join("who"))
            .replace("{join_spare}", &join("spare"))
            .replace("{hand_over}", &hand_over)
            .replace("{table}", table)
            .replace("{line}", &line)
            .replace("{sequence}", sequence)
            .replace("{even_ttl}", &even("now_ms + ttl"))
            .replace("{even_claim}", &even("now_ms + claim"));
        // Named after its body, as the hold function is (`sql`).
        let function = format!("{line}_{}", &super::hashes::name_of(&body)[5..13]);
        let call = |op: &str| {
            format!(
                "{function}('{op}', $1::text, $2::text, $3::bigint, $4::text, $5::int, $6::text, $7::bigint, {lease_ms}, {claim_ms})"
            )
        };
        LineSql {
            create: format!(
                "CREATE TABLE IF NOT EXISTS {line} (
                   key TEXT NOT NULL,
                   process TEXT NOT NULL,
                   arrived BIGINT NOT NULL,
                   lapses_at BIGINT NOT NULL,
                   next_owner TEXT NOT NULL,
                   handed BIGINT,
                   asked BIGINT NOT NULL DEFAULT 0,
                   PRIMARY KEY (key, process)
                 );
                 ALTER TABLE {line} ADD COLUMN IF NOT EXISTS asked BIGINT NOT NULL DEFAULT 0;
                 CREATE OR REPLACE FUNCTION {function}(op text, k text, who text, ttl bigint,
                   me text, code int, spare text, asked_ms bigint, lease bigint, claim bigint)
                   RETURNS text LANGUAGE plpgsql AS $fn${body}$fn$;"
            ),
            exists: format!(
                "to_regclass('{line}') IS NOT NULL
                 AND to_regprocedure('{function}(text,text,text,bigint,text,int,text,bigint,bigint,bigint)') IS NOT NULL"
            ),
            // A key with no row and nobody in line: one insert, no function
            // (unless more of this process wait behind the caller: the
            // function keeps them a place). DO NOTHING locks no row it finds,
            // so the function, which takes the key's advisory lock first and
            // rows after, never waits on it.
            acquire: format!(
                "WITH {now}, taken AS (
                   INSERT INTO {table} (key, owner, expires_at)
                   SELECT $1::text, $2::text, {even_ttl} FROM now
                   WHERE $5::int <> 2 AND NOT EXISTS (SELECT 1 FROM {line} WHERE key = $1::text)
                   ON CONFLICT (key) DO NOTHING
                   RETURNING 1
                 )
                 SELECT nextval('{sequence}')::text FROM taken
                 UNION ALL
                 SELECT {} WHERE NOT EXISTS (SELECT 1 FROM taken)",
                call("acquire")
            ),
            // The row goes; only when it was marked (someone may wait) does
            // the function run, to hand it on. The key's advisory lock comes
            // first (a one-time filter, before the row's lock), as in the
            // function: a waiter marking the row holds it, and would wait for
            // the row. (`$3` is not used: every statement of the line takes
            // the same seven parameters.)
            release: format!(
                "WITH {now}, gone AS (
                   DELETE FROM {table} WHERE key = $1::text AND owner = $2::text AND $3::bigint IS NOT NULL
                     AND (SELECT pg_advisory_xact_lock(hashtext('keel-lock:{line}'), hashtext($1::text))) IS NOT NULL
                   RETURNING expires_at
                 )
                 SELECT CASE WHEN gone.expires_at & 1 = 0 THEN (gone.expires_at > now.ms)::int::text
                   ELSE {function}('release', $1::text, $2::text, gone.expires_at, $4::text, $5::int, $6::text, $7::bigint, {lease_ms}, {claim_ms})
                 END
                 FROM gone, now"
            ),
            claim: format!("SELECT {}", call("claim")),
            leave: format!("SELECT {}", call("leave")),
            sweep: format!(
                "DELETE FROM {line} WHERE ctid = ANY (ARRAY(
                   SELECT ctid FROM {line}
                   WHERE lapses_at <= (extract(epoch FROM clock_timestamp()) * 1000)::bigint
                   LIMIT $1 FOR UPDATE SKIP LOCKED))"
            ),
        }
    }
}

/// `expr` (a time in ms) rounded up to the even millisecond: a held row's
/// expiry, which a waiter's mark makes odd.
pub(super) fn even(expr: &str) -> String {
    format!("(({expr}) + (({expr}) & 1))")
}

/// Mark the held row (its expiry made odd) if anyone waits in line, so its
/// release calls the function.
const MARK: &str = "UPDATE {table} SET expires_at = expires_at | 1
      WHERE key = k AND expires_at > now_ms AND expires_at & 1 = 0
        AND EXISTS (SELECT 1 FROM {line} WHERE key = k AND handed IS NULL);";

/// Take (or keep) this process's place at the back of the line, for the
/// owner token `{next}` a hand-over would make the lock, asked for at
/// `asked_ms`. A place kept keeps its arrival; one whose lock was handed
/// over (and not claimed) is a new one.
const JOIN: &str =
    "INSERT INTO {line} AS place (key, process, arrived, lapses_at, next_owner, handed, asked)
      VALUES (k, me, now_us, now_ms + lease, {next}, NULL, asked_ms)
      ON CONFLICT (key, process) DO UPDATE SET
        arrived = CASE WHEN place.handed IS NULL THEN place.arrived ELSE EXCLUDED.arrived END,
        lapses_at = EXCLUDED.lapses_at, next_owner = EXCLUDED.next_owner, handed = NULL,
        asked = EXCLUDED.asked;";

/// The lock (free) goes to the first in line, held for it `claim` ms (and
/// marked, so that its release, if it is given back unclaimed, clears the
/// place it went to), with a fencing token; its process is told alone
/// (unless it is this one, which learns it from the answer). Sets `first_p`, `first_next`, `first_asked`,
/// `tok` (the first is NULL when nobody was handed it).
const HAND_OVER: &str = "
    first_p := NULL;
    SELECT process, next_owner, asked INTO first_p, first_next, first_asked FROM {line}
      WHERE key = k AND handed IS NULL ORDER BY arrived, process LIMIT 1;
    IF first_p IS NOT NULL THEN
      INSERT INTO {table} AS held (key, owner, expires_at) VALUES (k, first_next, {even_claim} | 1)
        ON CONFLICT (key) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
        WHERE held.expires_at <= now_ms;
      IF FOUND THEN
        tok := nextval('{sequence}');
        UPDATE {line} SET handed = tok, lapses_at = now_ms + claim WHERE key = k AND process = first_p;
        {mark}
        told := tok || ' ' || first_asked || ' ' || first_next || ' ' || k;
        IF first_p <> me AND octet_length(told) < 8000 THEN
          PERFORM pg_notify('{wake}' || first_p, told);
        END IF;
      ELSE
        first_p := NULL;
      END IF;
    END IF;";

/// Every step of the line. `op`: `acquire` (take the lock if it is free and
/// nobody else's turn, or claim it if it was handed to this process; if
/// refused and `code` is not 0, wait in line), `release` (of a marked row
/// the release statement deleted, its expiry in `ttl`: hand it on),
/// `claim`, `leave`.
/// `code` 2: more of this process wait behind this one, so once it has the
/// lock the process keeps a place at the back, for the owner `spare`.
const LINE_FUNCTION: &str = r#"
DECLARE
  now_us bigint;
  now_ms bigint;
  first_p text;
  first_next text;
  first_asked bigint;
  tok bigint;
  told text;
  mine_owner text;
  mine_token bigint;
  held_until bigint;
BEGIN
  IF current_setting('transaction_isolation') <> 'read committed' THEN
    RAISE EXCEPTION 'the line of {table} needs READ COMMITTED, and this transaction is %',
      current_setting('transaction_isolation');
  END IF;
  -- A waiter whose process keeps its place while the lock stays held (and
  -- marked) renews the place alone: nothing else changes, so it does not
  -- queue for the key. (A place handed the lock meanwhile, re-read once its
  -- row is free, or a lock freed, goes on below.)
  IF op = 'acquire' AND code <> 0 AND me <> '' THEN
    now_ms := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
    UPDATE {line} SET lapses_at = now_ms + lease, next_owner = who, asked = asked_ms
      WHERE key = k AND process = me AND handed IS NULL
        AND EXISTS (SELECT 1 FROM {table} WHERE key = k AND expires_at > now_ms AND expires_at & 1 = 1);
    IF FOUND THEN RETURN NULL; END IF;
  END IF;
  PERFORM pg_advisory_xact_lock(hashtext('keel-lock:{line}'), hashtext(k));
  -- The clock is read once the key is ours: the wait for it does not count.
  now_us := (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
  now_ms := now_us / 1000;
  DELETE FROM {line} WHERE key = k AND lapses_at <= now_ms;
  IF op = 'acquire' THEN
    IF me <> '' THEN
      DELETE FROM {line} WHERE key = k AND process = me AND handed IS NOT NULL
        RETURNING next_owner, handed INTO mine_owner, mine_token;
      IF mine_token IS NOT NULL THEN
        UPDATE {table} SET expires_at = {even_ttl}
          WHERE key = k AND owner = mine_owner AND expires_at > now_ms;
        IF FOUND THEN
          IF code = 2 THEN {join_spare} END IF;
          {mark}
          RETURN 'h ' || mine_token || ' ' || mine_owner;
        END IF;
      END IF;
    END IF;
    SELECT process INTO first_p FROM {line}
      WHERE key = k AND handed IS NULL ORDER BY arrived, process LIMIT 1;
    IF first_p IS NULL OR first_p = me THEN
      INSERT INTO {table} AS held (key, owner, expires_at) VALUES (k, who, {even_ttl})
        ON CONFLICT (key) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
        WHERE held.expires_at <= now_ms OR held.owner = EXCLUDED.owner;
      IF FOUND THEN
        IF first_p IS NOT NULL THEN DELETE FROM {line} WHERE key = k AND process = me; END IF;
        IF code = 2 THEN {join_spare} END IF;
        {mark}
        RETURN nextval('{sequence}')::text;
      END IF;
    ELSIF NOT EXISTS (SELECT 1 FROM {table} WHERE key = k AND expires_at > now_ms) THEN
      {hand_over}
    END IF;
    IF code = 0 OR me = '' THEN RETURN NULL; END IF;
    {join_who}
    -- Mark the held row. A release deleting it meanwhile waits for this and
    -- sees the mark; one that deleted it first leaves no row to mark: the
    -- lock is free, and goes to the first in line now (this one, maybe).
    UPDATE {table} SET expires_at = expires_at | 1 WHERE key = k AND expires_at > now_ms;
    IF FOUND THEN RETURN NULL; END IF;
    {hand_over}
    IF first_p IS DISTINCT FROM me THEN RETURN NULL; END IF;
    DELETE FROM {line} WHERE key = k AND process = me;
    UPDATE {table} SET expires_at = {even_ttl} WHERE key = k AND owner = first_next;
    {mark}
    RETURN 'h ' || tok || ' ' || first_next;
  ELSIF op = 'release' THEN
    -- Its row is gone (the release statement deleted it), and was marked.
    held_until := ttl;
    IF me <> '' THEN
      DELETE FROM {line} WHERE key = k AND process = me AND handed IS NOT NULL AND next_owner = who;
    END IF;
    {hand_over}
    IF first_p = me THEN
      RETURN (held_until > now_ms)::int || ' ' || tok || ' ' || first_asked || ' ' || first_next;
    END IF;
    RETURN (held_until > now_ms)::int::text;
  ELSIF op = 'claim' THEN
    DELETE FROM {line} WHERE key = k AND process = me AND handed IS NOT NULL AND next_owner = who;
    UPDATE {table} SET expires_at = {even_ttl} WHERE key = k AND owner = who AND expires_at > now_ms;
    IF NOT FOUND THEN RETURN '0'; END IF;
    IF code = 2 THEN {join_spare} END IF;
    {mark}
    RETURN '1';
  ELSIF op = 'leave' THEN
    -- A lock handed to the place stays this process's, and the place with
    -- it, until claimed, given back or lapsed: the message telling it may
    -- yet reach a waiter of this process that came since.
    DELETE FROM {line} AS place WHERE key = k AND process = me
      AND (handed IS NULL OR NOT EXISTS (
        SELECT 1 FROM {table} WHERE key = k AND owner = place.next_owner AND expires_at > now_ms));
    IF NOT EXISTS (SELECT 1 FROM {table} WHERE key = k AND expires_at > now_ms) THEN
      {hand_over}
    END IF;
    RETURN '1';
  END IF;
  RAISE EXCEPTION 'unknown operation %', op;
END
"#;
