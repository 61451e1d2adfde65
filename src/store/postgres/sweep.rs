//! Sweeping expired rows: at most once per sweep interval, started by an
//! acquire, in bounded batches (each sent when the one before deleted a
//! full batch), so rows of keys nobody takes again do not pile up. On the
//! event loop's connections the batches go through `via_loop`; here on Tokio.

use std::sync::Arc;
use std::time::Instant;

use tokio_postgres::types::Type;

use super::{Shared, SWEEP_BATCH, SWEEP_BATCHES};

impl Shared {
    /// Whether a sweep of expired rows is due (none ran within the sweep
    /// interval); if so, it counts as started now.
    pub(super) fn sweep_due(&self) -> bool {
        let Ok(mut swept) = self.swept.lock() else {
            return false;
        };
        if swept.is_some_and(|at| at.elapsed() < self.options.sweep_interval) {
            return false;
        }
        *swept = Some(Instant::now());
        true
    }

    /// Start a sweep of expired rows on Tokio, if one is due.
    pub(super) fn sweep_if_due(self: &Arc<Self>) {
        if !self.sweep_due() {
            return;
        }
        let shared = Arc::downgrade(self);
        tokio::spawn(async move {
            for _ in 0..SWEEP_BATCHES {
                let Some(shared) = shared.upgrade() else {
                    return;
                };
                let Ok(Ok(taken)) = tokio::time::timeout(
                    shared.options.connect_timeout,
                    shared.pool.take(&shared.opener, None),
                )
                .await
                else {
                    return;
                };
                let conn = &taken.conn;
                let deleted = tokio::time::timeout(
                    shared.options.command_timeout,
                    conn.client
                        .execute_typed(&conn.sql.sweep, &[(&SWEEP_BATCH, Type::INT8)]),
                )
                .await;
                match deleted {
                    Ok(Ok(n)) if n == SWEEP_BATCH as u64 => continue,
                    _ => return,
                }
            }
        });
    }
}
