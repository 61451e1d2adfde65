//! The connections: `pool_size` of them, each opened on first use and
//! again after it dies. An operation on a key takes that key's connection
//! (so one key's operations run in the order they were made); one on no
//! key takes them in turn. One connection pipelines whatever is sent on it
//! concurrently; several let the server work on more than one statement at
//! a time. Nothing is prepared by name (see `wire`): each statement is sent
//! with its text, as the unnamed statement (tokio-postgres's `*_typed`).
//!
//! After the server refuses our credentials, no new connection is tried for
//! a second: operations meanwhile fail with the same error at once, so a
//! wrong password is reported, not hammered at the server.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use rustls::ClientConfig;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio_postgres::{AsyncMessage, Client, Connection, NoTls, SimpleQueryMessage};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::errors::{detail, Failure};
use super::options::{refuses_options, Target};
use super::sql::Sql;
use crate::store::route;

/// How long a refusal of our credentials is remembered.
const REFUSAL_PAUSE: Duration = Duration::from_secs(1);

/// A live connection, and the statements' text for the store's table.
pub(super) struct Conn {
    pub client: Client,
    pub sql: Arc<Sql>,
}

/// Where a connection is opened, and with what.
pub(super) struct Opener {
    pub target: Target,
    pub tls: Option<Arc<ClientConfig>>,
    pub sql: Arc<Sql>,
}

pub(super) struct Pool {
    slots: Vec<tokio::sync::Mutex<Option<Arc<Conn>>>>,
    next: AtomicUsize,
    refused: Mutex<Option<(Instant, String)>>,
    closed: AtomicBool,
}

/// A connection taken from the pool, and where it goes back if it dies.
pub(super) struct Taken {
    pub conn: Arc<Conn>,
    slot: usize,
}

impl Pool {
    pub fn new(size: usize) -> Pool {
        Pool {
            slots: (0..size.max(1))
                .map(|_| tokio::sync::Mutex::new(None))
                .collect(),
            next: AtomicUsize::new(0),
            refused: Mutex::new(None),
            closed: AtomicBool::new(false),
        }
    }

    /// `key`'s connection (with no key, the next in turn), opened now if it
    /// is not open.
    pub async fn take(&self, opener: &Opener, key: Option<&str>) -> Result<Taken, Failure> {
        let slot = match key {
            Some(key) => route(key, self.slots.len()),
            None => self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len(),
        };
        let mut held = self.slots[slot].lock().await;
        if self.closed.load(Ordering::Acquire) {
            return Err(Failure::Closed);
        }
        if let Some(conn) = held.as_ref().filter(|c| !c.client.is_closed()) {
            return Ok(Taken {
                conn: Arc::clone(conn),
                slot,
            });
        }
        *held = None;
        if let Ok(refused) = self.refused.lock() {
            if let Some((at, detail)) = refused.as_ref() {
                if at.elapsed() < REFUSAL_PAUSE {
                    return Err(Failure::Refused(detail.clone()));
                }
            }
        }
        let conn = match self.open(opener).await {
            Ok(conn) => Arc::new(conn),
            Err(failure) => {
                if failure.is_auth() {
                    if let Ok(mut refused) = self.refused.lock() {
                        *refused = Some((Instant::now(), detail_of(&failure)));
                    }
                }
                return Err(failure);
            }
        };
        if self.closed.load(Ordering::Acquire) {
            // Closed while it was opening: it goes with this operation.
            return Err(Failure::Closed);
        }
        *held = Some(Arc::clone(&conn));
        Ok(Taken { conn, slot })
    }

    /// Forget `taken`'s connection (it died, or stopped answering), so the
    /// next operation in its slot opens a fresh one.
    pub async fn discard(&self, taken: &Taken) {
        let mut held = self.slots[taken.slot].lock().await;
        if held.as_ref().is_some_and(|c| Arc::ptr_eq(c, &taken.conn)) {
            *held = None;
        }
    }

    /// Drop every connection; operations after this fail as closed.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        for slot in &self.slots {
            if let Ok(mut held) = slot.try_lock() {
                *held = None;
            }
        }
    }

    async fn open(&self, opener: &Opener) -> Result<Conn, Failure> {
        let client = connect(opener, None).await?;
        // Looked for on every new connection (they are rare): a database
        // restored or recreated under a running store gets its table back.
        // (A simple query: `query_one` would prepare a named statement.)
        let answer = client.simple_query(&opener.sql.exists).await?;
        let ready = |column: usize| {
            answer.iter().any(
                |message| matches!(message, SimpleQueryMessage::Row(row) if row.get(column) == Some("t")),
            )
        };
        if !ready(0) {
            client
                .batch_execute(&opener.sql.create)
                .await
                .map_err(|e| match e.as_db_error() {
                    Some(_) => Failure::Missing(e, opener.sql.table.clone()),
                    None => Failure::Postgres(e),
                })?;
        } else if !ready(1) {
            // Plain locks need no more: a user who may not make these goes
            // on without semaphores and read-write locks, whose operations
            // then fail naming the function they lack.
            let _ = client.batch_execute(&opener.sql.create_holds).await;
        }
        // Nor the line: without it, each waiter waits on its own.
        let line =
            !ready(0) || ready(2) || client.batch_execute(&opener.sql.create_line).await.is_ok();
        opener.sql.found_line(line);
        Ok(Conn {
            client,
            sql: Arc::clone(&opener.sql),
        })
    }
}

fn detail_of(failure: &Failure) -> String {
    match failure {
        Failure::Postgres(e) | Failure::Missing(e, _) => detail(e),
        Failure::Refused(detail) => detail.clone(),
        other => format!("{other:?}"),
    }
}

/// Open one connection (TLS if asked for), its I/O driven by a task on
/// Tokio that ends when the connection does. `notices`, when given, hears
/// the channel and payload of every notification the connection receives.
pub(super) async fn connect(
    opener: &Opener, notices: Option<mpsc::UnboundedSender<(String, String)>>,
) -> Result<Client, tokio_postgres::Error> {
    let target = &opener.target;
    let plain = target.refuses_options.load(Ordering::Relaxed);
    match connect_with(
        opener,
        if plain { &target.plain } else { &target.config },
        notices.clone(),
    )
    .await
    {
        Err(e) if !plain && refuses_options(&detail(&e)) => {
            target.refuses_options.store(true, Ordering::Relaxed);
            connect_with(opener, &target.plain, notices).await
        }
        outcome => outcome,
    }
}

async fn connect_with(
    opener: &Opener, config: &tokio_postgres::Config,
    notices: Option<mpsc::UnboundedSender<(String, String)>>,
) -> Result<Client, tokio_postgres::Error> {
    match &opener.tls {
        None => {
            let (client, connection) = config.connect(NoTls).await?;
            tokio::spawn(drive(connection, notices));
            Ok(client)
        }
        Some(tls) => {
            let tls = MakeRustlsConnect::new(ClientConfig::clone(tls));
            let (client, connection) = config.connect(tls).await?;
            tokio::spawn(drive(connection, notices));
            Ok(client)
        }
    }
}

async fn drive<S, T>(
    mut connection: Connection<S, T>, notices: Option<mpsc::UnboundedSender<(String, String)>>,
) where
    S: AsyncRead + AsyncWrite + Unpin,
    T: AsyncRead + AsyncWrite + Unpin,
{
    let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
    while let Some(Ok(message)) = messages.next().await {
        if let (AsyncMessage::Notification(n), Some(notices)) = (message, &notices) {
            let _ = notices.send((n.channel().to_owned(), n.payload().to_owned()));
        }
    }
}
