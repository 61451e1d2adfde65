//! Redis's protocol for the event-loop connection
//! ([`crate::store::event_loop`]): how a request is written (`request`: the
//! redis crate's own encoder), how a reply is read (its `ValueCodec`), and
//! how a connection is opened and greeted ([`connect`]).

pub mod connect;
pub mod target;

use std::sync::Arc;

use bytes::BytesMut;
use redis::{Value, ValueCodec};
use tokio_util::codec::Decoder;

use self::target::Target;
use super::errors::RESENDS;
use super::request::{Request, SCRIPTS};
use crate::store::event_loop::{self, Failure, Opening, Verdict, Wire};
use crate::store::Code;

pub struct Redis;

/// What one connection knows: its reply parser, and which scripts it has
/// (an `EVAL` loads one).
#[derive(Default)]
pub struct Session {
    codec: ValueCodec,
    loaded: [bool; SCRIPTS],
}

impl Wire for Redis {
    type Target = Target;
    type Request = Request;
    type Answer = Value;
    type Session = Session;
    type Prepared = ();

    const STORE: &'static str = "RedisLockStore";
    const CODE: Code = Code::StoreRedis;
    const RESOURCE: &'static std::ffi::CStr = c"keel-lock:redis";
    const RESENDS: u32 = RESENDS;

    fn begin(_: &mut Session, target: &Arc<Target>, _: ()) {
        target.first_opened.now();
    }

    fn encode(session: &mut Session, request: &Request, out: &mut Vec<u8>) -> Result<(), Failure> {
        request.encode(out, &mut session.loaded);
        Ok(())
    }

    fn decode(session: &mut Session, inbound: &mut BytesMut) -> Result<Option<Value>, String> {
        session
            .codec
            .decode(inbound)
            .map_err(|_| "it sent something that is not a Redis reply".to_owned())
    }

    fn verdict(_session: &mut Session, request: &Request, answer: &Value) -> Verdict {
        // A script the server forgot (SCRIPT FLUSH, or evicted): it did not
        // run, but what was sent after it did. Sent again alone, it would
        // run after them: a run()'s release after the next acquire of its
        // key, which run() no longer waits for. So it and everything after
        // it go again, in order, on a fresh connection, where each script
        // goes as EVAL first (every operation may be sent again: `errors`).
        match (answer, request.lua()) {
            (Value::ServerError(e), Some(_)) if e.code() == "NOSCRIPT" => Verdict::Broken(
                "the server forgot its scripts (SCRIPT FLUSH): what was sent after goes again, in order".to_owned(),
            ),
            _ => Verdict::Deliver,
        }
    }

    fn open(target: Arc<Target>) -> Opening<()> {
        Box::pin(connect::open(target))
    }
}

pub type Direct = event_loop::Direct<Redis>;
pub type Local = event_loop::Local<Redis>;
