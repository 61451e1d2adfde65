//! What a store's operations, its transport and its ear share.

use super::ear::Watch;
use crate::store::follow::Follower;
use crate::store::sweeps::Sweeps;

pub struct Shared {
    /// The ear hearing of locks handed to this process (`ear`), once anyone waits.
    pub follower: Follower<Watch>,
    /// This store's id in the lines of plain locks (`line_sql`).
    pub me: String,
    /// When old rows are swept.
    pub sweeps: Sweeps,
}
