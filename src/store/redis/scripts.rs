//! The Lua scripts, on one page: what runs atomically on the server for each
//! operation that has to compare before it acts.
//!
//! Keys and owner tokens reach them only as `KEYS` and `ARGV`, never spliced
//! into the script text, so any key is data. They go as `EVALSHA` (the
//! redis crate's `Script`), and are loaded again if the server answers
//! `NOSCRIPT`.

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

/// Where releases of `key` (prefix included) are announced.
pub fn channel(full_key: &str) -> String {
    format!("keel:released:{full_key}")
}
