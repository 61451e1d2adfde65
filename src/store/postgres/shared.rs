//! What a store's operations, its transport and its listener share: its
//! options, where its connections go, its sweeps, its place in the lines.

use std::sync::Arc;

use super::listen::Watch;
use super::pool::Opener;
use crate::store::follow::{Follower, OnWarning};
use crate::store::sweeps::Sweeps;
use crate::store::TableOptions;

pub struct Shared {
    pub options: TableOptions,
    pub opener: Arc<Opener>,
    /// Where the LISTEN connection goes: `listenUrl`'s server, else `opener`.
    pub listen_opener: Arc<Opener>,
    /// Where a warning goes (a listener that hears nothing).
    pub on_warning: Option<OnWarning>,
    /// When expired rows are swept.
    pub sweeps: Sweeps,
    /// The listener of announced releases, once anyone waits.
    pub follower: Follower<Watch>,
    /// This store's id in the lines of plain locks (`line_sql`).
    pub me: String,
}

impl Shared {
    /// This store's id in the lines, unless the database was found
    /// without them (until a connection knows, the line's statements are
    /// planned, and sent as plain ones if it has none: `Statement::as_sent`).
    pub fn line(&self) -> Option<&str> {
        (!self.opener.sql.line_missing()).then_some(self.me.as_str())
    }
}
