//! The Lua scripts, on one page: what runs atomically on the server for each
//! operation that has to compare before it acts.
//!
//! Keys and owner tokens reach them only as `KEYS` and `ARGV`, never spliced
//! into the script text, so any key is data. A connection sends each as
//! `EVAL` the first time and as `EVALSHA` after, and as `EVAL` again if the
//! server answers `NOSCRIPT` (`request.rs`; on Tokio the redis crate's
//! `Script` does the same).

/// Set-if-absent (or find the key already ours: this acquire, sent before,
/// whose reply was lost), and then the next fencing token from the counter
/// in KEYS[2].
pub const ACQUIRE: &str = r#"
if redis.call("set", KEYS[1], ARGV[1], "PX", ARGV[2], "NX") or redis.call("get", KEYS[1]) == ARGV[1] then
  return redis.call("incr", KEYS[2])
end
return false
"#;

/// Compare-and-extend, same idea.
pub const EXTEND: &str = r#"
if redis.call("get", KEYS[1]) == ARGV[1] then
  return redis.call("pexpire", KEYS[1], ARGV[2])
end
return 0
"#;

/// Compare-and-delete: only the holder's own token deletes the key; the
/// release is announced on the channel in ARGV[2].
pub const RELEASE: &str = r#"
if redis.call("get", KEYS[1]) == ARGV[1] then
  redis.call("del", KEYS[1])
  redis.call("publish", ARGV[2], KEYS[1])
  return 1
end
return 0
"#;

/// What every script on a semaphore or a read-write key starts with. KEYS:
/// [1] the holds (a semaphore's permits or a read-write key's readers: a
/// sorted set of owner -> expiry, in ms on the server's clock), [2] the
/// writer (owner, with its TTL), [3] a waiting writer's mark (with its TTL),
/// [4] the fencing counter; all four in one hash slot. ARGV: [1] the mode
/// (`permit`, `read`, `write`), [2] the owner, [3] a TTL in ms, [4] a
/// semaphore's limit, [5] the channel a release is announced on. A hold is
/// live while its expiry is after `now`; expired ones are dropped where a
/// count needs it, and the set's own TTL is never shorter than its longest
/// hold.
macro_rules! holds_prelude {
    () => {
        r#"
local t = redis.call("time")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local mode, owner = ARGV[1], ARGV[2]
local function live_count()
  redis.call("zremrangebyscore", KEYS[1], "-inf", now)
  return redis.call("zcard", KEYS[1])
end
local function mine()
  local expires = redis.call("zscore", KEYS[1], owner)
  if expires and tonumber(expires) > now then return tonumber(expires) end
  return nil
end
local function keep(at)
  local left = redis.call("pttl", KEYS[1])
  if left < 0 or now + left < at then redis.call("pexpireat", KEYS[1], at) end
end
local function writer() return redis.call("get", KEYS[2]) end
"#
    };
}

/// Take a hold: a fencing token, or false. A writer refused leaves its
/// mark, so readers coming later wait behind it.
pub const HOLD_ACQUIRE: &str = concat!(
    holds_prelude!(),
    r#"
local ttl = tonumber(ARGV[3])
if mode == "write" then
  local w = writer()
  if w == owner or (not w and live_count() == 0) then
    redis.call("set", KEYS[2], owner, "PX", ttl)
    redis.call("del", KEYS[3])
    return redis.call("incr", KEYS[4])
  end
  if redis.call("pttl", KEYS[3]) < ttl then redis.call("set", KEYS[3], owner, "PX", ttl) end
  return false
end
if not mine() then
  if mode == "permit" then
    local limit = tonumber(ARGV[4])
    if redis.call("zcard", KEYS[1]) >= limit and live_count() >= limit then return false end
  elseif redis.call("exists", KEYS[2], KEYS[3]) > 0 then
    return false
  end
end
redis.call("zadd", KEYS[1], now + ttl, owner)
keep(now + ttl)
return redis.call("incr", KEYS[4])
"#
);

/// Let a hold go (1) if it is the owner's, announcing it.
pub const HOLD_RELEASE: &str = concat!(
    holds_prelude!(),
    r#"
local released = 0
if mode == "write" then
  if writer() == owner then released = redis.call("del", KEYS[2]) end
else
  if mine() then released = 1 end
  redis.call("zrem", KEYS[1], owner)
end
if released == 1 then redis.call("publish", ARGV[5], KEYS[1]) end
return released
"#
);

/// Give the owner's live hold a new TTL (1), or 0.
pub const HOLD_EXTEND: &str = concat!(
    holds_prelude!(),
    r#"
if mode == "write" then
  if writer() == owner then return redis.call("pexpire", KEYS[2], ARGV[3]) end
  return 0
end
if not mine() then return 0 end
local at = now + tonumber(ARGV[3])
redis.call("zadd", KEYS[1], "XX", at, owner)
keep(at)
return 1
"#
);

/// The owner's hold's milliseconds left, or -1.
pub const HOLD_LEFT: &str = concat!(
    holds_prelude!(),
    r#"
if mode == "write" then
  if writer() == owner then return redis.call("pttl", KEYS[2]) end
  return -1
end
local expires = mine()
if expires then return expires - now end
return -1
"#
);

/// Whether an acquire in this mode would wait now (1) or not (0).
pub const HOLD_WAITS: &str = concat!(
    holds_prelude!(),
    r#"
local waits
if mode == "permit" then
  waits = live_count() >= tonumber(ARGV[4])
elseif mode == "read" then
  waits = redis.call("exists", KEYS[2], KEYS[3]) > 0
else
  waits = redis.call("exists", KEYS[2]) == 1 or live_count() > 0
end
if waits then return 1 end
return 0
"#
);

/// How many hold the key: live holds, and the writer.
pub const HOLD_COUNT: &str = concat!(
    holds_prelude!(),
    r#"
return live_count() + redis.call("exists", KEYS[2])
"#
);

/// A waiting writer gave up: its mark goes.
pub const HOLD_WITHDRAW: &str = concat!(
    holds_prelude!(),
    r#"
return redis.call("del", KEYS[3])
"#
);
