//! How a store's operations ride its connections on the event loop: each
//! on its key's connection, its answer read into the operation's (a server's
//! error, or an answer its reader does not take, an error of the operation),
//! and the sweep of old rows an acquire sets off now and then.

use std::sync::Arc;

use super::answer::Reader;
use super::errors;
use super::ops::Request;
use super::shared::Shared;
use super::wire::{self, Local, ServerAnswer};
use crate::store::Done;

/// Send `request` on its key's connection; `read` makes its answer the
/// operation's, given to `done` on this thread.
pub fn submit<T: 'static>(
    local: &Local, shared: &Arc<Shared>, (request, read): (Request, Reader<T>), done: Done<T>,
) {
    let shared = Arc::clone(shared);
    let (name, starts_sweep) = (request.name, request.starts_sweep);
    let answer = move |connections: &Local, answer: ServerAnswer| {
        let display = connections.display();
        let answer = answer.map_err(|e| errors::server_error(name, display, &e))?;
        let value = read(answer).map_err(|what| errors::unreadable(name, display, what))?;
        if starts_sweep && shared.sweeps.due() {
            sweep(connections);
        }
        Ok(value)
    };
    let on_wire = wire::Request {
        name,
        command: wire::Command::Prepared(request.runs),
    };
    local.request(Some(&request.route), on_wire, answer, done);
}

/// Delete a batch of old rows of each table: found first, then deleted by
/// their keys (`sql::Sweep`); nobody waits for the answers.
fn sweep(local: &Local) {
    let sql = Arc::clone(&local.target().sql);
    for sweep in sql.sweep() {
        let request = wire::Request {
            name: "sweep",
            command: wire::Command::Text(sweep.select.clone()),
        };
        let connections = local.clone();
        local.submit(
            request,
            Box::new(move |found| {
                let Ok(Ok(found)) = found else { return };
                if let Some(delete) = sweep.delete(&found.rows) {
                    let request = wire::Request {
                        name: "sweep",
                        command: wire::Command::Text(delete),
                    };
                    connections.submit(request, Box::new(|_| {}));
                }
            }),
        );
    }
}
