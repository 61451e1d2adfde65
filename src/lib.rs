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
//!    server's own `PX` expiry).
//!
//! And one property of every store: `acquire` is an atomic set-if-absent.
//!
//! Layout: [`lock`] is the algorithm (acquire with timeout and retry, the
//! serialized form), [`store`] the seam with one file per backend, [`owner`]
//! the tokens, and `binding` the napi surface, the only module JavaScript
//! sees (with `pump`, which settles its promises from Tokio in batches).

#[cfg(not(test))]
mod binding;
pub mod lock;
pub mod owner;
#[cfg(not(test))]
mod pump;
pub mod store;
pub mod text;
