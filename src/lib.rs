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
//! ## Layout
//!
//! Modules depend one way, top down: the napi surface on the algorithm and
//! the stores, each store on what the stores share, nothing on the napi
//! surface. `docs/how-it-is-built.md` walks the same tree, the JS side
//! included. Every file is named below, in reading order (a test holds the
//! list to the tree):
//!
//! - `src/`: `lib.rs` (this page), `lock.rs` (the algorithm: one acquisition
//!   attempt for a fresh owner, the serialized form), `owner.rs` (the tokens),
//!   `text.rs` (short strings kept inline), `error.rs` (what an operation
//!   fails with: the one list of error codes JS sees), `store/`, `napi/`.
//! - `src/store/`: `mod.rs` (the seam: one `LockStore` trait), `hold.rs` (the
//!   kinds of hold and what an acquire answers), `options.rs`, `tls.rs`,
//!   `follow.rs` (announced releases), `line.rs` (the line a plain lock's
//!   waiters wait in on a server), `peer.rs` (what answered, when it is not
//!   the server a store expects), `sweeps.rs` (when a server's expired
//!   rows are swept), `line/`, `memory/`, `redis/`,
//!   `postgres/`, `mysql/`, `sqlite/`, `etcd/`, and
//!   `event_loop/` (what the server stores share: a connection on the JS
//!   thread's event loop for any protocol that describes itself).
//! - `src/store/line/`: `contract.rs` (what every store that keeps a line
//!   does with it, run by each such store's tests).
//! - `src/store/memory/`: `mod.rs` (the store), `clock.rs` (expiry on the
//!   monotonic clock), `groups.rs` (semaphores' and read-write keys' groups),
//!   `tests.rs`.
//! - `src/store/redis/`: `mod.rs` (the store, one dispatch on the kind of
//!   hold), `ops.rs` (each operation once: its request), `answer.rs` (the
//!   readers of the replies), `layout.rs`, `scripts.rs`, `request.rs`, `transport.rs` (event loop or
//!   Tokio, chosen once), `shared.rs` (what the operations, the transport
//!   and the subscriber share), `connection.rs`, `fencing.rs`, `errors.rs`,
//!   `pubsub.rs`, `limits.rs` (the longest argument the server reads),
//!   `options.rs`, `wire/`, `tests.rs`, `line_tests.rs` (the
//!   line a plain lock's waiters wait in, against a real server).
//! - `src/store/redis/wire/`: `mod.rs` (Redis's protocol on the event loop),
//!   `connect.rs` (opening and greeting a connection), `target.rs` (where
//!   connections go, and what answered).
//! - `src/store/postgres/`: `mod.rs` (the store, one dispatch on the kind of
//!   hold), `ops.rs` (each operation once: statement, parameters, key and
//!   answer reader), `answer.rs` (the answer either transport reads, and
//!   its readers), `sql.rs`, `holds_sql.rs` (the function of semaphores and
//!   read-write locks), `line_sql.rs` (the line's table and function),
//!   `hashes.rs` (names made from hashes), `shared.rs` (what the operations,
//!   the transport and the listener share), `transport.rs` (event loop or Tokio, chosen once), `via_loop.rs`,
//!   `wire/`, `via_tokio.rs`, `pool.rs`, `listen.rs`, `errors.rs`,
//!   `options.rs`, `tests.rs`, `line_tests.rs`.
//! - `src/store/postgres/wire/`: `mod.rs` (PostgreSQL's protocol on the event
//!   loop), `connect.rs` (TCP and TLS), `session.rs` (logging in, preparing),
//!   `reply.rs` (a row as text, an error the server reported),
//!   `target.rs` (where connections go, and how opening one fails).
//! - `src/store/mysql/`: `mod.rs` (the store, one dispatch on the kind of
//!   hold), `ops.rs` (each operation once: statements, key and answer
//!   reader), `answer.rs` (the readers), `sql.rs`, `sweep.rs` (old rows found, then deleted by key),
//!   `holds_sql.rs` (the procedure of semaphores and read-write locks),
//!   `line_sql.rs` (the line's table and procedures), `hashes.rs` (row ids,
//!   names, hex literals), `shared.rs` (what the operations, the transport
//!   and the ear share), `transport.rs` (each operation on its key's
//!   connection, and the sweep it sets off), `wire/`, `ear.rs`
//!   (hearing of a lock handed to this process), `errors.rs`, `options.rs`,
//!   `tests.rs` (against a MariaDB the test starts, the line's contract too).
//! - `src/store/mysql/wire/`: `mod.rs` (MySQL's protocol on the event loop),
//!   `packet.rs` (framing, OK and ERR), `prepared.rs` (the binary protocol:
//!   statements run by number with typed values), `response.rs` (reading an
//!   answer), `connect.rs` (TCP, a unix socket, TLS), `session.rs` (logging
//!   in, the session, the tables, preparing), `auth.rs`, `target.rs` (where
//!   connections go, and how opening one fails).
//! - `src/store/sqlite/`: `mod.rs` (the store: each operation at once, on
//!   its one connection), `options.rs`, `clock.rs` (the machine's monotonic
//!   clock, and which boot the holds belong to), `sql.rs`, `place.rs`
//!   (where the file may be: not on a network filesystem), `busy.rs`
//!   (waiting for another process's write), `checkpoint.rs` (the log
//!   copied into the file on a thread of its own), `errors.rs`, `open.rs`
//!   (the file checked, its tables, an earlier boot's holds let go),
//!   `ops.rs`, `ear.rs` (releases heard from the other processes),
//!   `line.rs` (the line a plain lock's waiters wait in), `pass.rs` (lapsed
//!   rows swept a batch per acquire), `queued.rs` (run()'s releases,
//!   written with the next operation, and acquires asked together written
//!   with them in one transaction), `told.rs` (hand-overs and releases told
//!   to the other processes after the commit), `tests.rs`,
//!   `line_tests.rs` (ears and the line's contract, two stores on one file),
//!   `queued_tests.rs`.
//! - `src/store/etcd/`: `mod.rs` (the store), `grpc.rs`
//!   (gRPC calls over HTTP/2), `messages.rs` (etcd's messages, declared by
//!   hand), `members.rs` (each call sent to a live member), `endpoint.rs`
//!   (a member's URL, the credentials), `layout.rs`, `leases.rs` (the
//!   shared leases a lock's time is counted on), `txn.rs` (the pieces of
//!   a transaction), `lapses.rs` (each hold let go at its TTL by the store
//!   that took it), `ops.rs`, `entries.rs` (a plain lock's line as read),
//!   `line.rs` (what the store keeps of its places in lines), `gone.rs`
//!   (entries of a line lately known gone), `heard.rs`
//!   (what a deletion heard in a line means for its place), `look.rs`
//!   (a line read, and what the store does with it), `plain.rs` (a plain
//!   lock's operations), `kinds.rs`
//!   (semaphores and read-write locks), `watch.rs` (releases heard),
//!   `following.rs` (what the watch stream follows),
//!   `options.rs`, `test_cluster.rs` (clusters the tests start), `tests.rs`,
//!   `kinds_tests.rs`, `line_tests.rs` (the line, and its contract).
//! - `src/store/event_loop/`: `wire.rs` (the protocol seam: `Wire`, what an
//!   opening hands over or fails with), `mod.rs` (the store's side of its
//!   connections), `opening.rs` (TCP, TLS and remembered
//!   refusals, for opening on Tokio), `due.rs` (what a connection hands
//!   back: answers due, a connection to open), `conn.rs` (one connection's state),
//!   `socket.rs` (bytes in and out, plain or TLS), `stream.rs` (TCP or a
//!   unix socket), `callbacks.rs` (the libuv
//!   callbacks), `engine.rs` (what they drive), `host.rs` (the runtime whose
//!   loop it is: Node's is the napi surface's), `uv/`, `tests/`.
//! - `src/store/event_loop/uv/`: `mod.rs`, `ffi.rs` (libuv's functions as
//!   Node exports them, and its loop, opaque), `handle.rs` (what every handle shares), `poll.rs`,
//!   `timer.rs`, `turn.rs` (the end of a loop turn), `wake.rs` (woken from
//!   another thread).
//! - `src/store/event_loop/tests/`: `harness.rs` (a libuv loop of the test's
//!   own, a host standing in for napi, Tokio: shared with the stores'
//!   tests), `mod.rs` (a line protocol and its server), `connection.rs` (the
//!   connection's behaviour), `sent.rs` (telling when a request is written).
//! - `src/napi/`: `mod.rs` (the `#[napi]` functions alone), `stores/` (the
//!   stores made from JS), `direct.rs` (`acquire` and `release` registered
//!   without napi-rs's per-call bookkeeping), `handle.rs`, `convert.rs`,
//!   `errors.rs`, `pump.rs` (promises settled from other threads), `host.rs`
//!   (Node as the host of the event loop's connections), `test_hooks.rs`.
//! - `src/napi/stores/`: `mod.rs` (what making a store takes: TLS material,
//!   the callback of announced releases), one file per store: `memory.rs`,
//!   `redis.rs`, `postgres.rs`, `mysql.rs`, `sqlite.rs`, `etcd.rs`.
//!
//! A store written in JS never reaches this crate: `lib/bridge/js-store.js` calls it.

