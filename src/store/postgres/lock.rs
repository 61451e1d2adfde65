//! A plain lock on PostgreSQL: a row of the table (key, owner, expiry on
//! the server's clock), one prepared statement per operation (`sql.rs`), on
//! the event loop's connections (`via_loop`) or on Tokio's (`pool`).

use std::sync::Arc;

use super::via_loop;
use super::{storable, ttl_of, unstorable, PostgresStore, INT8, TEXT};
use crate::store::{Acquired, Op};

impl PostgresStore {
    /// The acquire statement: fenced when taken.
    pub(super) fn acquire_lock(&self, key: &str, owner: &str, ttl_ms: f64) -> Op<Acquired> {
        if let Some(refused) = unstorable("acquire", key, owner) {
            return Op::Ready(Err(refused));
        }
        if let Some(direct) = &self.direct {
            return via_loop::acquire(direct, &self.shared, key, owner, ttl_of(ttl_ms));
        }
        let (route, ttl) = (key, ttl_of(ttl_ms));
        let (key, owner) = (key.to_owned(), owner.to_owned());
        let shared = Arc::clone(&self.shared);
        self.op("acquire", Some(route), move |conn| {
            let (key, owner, shared) = (key.clone(), owner.clone(), Arc::clone(&shared));
            async move {
                let row = conn
                    .client
                    .query_typed_opt(
                        &conn.sql.acquire,
                        &[(&key, TEXT), (&owner, TEXT), (&ttl, INT8)],
                    )
                    .await?;
                let token = row.map(|row| row.try_get::<_, i64>(0)).transpose()?;
                shared.sweep_if_due();
                Ok(Acquired::from_token(
                    token.map(|t| u64::try_from(t).unwrap_or(0)),
                ))
            }
        })
    }

    pub(super) fn release_lock(&self, key: &str, owner: &str) -> Op<bool> {
        if !storable(&[key, owner]) {
            return Op::Ready(Ok(false));
        }
        if let Some(direct) = &self.direct {
            return via_loop::release(direct, key, owner);
        }
        let (route, key, owner) = (key, key.to_owned(), owner.to_owned());
        self.op("release", Some(route), move |conn| {
            let (key, owner) = (key.clone(), owner.clone());
            async move {
                let row = conn
                    .client
                    .query_typed_opt(&conn.sql.release, &[(&key, TEXT), (&owner, TEXT)])
                    .await?;
                Ok(row.map(|row| row.try_get::<_, bool>(0)).transpose()? == Some(true))
            }
        })
    }

    pub(super) fn extend_lock(&self, key: &str, owner: &str, ttl_ms: f64) -> Op<bool> {
        if !storable(&[key, owner]) {
            return Op::Ready(Ok(false));
        }
        if let Some(direct) = &self.direct {
            return via_loop::extend(direct, key, owner, ttl_of(ttl_ms));
        }
        let (route, ttl) = (key, ttl_of(ttl_ms));
        let (key, owner) = (key.to_owned(), owner.to_owned());
        self.op("extend", Some(route), move |conn| {
            let (key, owner) = (key.clone(), owner.clone());
            async move {
                Ok(conn
                    .client
                    .execute_typed(
                        &conn.sql.extend,
                        &[(&key, TEXT), (&owner, TEXT), (&ttl, INT8)],
                    )
                    .await?
                    == 1)
            }
        })
    }

    /// Whether `owner` holds the lock `key`.
    pub(super) fn lock_held_by(&self, key: &str, owner: &str) -> Op<bool> {
        if !storable(&[key, owner]) {
            return Op::Ready(Ok(false));
        }
        if let Some(direct) = &self.direct {
            return via_loop::holds(direct, key, owner);
        }
        let (route, key, owner) = (key, key.to_owned(), owner.to_owned());
        self.op("isExpired", Some(route), move |conn| {
            let (key, owner) = (key.clone(), owner.clone());
            async move {
                conn.client
                    .query_typed_one(&conn.sql.holds, &[(&key, TEXT), (&owner, TEXT)])
                    .await?
                    .try_get(0)
            }
        })
    }

    /// Milliseconds until the lock `key` expires, whoever holds it.
    pub(super) fn lock_remaining(&self, key: &str) -> Op<Option<f64>> {
        if !storable(&[key]) {
            return Op::Ready(Ok(None));
        }
        if let Some(direct) = &self.direct {
            return via_loop::remaining_time(direct, key);
        }
        let (route, key) = (key, key.to_owned());
        self.op("remainingTime", Some(route), move |conn| {
            let key = key.clone();
            async move {
                let row = conn
                    .client
                    .query_typed_opt(&conn.sql.remaining_time, &[(&key, TEXT)])
                    .await?;
                Ok(row
                    .map(|row| row.try_get::<_, i64>(0))
                    .transpose()?
                    .map(|ms| ms as f64))
            }
        })
    }

    /// Whether anyone holds the lock `key`.
    pub(super) fn is_locked(&self, key: &str) -> Op<bool> {
        if !storable(&[key]) {
            return Op::Ready(Ok(false));
        }
        if let Some(direct) = &self.direct {
            return via_loop::is_locked(direct, key);
        }
        let (route, key) = (key, key.to_owned());
        self.op("isLocked", Some(route), move |conn| {
            let key = key.clone();
            async move {
                conn.client
                    .query_typed_one(&conn.sql.is_locked, &[(&key, TEXT)])
                    .await?
                    .try_get(0)
            }
        })
    }
}
