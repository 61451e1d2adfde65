//! One command, kept as what it is (not only as bytes), so it can be sent
//! again on a fresh connection, and a script sent as `EVAL` where the server
//! does not know it (or not yet on this connection) and as `EVALSHA` after.
//! The bytes come from the redis crate's own command encoder.

use redis::{Cmd, Script};

use crate::store::redis::scripts::{ACQUIRE, EXTEND, HOLDS, RELEASE};

/// The scripts a connection may have loaded, by index.
pub const SCRIPTS: usize = 4;

/// A script's text and its SHA1, made once.
pub struct Lua {
    pub index: usize,
    pub body: &'static str,
    pub sha: String,
}

/// The acquire, release and extend scripts.
pub fn scripts() -> &'static [Lua; SCRIPTS] {
    static SCRIPTS_: std::sync::OnceLock<[Lua; SCRIPTS]> = std::sync::OnceLock::new();
    SCRIPTS_.get_or_init(|| {
        let lua = |index, body: &'static str| Lua {
            index,
            body,
            sha: Script::new(body).get_hash().to_owned(),
        };
        [
            lua(0, ACQUIRE),
            lua(1, RELEASE),
            lua(2, EXTEND),
            lua(3, HOLDS),
        ]
    })
}

pub struct Request {
    /// The store operation it serves, for error messages.
    pub name: &'static str,
    pub body: Body,
}

pub enum Body {
    /// `EVALSHA`/`EVAL` of a script, with its keys and arguments.
    Script {
        lua: &'static Lua,
        keys: Vec<String>,
        args: Vec<Vec<u8>>,
    },
    /// A plain command, encoded once.
    Plain(Vec<u8>),
}

impl Request {
    pub fn script(
        name: &'static str,
        lua: &'static Lua,
        keys: Vec<String>,
        args: Vec<Vec<u8>>,
    ) -> Request {
        Request {
            name,
            body: Body::Script { lua, keys, args },
        }
    }

    pub fn plain(name: &'static str, cmd: &Cmd) -> Request {
        Request {
            name,
            body: Body::Plain(cmd.get_packed_command()),
        }
    }

    /// Append the command's bytes to `out`; a script as `EVAL` unless the
    /// connection has it (`loaded`), which it has afterwards either way.
    pub fn encode(&self, out: &mut Vec<u8>, loaded: &mut [bool; SCRIPTS]) {
        match &self.body {
            Body::Plain(bytes) => out.extend_from_slice(bytes),
            Body::Script { lua, keys, args } => {
                let mut cmd = if loaded[lua.index] {
                    let mut cmd = redis::cmd("EVALSHA");
                    cmd.arg(&lua.sha);
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
