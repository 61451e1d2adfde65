//! The procedure that does every operation on a semaphore or a read-write
//! key (`sql` names it after this body, per table).

/// Every operation on a semaphore or a read-write key, as one procedure so
/// each is one statement, one round trip, one transaction. One that writes
/// locks the key's row in `{keys}` first (making it if needed), so
/// operations on one key run one at a time, and (READ COMMITTED) each
/// statement after that reads what the one before committed; the clock is
/// read once the key is locked: the wait for it does not count. A read
/// (`left`, `waits`, `count`) writes nothing and locks nothing, counting
/// only holds that have not lapsed, so a read-only server answers it too. Holds are rows of `{holds}`: kind
/// `s` a permit, `r` a reader, `w` the writer, `m` a waiting writer's mark
/// (its `expires_at` is when it lapses). It answers one row: a fencing token
/// or NULL (acquire), 1 or 0 (release, extend, waits, withdraw), ms left or
/// -1 (left), how many hold (count).
pub(super) const HOLD_PROCEDURE: &str = r#"
BEGIN
  DECLARE now_ms BIGINT;
  DECLARE n BIGINT DEFAULT 0;
  DECLARE answer BIGINT DEFAULT NULL;
  DECLARE fam BINARY(1) DEFAULT IF(mode = 'permit', 's', 'r');
  DECLARE mine BINARY(1) DEFAULT CASE mode WHEN 'permit' THEN 's' WHEN 'read' THEN 'r' ELSE 'w' END;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  IF op IN ('left', 'waits', 'count') THEN
    SET now_ms = CAST(UNIX_TIMESTAMP(SYSDATE(3)) * 1000 AS SIGNED);
    IF op = 'left' THEN
      SET answer = COALESCE((SELECT expires_at - now_ms FROM {holds}
                             WHERE id = h AND kind = mine AND oid = o AND expires_at > now_ms), -1);
    ELSEIF op = 'count' THEN
      SET answer = (SELECT COUNT(*) FROM {holds} WHERE id = h AND expires_at > now_ms
                      AND IF(fam = 's', kind = 's', kind IN ('r', 'w')));
    ELSEIF mode = 'permit' THEN
      SET answer = (SELECT COUNT(*) FROM {holds} WHERE id = h AND kind = 's' AND expires_at > now_ms) >= lim;
    ELSE
      SET answer = EXISTS (SELECT 1 FROM {holds} WHERE id = h AND expires_at > now_ms
                             AND kind IN (IF(mode = 'read', 'w', 'r'), IF(mode = 'read', 'm', 'w')));
    END IF;
    SELECT answer;
  ELSE
    START TRANSACTION;
    INSERT INTO {keys} (id, family, k, token) VALUES (h, fam, key_bytes, 0)
      ON DUPLICATE KEY UPDATE token = token;
    SET now_ms = CAST(UNIX_TIMESTAMP(SYSDATE(3)) * 1000 AS SIGNED);
    DELETE FROM {holds} WHERE id = h AND IF(fam = 's', kind = 's', kind <> 's') AND expires_at <= now_ms;
    body: BEGIN
      IF op = 'acquire' THEN
        IF mode = 'write' THEN
          IF EXISTS (SELECT 1 FROM {holds} WHERE id = h AND (kind = 'r' OR (kind = 'w' AND oid <> o))) THEN
            INSERT INTO {holds} (id, kind, oid, owner, expires_at) VALUES (h, 'm', '', '', now_ms + ttl)
              ON DUPLICATE KEY UPDATE expires_at = GREATEST(expires_at, VALUES(expires_at));
            LEAVE body;
          END IF;
          DELETE FROM {holds} WHERE id = h AND kind = 'm';
        ELSEIF NOT EXISTS (SELECT 1 FROM {holds} WHERE id = h AND kind = mine AND oid = o) THEN
          IF mode = 'permit' THEN
            SELECT COUNT(*) INTO n FROM {holds} WHERE id = h AND kind = 's';
            IF n >= lim THEN LEAVE body; END IF;
          ELSEIF EXISTS (SELECT 1 FROM {holds} WHERE id = h AND kind IN ('w', 'm')) THEN
            LEAVE body;
          END IF;
        END IF;
        INSERT INTO {holds} (id, kind, oid, owner, expires_at) VALUES (h, mine, o, who, now_ms + ttl)
          ON DUPLICATE KEY UPDATE expires_at = VALUES(expires_at);
        UPDATE {keys} SET token = GREATEST(token + 1, CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000 AS SIGNED))
          WHERE id = h AND family = fam;
        SELECT token INTO answer FROM {keys} WHERE id = h AND family = fam;
      ELSEIF op = 'release' THEN
        DELETE FROM {holds} WHERE id = h AND kind = mine AND oid = o;
        SET answer = ROW_COUNT();
      ELSEIF op = 'extend' THEN
        UPDATE {holds} SET expires_at = now_ms + ttl WHERE id = h AND kind = mine AND oid = o;
        SET answer = (SELECT COUNT(*) FROM {holds} WHERE id = h AND kind = mine AND oid = o);
      ELSEIF op = 'withdraw' THEN
        DELETE FROM {holds} WHERE id = h AND kind = 'm';
        SET answer = ROW_COUNT();
      ELSE
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'unknown hold operation';
      END IF;
    END body;
    COMMIT;
    SELECT answer;
  END IF;
END"#;
