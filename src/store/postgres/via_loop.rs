//! The event-loop transport: connections the JS thread's event loop drives
//! (a server reached over TCP). Each request is a statement's Parse, Bind,
//! Execute and Sync (see `wire/` and `store/event_loop/`), sent on its key's
//! connection so one key's operations run in the order they were made, its
//! answer read into the operation's on the JS thread. The event loop's
//! engine bounds each by the timeouts and sends it again when its
//! connection died. A server behind a unix socket, or a URL naming several
//! hosts, stays on Tokio (`via_tokio`).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use rustls::pki_types::ServerName;
use tokio_postgres::config::Host;

use super::answer::{batch_full, Reader};
use super::errors::{code_and_verb, unreadable};
use super::ops::{self, Request};
use super::shared::Shared;
use super::sql::SWEEP_BATCHES;
use super::wire::target::Target;
use super::wire::{self, Direct, Local};
use crate::store::event_loop::host::MakeHost;
use crate::store::event_loop::Endpoint;
use crate::store::{BackendError, Op, StoreError};

/// The store's connections on the loop `make_host` gives (the JS thread
/// making the store), when the URL names one server over TCP; None when it
/// names something else, which stays on Tokio.
pub(super) fn connections(
    shared: &Shared, make_host: MakeHost<'_>,
) -> Result<Option<Direct>, String> {
    let opener = &shared.opener;
    let config = &opener.target.config;
    let (Some(Host::Tcp(host)), 1) = (config.get_hosts().first(), config.get_hosts().len()) else {
        return Ok(None);
    };
    if config.get_ports().len() > 1 {
        return Ok(None);
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
        refused: Default::default(),
    };
    let options = &shared.options;
    let endpoint = Endpoint::new(
        &target.display,
        options.connect_timeout,
        options.command_timeout,
    );
    Direct::new(make_host, target, endpoint, options.pool_size).map(Some)
}

/// Send `request` on its key's connection (any, if it has none); its
/// answer becomes the operation's through `read`, on this thread.
pub(super) fn send<T: 'static>(
    direct: &Direct, shared: &Arc<Shared>, request: Request, read: Reader<T>,
) -> Op<T> {
    let name = request.name;
    let shared = Arc::clone(shared);
    direct.operation(name, move |local, done| {
        let starts_sweep = request.starts_sweep;
        let answer = move |connections: &Local, answer: wire::ServerAnswer| match answer {
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
            Ok(answer) => {
                let value =
                    read(answer).map_err(|what| unreadable(name, connections.display(), what))?;
                if starts_sweep && shared.sweeps.due() {
                    sweep_batch(connections.clone(), 1);
                }
                Ok(value)
            }
        };
        let (route, request) = on_wire(&local, request);
        local.request(route.as_deref(), request, answer, done)
    })
}

/// `request` as the wire sends it (with the statements' text for the
/// store's table), and the key it goes by.
fn on_wire(local: &Local, request: Request) -> (Option<String>, wire::Request) {
    let on_wire = wire::Request {
        name: request.name,
        statement: request.statement,
        sql: Arc::clone(&local.target().sql),
        params: request.params,
    };
    (request.route, on_wire)
}

/// Batch `batch` of a sweep of expired rows; the next is sent when this
/// one deleted a full batch, up to [`SWEEP_BATCHES`].
fn sweep_batch(local: Local, batch: usize) {
    let (_, request) = on_wire(&local, ops::sweep(!local.target().sql.line_missing()));
    let next = local.clone();
    local.submit(
        request,
        Box::new(move |outcome| {
            let full = match outcome {
                Ok(Ok(answer)) => batch_full(answer) == Ok(true),
                _ => false,
            };
            if full && batch < SWEEP_BATCHES {
                sweep_batch(next, batch + 1);
            }
        }),
    );
}
