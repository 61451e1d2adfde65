//! What a connection's change of state hands back to the event loop: the
//! answers and failures due to JS, and whether to open a connection; and
//! their delivery, once the connection's state is no longer borrowed (a
//! reply runs JS, which may submit again).

use super::wire::{error, Failure, Named, Wire};
use crate::store::StoreError;

/// What a waiting request does with its answer (or its failure).
pub type Reply<W> = Box<dyn FnOnce(Result<<W as Wire>::Answer, StoreError>)>;

/// Answers (of type `A`) and failures to deliver to JS, in order.
pub type Outcomes<A> = Vec<(
    Box<dyn FnOnce(Result<A, StoreError>)>,
    Result<A, StoreError>,
)>;

/// A connection's answers and failures to deliver.
pub type Due<W> = Outcomes<<W as Wire>::Answer>;

/// What the event-loop side must do after a change of state.
pub struct Next<W: Wire> {
    /// Open a connection (on Tokio).
    pub connect: bool,
    pub due: Due<W>,
}

impl<W: Wire> Default for Next<W> {
    fn default() -> Self {
        Next {
            connect: false,
            due: Vec::new(),
        }
    }
}

impl<W: Wire> Next<W> {
    pub(super) fn absorb(&mut self, mut other: Next<W>) {
        self.due.append(&mut other.due);
        self.connect |= other.connect;
    }
}

/// The error a request the connection would not send fails with.
pub(super) fn refusal<W: Wire>(request: &W::Request, why: &Failure) -> StoreError {
    error::<W>(why.code, request.name(), &why.text)
}

/// Hand each outcome to its request's reply (which settles its promise).
pub fn deliver<A>(due: Outcomes<A>) {
    for (reply, outcome) in due {
        reply(outcome);
    }
}