pub mod error;
pub mod lock;
#[cfg(not(test))]
mod napi;
pub mod owner;
pub mod store;
pub mod text;

#[cfg(test)]
mod layout_tests {
    use std::collections::BTreeSet;
    use std::path::Path;

    /// The files and folders the layout list above names under `folder`.
    fn listed(folder: &str) -> Option<BTreeSet<String>> {
        let doc: String = include_str!("lib.rs")
            .lines()
            .filter_map(|line| line.strip_prefix("//!"))
            .map(str::trim)
            .collect::<Vec<_>>()
            .join(" ");
        let bullet = doc
            .split(" - ")
            .find(|bullet| bullet.starts_with(&format!("`{folder}`:")))?;
        let names = bullet
            .split('`')
            .skip(3)
            .step_by(2)
            .filter(|name| name.ends_with(".rs") || name.ends_with('/'))
            .map(str::to_owned)
            .collect();
        Some(names)
    }

    fn check(root: &Path, folder: &str, missing: &mut Vec<String>) {
        let mut present = BTreeSet::new();
        let entries = std::fs::read_dir(root.join(folder)).expect("a source folder");
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.path().is_dir() {
                check(root, &format!("{folder}{name}/"), missing);
                present.insert(format!("{name}/"));
            } else if name.ends_with(".rs") {
                present.insert(name);
            }
        }
        match listed(folder) {
            None => missing.push(format!("no bullet for `{folder}`")),
            Some(named) if named != present => missing.push(format!(
                "`{folder}`: listed {named:?}, in the tree {present:?}"
            )),
            Some(_) => {}
        }
    }

    #[test]
    fn the_layout_list_names_every_file_and_folder_of_the_tree() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut missing = Vec::new();
        check(root, "src/", &mut missing);
        assert!(missing.is_empty(), "{missing:#?}");
    }
}
