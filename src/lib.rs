//! The distributed lock of `@shaferllc/keel/core`, as a Node.js native addon.
//!
//! "Only one of you may do this at a time", across async tasks, worker
//! threads, processes and machines. Two properties make that true, and every
//! module here serves them:
//!
//! 1. **Ownership.** Every acquisition mints a fresh random owner token
//!    ([`owner`]), and a store releases or extends a lock only while it still
//!    holds that token (compare-and-delete, compare-and-extend). A holder whose
//!    TTL ran out and whose `release()` arrives late cannot free the next
//!    holder's lock.
//! 2. **Expiry.** A lock always expires; there is no hold-forever mode, so a
//!    holder that crashes cannot block everyone else for good. The store owns
//!    the clock that decides expiry (memory: a monotonic clock; Redis: the
//!    server's own `PX` expiry; PostgreSQL: the server's `clock_timestamp()`).
//!
//! And one property of every store: `acquire` is an atomic set-if-absent.
//!
//! Layout, in reading order (the README's "How it is built" walks the same
//! tree, the JS side included): [`lock`] is the algorithm (one acquisition
//! attempt for a fresh owner, the serialized form), [`owner`] the tokens,
//! [`text`] short strings kept inline, [`error`] what an operation fails
//! with (the one list of error codes JS sees); [`store`] the seam, one trait with a
//! file or folder per backend (`memory.rs`, `redis/`, `postgres/`) and
//! what the server stores share (`event_loop/`, a server connection on the JS
//! thread's event loop for any protocol that describes itself, with the
//! libuv handles that loop needs; `options.rs`, `tls.rs`, `follow.rs`); and
//! `napi/` the surface JavaScript calls
//! (the `#[napi]` functions alone in its `mod.rs`, beside the handle, the
//! conversions, the errors and the promise pump). A store written in JS
//! never reaches this crate: `lib/js-store.js` calls it.

pub mod error;
pub mod lock;
#[cfg(not(test))]
mod napi;
pub mod owner;
pub mod store;
pub mod text;
