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

/// What every script of a plain lock whose waiters wait in line on the
/// server starts with (a single server: on a Cluster the line would not
/// share the lock's hash slot, and the scripts above serve). KEYS: [1] the
/// lock, [2] the fencing counter, [3] the line (a sorted set of waiting
/// processes, by arrival, in µs on the server's clock), [4] each waiting
/// process's place: `<place lapses at, ms> <asked> <owner>`, when the
/// process asked for it (`line::Asked`) and the owner token a hand-over
/// makes the lock, or, once the lock went to it, `handed <token> <owner>`
/// until it claims it. ARGV: [1] an owner token, [2] a TTL in ms,
/// [3] this process's id ("" for a caller that never waits), [4] how long a
/// place in line lasts without being renewed, [5] how long a lock handed
/// over is held before its new holder claims it (a holder that died
/// meanwhile keeps it no longer), [6] where processes are told (`<that> ..
/// <id>`), [7] for an acquire: "0" never wait, "1" wait in line if refused,
/// "2" the same, and more wait here behind this one: keep a place at the
/// back, for [8], a spare owner token; [9] when this process asked.
macro_rules! line_prelude {
    () => {
        r#"local t = redis.call("time")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local owner, ttl, me = ARGV[1], ARGV[2], ARGV[3]
local lease, claim, wake = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local function keep()
  redis.call("pexpire", KEYS[3], lease + claim)
  redis.call("pexpire", KEYS[4], lease + claim)
end
local function wait_in_line(who, next)
  redis.call("zadd", KEYS[3], "NX", tonumber(t[1]) * 1000000 + tonumber(t[2]), who)
  redis.call("hset", KEYS[4], who, (now + lease) .. " " .. ARGV[9] .. " " .. next)
  keep()
end
local function leave_line(who)
  redis.call("zrem", KEYS[3], who)
  redis.call("hdel", KEYS[4], who)
end
local function head()
  while true do
    local first = redis.call("zrange", KEYS[3], 0, 0)[1]
    if not first then return nil end
    local till, asked, next = string.match(redis.call("hget", KEYS[4], first) or "", "^(%d+) (%d+) (.+)$")
    if till and tonumber(till) > now then return first, next, asked end
    leave_line(first)
  end
end
local function handed_mark(who)
  local token, handed = string.match(redis.call("hget", KEYS[4], who) or "", "^handed (%d+) (.+)$")
  return handed, token
end
local function hand_over()
  local first, next, asked = head()
  if not first then return nil end
  redis.call("set", KEYS[1], next, "PX", claim)
  local token = redis.call("incr", KEYS[2])
  redis.call("zrem", KEYS[3], first)
  redis.call("hset", KEYS[4], first, "handed " .. token .. " " .. next)
  keep()
  if first ~= me then redis.call("publish", wake .. first, token .. " " .. asked .. " " .. next .. " " .. KEYS[1]) end
  return first, next, token, asked
end
"#
    };
}

/// Take the lock if it is free and nobody else's turn, or if it was handed
/// to this process (claimed now, for this acquire's TTL: the handed owner
/// and its token come back); if refused, wait in line. A lock that is free
/// while it is someone else's turn (its TTL ran out, or the one it went to
/// never claimed it) goes to the first in line.
pub const LINE_ACQUIRE: &str = concat!(
    r#"
-- Nobody in line, nothing handed over: a plain set-if-absent, as fast as one
-- (unless more of this process wait behind it: they keep a place, below).
if ARGV[7] ~= "2" and redis.call("exists", KEYS[3], KEYS[4]) == 0 then
  if redis.call("set", KEYS[1], ARGV[1], "PX", ARGV[2], "NX") or redis.call("get", KEYS[1]) == ARGV[1] then
    return redis.call("incr", KEYS[2])
  end
  if ARGV[7] == "0" or ARGV[3] == "" then return false end
end
"#,
    line_prelude!(),
    r#"if me ~= "" then
  local handed, token = handed_mark(me)
  if handed then
    redis.call("hdel", KEYS[4], me)
    if redis.call("get", KEYS[1]) == handed then
      redis.call("pexpire", KEYS[1], ttl)
      if ARGV[7] == "2" then wait_in_line(me, ARGV[8]) end
      return {handed, tonumber(token)}
    end
  end
end
local first = head()
if not first or first == me then
  if redis.call("set", KEYS[1], owner, "PX", ttl, "NX") or redis.call("get", KEYS[1]) == owner then
    if first then leave_line(me) end
    if ARGV[7] == "2" then wait_in_line(me, ARGV[8]) end
    return redis.call("incr", KEYS[2])
  end
elseif redis.call("exists", KEYS[1]) == 0 then
  hand_over()
end
if ARGV[7] ~= "0" and me ~= "" then wait_in_line(me, owner) end
return false
"#
);

/// Compare-and-delete, then the lock goes to the first in line: told by
/// message, or in the reply (the handed owner, its token, and when the
/// place was asked for) when that is this process.
pub const LINE_RELEASE: &str = concat!(
    r#"
-- Nobody in line, nothing handed over: a plain compare-and-delete.
if redis.call("exists", KEYS[3], KEYS[4]) == 0 then
  if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) end
  return 0
end
"#,
    line_prelude!(),
    r#"if redis.call("get", KEYS[1]) ~= owner then return 0 end
redis.call("del", KEYS[1])
if me ~= "" and handed_mark(me) == owner then redis.call("hdel", KEYS[4], me) end
local to, next, token, asked = hand_over()
if to == me then return {next, token, tonumber(asked)} end
return 1
"#
);

/// Compare-and-extend; a lock handed to this process is claimed by it (and,
/// with more of it waiting, it keeps a place at the back).
pub const LINE_EXTEND: &str = concat!(
    line_prelude!(),
    r#"if redis.call("get", KEYS[1]) ~= owner then return 0 end
if me ~= "" and handed_mark(me) == owner then redis.call("hdel", KEYS[4], me) end
if ARGV[7] == "2" then wait_in_line(me, ARGV[8]) end
return redis.call("pexpire", KEYS[1], ttl)
"#
);

/// Every waiter of this process gave up: it leaves the line. A lock handed
/// to it meanwhile stays its own until it is given back, claimed or its
/// claim window ends: the message telling it may be on its way to a waiter
/// that came since, which takes it as its own. (Its mark goes: nothing of a
/// process that left is kept past its lock.)
pub const LINE_LEAVE: &str = concat!(
    line_prelude!(),
    r#"leave_line(me)
if redis.call("exists", KEYS[1]) == 0 then hand_over() end
return 1
"#
);

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
