//! What a store on a SQLite file is made with (checked by the JS layer).

use std::path::PathBuf;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct SqliteOptions {
    /// The database file, made if missing (its folder must exist).
    pub path: PathBuf,
    /// The lock table; `<table>_holds` and `<table>_state` go beside it.
    pub table: String,
    /// How long an operation may wait for another process's write to the
    /// file to end before it fails as too slow.
    pub command_timeout: Duration,
    /// Expired rows are deleted at most this often, as locks are taken.
    pub sweep_interval: Duration,
}

impl SqliteOptions {
    /// A file's options with the defaults JS gives.
    pub fn at(path: impl Into<PathBuf>) -> SqliteOptions {
        SqliteOptions {
            path: path.into(),
            table: "keel_locks".to_owned(),
            command_timeout: Duration::from_secs(5),
            sweep_interval: Duration::from_secs(60),
        }
    }
}
