//! The function that does every operation on a semaphore or a read-write
//! key (`sql` makes it, named after its body, for each table).

/// Every operation on a semaphore or a read-write key, as one function so
/// each is one statement, one round trip, atomic. It takes a transaction
/// advisory lock on the key first, so operations on one key run one at a
/// time, and (READ COMMITTED, a volatile function) each statement after it
/// reads what the one before committed. Holds are rows of `{holds}`: kind
/// `s` a permit, `r` a reader, `w` the writer, `m` a waiting writer's mark
/// (its `expires_at` is when it lapses). Answers: a fencing token or NULL
/// (acquire), 1 or 0 (release, extend, waits, withdraw), ms left or -1
/// (left), how many hold (count).
pub(super) const HOLD_FUNCTION: &str = r#"
DECLARE
  now_ms bigint;
  mine "char" := CASE mode WHEN 'permit' THEN 's' WHEN 'read' THEN 'r' ELSE 'w' END;
  kinds "char"[] := CASE mode WHEN 'permit' THEN ARRAY['s']::"char"[] ELSE ARRAY['r', 'w', 'm']::"char"[] END;
  n bigint;
BEGIN
  IF current_setting('transaction_isolation') <> 'read committed' THEN
    RAISE EXCEPTION '{function} needs READ COMMITTED, and this transaction is %',
      current_setting('transaction_isolation');
  END IF;
  PERFORM pg_advisory_xact_lock(hashtext('keel-lock:{holds}:' || kinds[1]::text), hashtext(k));
  -- The clock is read once the key is ours: the wait for it does not count.
  now_ms := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
  DELETE FROM {holds} WHERE key = k AND kind = ANY (kinds) AND expires_at <= now_ms;
  IF op = 'acquire' THEN
    IF mode = 'write' THEN
      IF EXISTS (SELECT 1 FROM {holds} WHERE key = k AND (kind = 'r' OR (kind = 'w' AND owner <> who))) THEN
        INSERT INTO {holds} AS held VALUES ('m', k, '', now_ms + ttl)
          ON CONFLICT (key, kind, owner) DO UPDATE SET expires_at = greatest(held.expires_at, EXCLUDED.expires_at);
        RETURN NULL;
      END IF;
      DELETE FROM {holds} WHERE key = k AND kind = 'm';
    ELSIF NOT EXISTS (SELECT 1 FROM {holds} WHERE key = k AND kind = mine AND owner = who) THEN
      IF mode = 'permit' THEN
        SELECT count(*) INTO n FROM {holds} WHERE key = k AND kind = 's';
        IF n >= lim THEN RETURN NULL; END IF;
      ELSIF EXISTS (SELECT 1 FROM {holds} WHERE key = k AND kind IN ('w', 'm')) THEN
        RETURN NULL;
      END IF;
    END IF;
    INSERT INTO {holds} VALUES (mine, k, who, now_ms + ttl)
      ON CONFLICT (key, kind, owner) DO UPDATE SET expires_at = EXCLUDED.expires_at;
    RETURN nextval('{sequence}');
  ELSIF op = 'release' THEN
    DELETE FROM {holds} WHERE key = k AND kind = mine AND owner = who;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 AND octet_length(k) <= {max_announced_key} THEN
      PERFORM pg_notify('{channel}', CASE mode WHEN 'permit' THEN 's' ELSE 'r' END || k);
    END IF;
    RETURN n;
  ELSIF op = 'extend' THEN
    UPDATE {holds} SET expires_at = now_ms + ttl WHERE key = k AND kind = mine AND owner = who;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
  ELSIF op = 'left' THEN
    SELECT expires_at - now_ms INTO n FROM {holds} WHERE key = k AND kind = mine AND owner = who;
    RETURN coalesce(n, -1);
  ELSIF op = 'waits' THEN
    IF mode = 'permit' THEN
      SELECT count(*) INTO n FROM {holds} WHERE key = k AND kind = 's';
      RETURN (n >= lim)::int;
    END IF;
    RETURN EXISTS (SELECT 1 FROM {holds} WHERE key = k
      AND kind = ANY (CASE mode WHEN 'read' THEN ARRAY['w', 'm'] ELSE ARRAY['r', 'w'] END::"char"[]))::int;
  ELSIF op = 'count' THEN
    SELECT count(*) INTO n FROM {holds} WHERE key = k AND kind = ANY (kinds) AND kind <> 'm';
    RETURN n;
  ELSIF op = 'withdraw' THEN
    DELETE FROM {holds} WHERE key = k AND kind = 'm';
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
  END IF;
  RAISE EXCEPTION 'unknown operation %', op;
END
"#;
