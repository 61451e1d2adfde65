//! The operations on connections the JS thread's event loop drives (a
//! server reached over TCP): each a statement's Parse, Bind, Execute and
//! Sync, its answer read into the operation's on the JS thread (see
//! `wire/` and `store/event_loop/`), sent on its key's connection so one key's
//! operations run in the order they were made. A server behind a unix
//! socket, or a URL naming several hosts, stays on Tokio.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use rustls::pki_types::ServerName;
use tokio_postgres::config::Host;

use super::errors::code_and_verb;
use super::wire::connect::Target;
use super::wire::{Direct, Local, Rows, Statement};
use super::{PostgresStore, Shared, SWEEP_BATCH, SWEEP_BATCHES};
use crate::store::event_loop::host::MakeHost;
use crate::store::{Acquired, BackendError, Code, Done, LocalOp, Op, StoreError};

impl PostgresStore {
    /// Drive the store's connections on the loop `make_host` gives (the
    /// JS thread making the store), when the URL names one server over TCP.
    pub(super) fn on_event_loop(mut self, make_host: MakeHost<'_>) -> Result<Self, String> {
        let shared = &self.shared;
        let opener = &shared.opener;
        let config = &opener.target.config;
        let (Some(Host::Tcp(host)), 1) = (config.get_hosts().first(), config.get_hosts().len())
        else {
            return Ok(self);
        };
        if config.get_ports().len() > 1 {
            return Ok(self);
        }
        let tls = match &opener.tls {
            None => None,
            Some(tls) => {
                let name = ServerName::try_from(host.clone())
                    .map_err(|e| format!("url: {host:?} is not a host name TLS can check: {e}"))?;
                Some((Arc::clone(tls), name))
            }
        };
        let user = config.get_user().unwrap_or("postgres").to_owned();
        let mut parameters = vec![("application_name".to_owned(), "keel-lock".to_owned())];
        if let Some(options) = config.get_options() {
            parameters.push(("options".to_owned(), options.to_owned()));
        }
        let plain_options = opener.target.plain.get_options().map(str::to_owned);
        let target = Target {
            host: host.clone(),
            port: config.get_ports().first().copied().unwrap_or(5432),
            tls,
            tls_optional: opener.target.tls_optional,
            database: config.get_dbname().unwrap_or(&user).to_owned(),
            password: config.get_password().map(<[u8]>::to_vec),
            user,
            parameters,
            plain_options,
            refuses_options: AtomicBool::new(false),
            connect_timeout: shared.options.connect_timeout,
            display: opener.target.display.clone(),
            sql: Arc::clone(&opener.sql),
            refused: Mutex::new(None),
        };
        let command_timeout =
            u64::try_from(shared.options.command_timeout.as_millis()).unwrap_or(u64::MAX);
        self.direct = Some(Direct::new(
            make_host,
            target,
            shared.options.pool_size,
            command_timeout,
        )?);
        Ok(self)
    }
}

/// Run `statement` with `params` on `key`'s connection; its rows become the
/// operation's answer through `read` (which also gets the connections, to
/// start a sweep).
pub(super) fn run<T: 'static>(
    direct: &Direct,
    name: &'static str,
    key: &str,
    statement: Statement,
    params: Vec<String>,
    read: impl FnOnce(Rows, &Local) -> Result<T, &'static str> + 'static,
) -> Op<T> {
    let Some(local) = direct.local() else {
        return Op::Ready(Err(StoreError::Backend(BackendError {
            code: Code::StorePostgres,
            message: format!(
                "PostgresLockStore.{name}: used from a thread other than the one it was made on"
            ),
        })));
    };
    let key = key.to_owned();
    Op::Local(LocalOp::new(move |done: Done<T>| {
        let connections = local.clone();
        let request = super::wire::Request {
            name,
            statement,
            sql: Arc::clone(&local.target().sql),
            params,
        };
        local.submit_keyed(
            &key,
            request,
            Box::new(move |outcome| {
                done(outcome.and_then(|answer| match answer {
                    Err(e) => {
                        let (code, verb) = code_and_verb(&e.code);
                        let display = connections.display();
                        Err(StoreError::Backend(BackendError {
                            code,
                            message: format!(
                                "PostgresLockStore.{name}: {verb} {display}: {}: {}",
                                e.severity, e.message
                            ),
                        }))
                    }
                    Ok(rows) => read(rows, &connections).map_err(|what| {
                        let display = connections.display();
                        StoreError::Backend(BackendError {
                            code: Code::StorePostgres,
                            message: format!("PostgresLockStore.{name}: {display} answered {what}"),
                        })
                    }),
                }))
            }),
        );
    }))
}

