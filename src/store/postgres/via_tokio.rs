//! The Tokio transport: tokio-postgres connections from the pool (`pool`),
//! for a server behind a unix socket or a URL naming several hosts. Each
//! request is sent as the unnamed statement with its parameters typed, and
//! its first row's first column is put in PostgreSQL's text form, so the
//! operation's reader gets the answer the event loop's connections give.

use std::pin::pin;
use std::sync::Arc;

use futures_util::TryStreamExt;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Row;

use super::answer::{batch_full, Answer, Reader};
use super::errors::{unreadable, Failure, RESENDS};
use super::ops::{self, Param, Request};
use super::pool::{Conn, Pool};
use super::shared::Shared;
use super::sql::SWEEP_BATCHES;
use crate::store::Op;

/// Send `request` on its key's pooled connection, within the store's time
/// bounds; sent again on a fresh connection if it found its own dead.
pub(super) fn send<T: Send + 'static>(
    pool: &Arc<Pool>, shared: &Arc<Shared>, request: Request, read: Reader<T>,
) -> Op<T> {
    let (pool, shared) = (Arc::clone(pool), Arc::clone(shared));
    Op::Pending(Box::pin(async move {
        let options = &shared.options;
        let name = request.name;
        let mut resent = 0;
        let failure = loop {
            let taken = match tokio::time::timeout(
                options.connect_timeout,
                pool.take(&shared.opener, request.route.as_deref()),
            )
            .await
            {
                Ok(Ok(taken)) => taken,
                Ok(Err(failure)) => break failure,
                Err(_) => break Failure::Timeout(options.connect_timeout),
            };
            match tokio::time::timeout(options.command_timeout, ask(&taken.conn, &request)).await {
                Ok(Ok(answer)) => {
                    let value = read(answer)
                        .map_err(|what| unreadable(name, &shared.opener.target.display, what))?;
                    if request.starts_sweep {
                        sweep_if_due(&pool, &shared);
                    }
                    return Ok(value);
                }
                Ok(Err(e)) => {
                    let failure = Failure::from(e);
                    if !failure.found_dead() {
                        break failure;
                    }
                    pool.discard(&taken).await;
                    if resent == RESENDS {
                        break failure;
                    }
                    resent += 1;
                }
                Err(_) => {
                    // The connection stays, with the statement on it: a
                    // give-back the caller sends next goes to this same
                    // connection, so it runs after the statement, even
                    // one held up in a stalled server process. (On a
                    // fresh connection it could run first, and the late
                    // acquire would take the key for nobody.)
                    break Failure::Timeout(options.command_timeout);
                }
            }
        };
        Err(failure.into_store_error(name, &shared.opener.target.display))
    }))
}

/// Send `request` on `conn` and read its answer: the first row's first
/// column, and the rows changed.
async fn ask(conn: &Conn, request: &Request) -> Result<Answer, tokio_postgres::Error> {
    let (statement, taken) = request.statement.as_sent(&conn.sql);
    let params = request.params.iter().take(taken).map(|param| match param {
        Param::Text(text) => (text as &(dyn ToSql + Sync), Type::TEXT),
        Param::Int(n) => (n as &(dyn ToSql + Sync), Type::INT8),
    });
    let mut rows = pin!(
        conn.client
            .query_typed_raw(statement.text(&conn.sql), params)
            .await?
    );
    let mut first = None;
    while let Some(row) = rows.try_next().await? {
        if first.is_none() {
            first = Some(first_column(&row)?);
        }
    }
    Ok(Answer {
        first,
        changed: rows.rows_affected().unwrap_or(0),
    })
}

/// A row's first column in PostgreSQL's text form (None: NULL), as the
/// event loop's connections receive it: the statements answer `bigint`s and
/// `boolean`s.
fn first_column(row: &Row) -> Result<Option<String>, tokio_postgres::Error> {
    let Some(column) = row.columns().first() else {
        return Ok(None);
    };
    let type_ = column.type_();
    Ok(if *type_ == Type::BOOL {
        row.try_get::<_, Option<bool>>(0)?
            .map(|yes| if yes { "t" } else { "f" }.to_owned())
    } else if *type_ == Type::INT8 {
        row.try_get::<_, Option<i64>>(0)?.map(|n| n.to_string())
    } else {
        // Anything else is read as text (and fails as the wrong type if it
        // is not text).
        row.try_get::<_, Option<String>>(0)?
    })
}

/// Start a sweep of expired rows on Tokio, if one is due: in batches on
/// the pool's connections in turn, each sent when the one before deleted a
/// full batch. It stops with the store.
fn sweep_if_due(pool: &Arc<Pool>, shared: &Arc<Shared>) {
    if !shared.sweeps.due() {
        return;
    }
    let (pool, shared) = (Arc::downgrade(pool), Arc::downgrade(shared));
    tokio::spawn(async move {
        for _ in 0..SWEEP_BATCHES {
            let (Some(pool), Some(shared)) = (pool.upgrade(), shared.upgrade()) else {
                return;
            };
            let Ok(Ok(taken)) = tokio::time::timeout(
                shared.options.connect_timeout,
                pool.take(&shared.opener, None),
            )
            .await
            else {
                return;
            };
            let answer = tokio::time::timeout(
                shared.options.command_timeout,
                ask(&taken.conn, &ops::sweep(!shared.opener.sql.line_missing())),
            )
            .await;
            let full = match answer {
                Ok(Ok(answer)) => batch_full(answer) == Ok(true),
                _ => false,
            };
            if !full {
                return;
            }
        }
    });
}
