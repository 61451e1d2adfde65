//! One command, kept as what it is (not only as bytes), so it can be sent
//! again on a fresh connection, by either transport: on the event loop a
//! script goes as `EVAL` where the connection has not loaded it yet and as
//! `EVALSHA` after (the bytes from the redis crate's own encoder); on Tokio
//! the redis crate's `Script` does the same.

use redis::{Cmd, Script};

use super::scripts::{
    ACQUIRE, EXTEND, HOLD_ACQUIRE, HOLD_COUNT, HOLD_EXTEND, HOLD_LEFT, HOLD_RELEASE, HOLD_WAITS,
    HOLD_WITHDRAW, LINE_ACQUIRE, LINE_EXTEND, LINE_LEAVE, LINE_RELEASE, RELEASE,
};
use crate::store::event_loop::Named;
use crate::store::HoldOp;

/// The scripts a connection may have loaded, by index.
pub const SCRIPTS: usize = 14;

/// A script: its text, the redis crate's handle on it (with its SHA1,
/// made once), and its index among [`SCRIPTS`].
pub struct Lua {
    pub index: usize,
    pub body: &'static str,
    pub script: Script,
}

/// The scripts the store runs: a plain lock's three (and their forms whose
/// waiters wait in line, with leaving the line), and one per operation on
/// the other kinds of hold.
pub struct Scripts {
    pub acquire: Lua,
    pub release: Lua,
    pub extend: Lua,
    pub line_acquire: Lua,
    pub line_release: Lua,
    pub line_extend: Lua,
    pub line_leave: Lua,
    holds: [Lua; 7],
}

impl Scripts {
    /// The script of `op` on a semaphore or a read-write key.
    pub fn holds(&self, op: HoldOp) -> &Lua {
        &self.holds[match op {
            HoldOp::Acquire => 0,
            HoldOp::Release => 1,
            HoldOp::Extend => 2,
            HoldOp::Left => 3,
            HoldOp::Waits => 4,
            HoldOp::Count => 5,
            HoldOp::Withdraw => 6,
        }]
    }
}

/// The scripts, made once per process.
pub fn scripts() -> &'static Scripts {
    static SCRIPTS_: std::sync::OnceLock<Scripts> = std::sync::OnceLock::new();
    SCRIPTS_.get_or_init(|| {
        let lua = |index, body: &'static str| Lua {
            index,
            body,
            script: Script::new(body),
        };
        Scripts {
            acquire: lua(0, ACQUIRE),
            release: lua(1, RELEASE),
            extend: lua(2, EXTEND),
            holds: [
                lua(3, HOLD_ACQUIRE),
                lua(4, HOLD_RELEASE),
                lua(5, HOLD_EXTEND),
                lua(6, HOLD_LEFT),
                lua(7, HOLD_WAITS),
                lua(8, HOLD_COUNT),
                lua(9, HOLD_WITHDRAW),
            ],
            line_acquire: lua(10, LINE_ACQUIRE),
            line_release: lua(11, LINE_RELEASE),
            line_extend: lua(12, LINE_EXTEND),
            line_leave: lua(13, LINE_LEAVE),
        }
    })
}

pub struct Request {
    /// The store operation it serves, for error messages.
    pub name: &'static str,
    pub body: Body,
}

impl Named for Request {
    fn name(&self) -> &'static str {
        self.name
    }
}

pub enum Body {
    /// `EVALSHA`/`EVAL` of a script, with its keys and arguments.
    Script {
        lua: &'static Lua,
        keys: Vec<String>,
        args: Vec<Vec<u8>>,
    },
    /// A plain command.
    Plain(Cmd),
}

impl Request {
    /// Its longest argument, in bytes (what the server's limits are
    /// about: `limits`); a script's text counted, as where it goes as `EVAL`.
    pub fn longest_argument(&self) -> usize {
        match &self.body {
            Body::Script { lua, keys, args } => keys
                .iter()
                .map(String::len)
                .chain(args.iter().map(Vec::len))
                .fold(lua.body.len(), usize::max),
            Body::Plain(cmd) => cmd
                .args_iter()
                .map(|arg| match arg {
                    redis::Arg::Simple(bytes) => bytes.len(),
                    _ => 0,
                })
                .fold(0, usize::max),
        }
    }

    pub fn script(
        name: &'static str, lua: &'static Lua, keys: Vec<String>, args: Vec<Vec<u8>>,
    ) -> Request {
        Request {
            name,
            body: Body::Script { lua, keys, args },
        }
    }

    /// A plain command `command` on `key`.
    pub fn plain(name: &'static str, command: &str, key: String) -> Request {
        let mut cmd = redis::cmd(command);
        cmd.arg(key);
        Request {
            name,
            body: Body::Plain(cmd),
        }
    }

    /// Append the command's bytes to `out`; a script as `EVAL` unless the
    /// connection has it (`loaded`), which it has afterwards either way.
    pub fn encode(&self, out: &mut Vec<u8>, loaded: &mut [bool; SCRIPTS]) {
        match &self.body {
            Body::Plain(cmd) => cmd.write_packed_command(out),
            Body::Script { lua, keys, args } => {
                let mut cmd = if loaded[lua.index] {
                    let mut cmd = redis::cmd("EVALSHA");
                    cmd.arg(lua.script.get_hash());
                    cmd
                } else {
                    let mut cmd = redis::cmd("EVAL");
                    cmd.arg(lua.body);
                    cmd
                };
                cmd.arg(keys.len());
                for key in keys {
                    cmd.arg(key);
                }
                for arg in args {
                    cmd.arg(arg.as_slice());
                }
                cmd.write_packed_command(out);
                loaded[lua.index] = true;
            }
        }
    }

    /// The script it runs, if it is one.
    pub fn lua(&self) -> Option<&'static Lua> {
        match &self.body {
            Body::Script { lua, .. } => Some(lua),
            Body::Plain(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_goes_as_eval_until_the_connection_has_it_then_as_evalsha() {
        let lua = &scripts().release;
        let request = Request::script("release", lua, vec!["k".into()], vec![b"me".to_vec()]);
        let mut loaded = [false; SCRIPTS];
        let (mut first, mut second) = (Vec::new(), Vec::new());
        request.encode(&mut first, &mut loaded);
        request.encode(&mut second, &mut loaded);
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        assert!(text(&first).contains("EVAL\r\n"), "{}", text(&first));
        assert!(text(&first).contains("redis.call(\"del\""));
        assert!(text(&second).contains("EVALSHA\r\n"), "{}", text(&second));
        assert!(text(&second).contains(lua.script.get_hash()));
        assert!(text(&second).ends_with("$1\r\nk\r\n$2\r\nme\r\n"));
    }

    #[test]
    fn a_plain_command_is_its_name_and_key() {
        let mut out = Vec::new();
        Request::plain("isLocked", "EXISTS", "app:k".into())
            .encode(&mut out, &mut [false; SCRIPTS]);
        assert_eq!(out, b"*2\r\n$6\r\nEXISTS\r\n$5\r\napp:k\r\n");
    }
}