/// The first column of the first row as a number, if a row came back.
pub(super) fn first_number(rows: &Rows) -> Result<Option<i64>, &'static str> {
    match rows.first() {
        None => Ok(None),
        Some(Some(text)) => text
            .parse()
            .map(Some)
            .map_err(|_| "something other than a number"),
        Some(None) => Err("NULL where a number belongs"),
    }
}

/// The first column of the first row as a boolean (`None`: no row).
pub(super) fn first_bool(rows: &Rows) -> Result<Option<bool>, &'static str> {
    match rows.first() {
        None => Ok(None),
        Some(Some("t")) => Ok(Some(true)),
        Some(Some("f")) => Ok(Some(false)),
        Some(_) => Err("something other than true or false"),
    }
}

impl Shared {
    /// Sweep expired rows, in bounded batches, if none ran within the sweep
    /// interval: each batch sent when the one before deleted a full batch.
    pub(super) fn sweep_on_loop_if_due(self: &Arc<Self>, local: &Local) {
        if self.sweep_due() {
            sweep_batch(local.clone(), 1);
        }
    }
}

fn sweep_batch(local: Local, batch: usize) {
    let request = super::wire::Request {
        name: "sweep",
        statement: Statement::Sweep,
        sql: Arc::clone(&local.target().sql),
        params: vec![SWEEP_BATCH.to_string()],
    };
    let next = local.clone();
    local.submit(
        request,
        Box::new(move |outcome| {
            let full = matches!(outcome, Ok(Ok(rows)) if rows.changed == SWEEP_BATCH as u64);
            if full && batch < SWEEP_BATCHES {
                sweep_batch(next, batch + 1);
            }
        }),
    );
}

/// The acquire statement: fenced when taken.
pub(super) fn acquire(
    direct: &Direct,
    shared: &Arc<Shared>,
    key: &str,
    owner: &str,
    ttl: i64,
) -> Op<Acquired> {
    let shared = Arc::clone(shared);
    let params = vec![key.to_owned(), owner.to_owned(), ttl.to_string()];
    run(
        direct,
        "acquire",
        key,
        Statement::Acquire,
        params,
        move |rows, local| {
            let token = first_number(&rows)?;
            shared.sweep_on_loop_if_due(local);
            Ok(Acquired::from_token(
                token.map(|t| u64::try_from(t).unwrap_or(0)),
            ))
        },
    )
}

/// A semaphore's or read-write key's operation: the hold function's answer
/// (a number or NULL) through `read`.
pub(super) fn hold<T: 'static>(
    direct: &Direct,
    name: &'static str,
    key: &str,
    params: Vec<String>,
    read: fn(Option<i64>) -> T,
) -> Op<T> {
    run(
        direct,
        name,
        key,
        Statement::Hold,
        params,
        move |rows, _| {
            let answer = match rows.first() {
                None => return Err("no row"),
                Some(None) => None,
                Some(Some(text)) => {
                    Some(text.parse().map_err(|_| "something other than a number")?)
                }
            };
            Ok(read(answer))
        },
    )
}

pub(super) fn release(direct: &Direct, key: &str, owner: &str) -> Op<bool> {
    let params = vec![key.to_owned(), owner.to_owned()];
    run(
        direct,
        "release",
        key,
        Statement::Release,
        params,
        |rows, _| Ok(first_bool(&rows)? == Some(true)),
    )
}

pub(super) fn extend(direct: &Direct, key: &str, owner: &str, ttl: i64) -> Op<bool> {
    let params = vec![key.to_owned(), owner.to_owned(), ttl.to_string()];
    run(
        direct,
        "extend",
        key,
        Statement::Extend,
        params,
        |rows, _| Ok(rows.changed == 1),
    )
}

pub(super) fn is_locked(direct: &Direct, key: &str) -> Op<bool> {
    run(
        direct,
        "isLocked",
        key,
        Statement::IsLocked,
        vec![key.to_owned()],
        |rows, _| first_bool(&rows)?.ok_or("no row"),
    )
}

pub(super) fn remaining_time(direct: &Direct, key: &str) -> Op<Option<f64>> {
    let params = vec![key.to_owned()];
    run(
        direct,
        "remainingTime",
        key,
        Statement::RemainingTime,
        params,
        |rows, _| Ok(first_number(&rows)?.map(|ms| ms as f64)),
    )
}

pub(super) fn holds(direct: &Direct, key: &str, owner: &str) -> Op<bool> {
    let params = vec![key.to_owned(), owner.to_owned()];
    run(
        direct,
        "isExpired",
        key,
        Statement::Holds,
        params,
        |rows, _| first_bool(&rows)?.ok_or("no row"),
    )
}
