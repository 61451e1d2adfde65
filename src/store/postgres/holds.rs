//! Semaphores and read-write locks on PostgreSQL: each operation one call
//! of the `<table>_hold` function (`sql.rs`), on the event loop's
//! connections or on Tokio's, like the plain lock's statements.
//!
//! A hold is a row of `<table>_holds`: kind `s` (a permit), `r` (a reader),
//! `w` (the writer) or `m` (a waiting writer's mark), key, owner, and
//! `expires_at` on the server's clock. The function takes a transaction
//! advisory lock on the key first, so one key's operations run one at a
//! time and each sees what the last committed.

use tokio_postgres::types::Type;

use super::{ttl_of, unstorable, PostgresStore};
use crate::store::{Acquired, Hold, HoldOp, Op};

impl PostgresStore {
    /// Call the function for `op`; its answer (a bigint or NULL) goes
    /// through `read`.
    pub(super) fn hold_op<T: Send + 'static>(
        &self,
        op: HoldOp,
        hold: Hold,
        key: &str,
        owner: &str,
        ttl_ms: f64,
        read: fn(Option<i64>) -> T,
    ) -> Op<T> {
        if let Some(refused) = unstorable(op.method(), key, owner) {
            return Op::Ready(Err(refused));
        }
        let (mode_name, limit) = hold.name_and_limit();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let ttl = ttl_of(ttl_ms);
        if let Some(direct) = &self.direct {
            let params = vec![
                op.name().to_owned(),
                mode_name.to_owned(),
                key.to_owned(),
                owner.to_owned(),
                ttl.to_string(),
                limit.to_string(),
            ];
            return super::via_loop::hold(direct, op.method(), key, params, read);
        }
        let (route, key, owner) = (key, key.to_owned(), owner.to_owned());
        self.op(op.method(), Some(route), move |conn| {
            let (key, owner) = (key.clone(), owner.clone());
            async move {
                let row = conn
                    .client
                    .query_typed_one(
                        &conn.sql.hold,
                        &[
                            (&op.name(), Type::TEXT),
                            (&mode_name, Type::TEXT),
                            (&key, Type::TEXT),
                            (&owner, Type::TEXT),
                            (&ttl, Type::INT8),
                            (&limit, Type::INT8),
                        ],
                    )
                    .await?;
                Ok(read(row.try_get::<_, Option<i64>>(0)?))
            }
        })
    }
}

/// The answers, by operation.
pub fn token(answer: Option<i64>) -> Acquired {
    Acquired::from_token(answer.map(|t| u64::try_from(t).unwrap_or(0)))
}

pub fn done(answer: Option<i64>) -> bool {
    answer.unwrap_or(0) > 0
}

pub fn left(answer: Option<i64>) -> Option<f64> {
    answer.filter(|ms| *ms > 0).map(|ms| ms as f64)
}

pub fn count(answer: Option<i64>) -> f64 {
    answer.unwrap_or(0).max(0) as f64
}

pub fn nothing(_: Option<i64>) {}
