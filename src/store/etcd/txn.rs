//! The pieces every transaction of the store is made of: what it compares
//! (a key absent, holding an owner, still at a revision; no key of a range
//! created since one), what it does (put, read, count, delete), and what its
//! answer says (the revision it wrote at, the first key it read, a count).

use super::layout::range_end;
use super::members::{backend, OTHER};
use super::messages::{
    Against, Compare, DeleteRangeRequest, KeyValue, PutRequest, RangeRequest, Request, RequestOp,
    Response, TxnRequest, TxnResponse, CREATE, EQUAL, GREATER, LESS, MOD, VALUE,
};
use crate::store::StoreError;

/// Nobody holds `stored`.
pub fn absent(stored: &[u8]) -> Compare {
    compare(stored, EQUAL, CREATE, Against::CreateRevision(0))
}

/// `stored` holds `value` (an owner token, or a line's entry).
pub fn held_by(stored: &[u8], value: &[u8]) -> Compare {
    compare(stored, EQUAL, VALUE, Against::Value(value.to_vec()))
}

/// No key is under `under`: an empty range compares as one key never created.
pub fn empty(under: &[u8]) -> Compare {
    Compare {
        range_end: range_end(under),
        ..compare(under, EQUAL, CREATE, Against::CreateRevision(0))
    }
}

/// `stored` was created at `revision` (and so is still there).
pub fn created_at(stored: &[u8], revision: i64) -> Compare {
    compare(stored, EQUAL, CREATE, Against::CreateRevision(revision))
}

/// No key under `under` was created before `revision`.
pub fn none_created_before(under: &[u8], revision: i64) -> Compare {
    Compare {
        range_end: range_end(under),
        ..compare(
            under,
            GREATER,
            CREATE,
            Against::CreateRevision(revision - 1),
        )
    }
}

/// `stored` was last written at `revision`.
pub fn written_at(stored: &[u8], revision: i64) -> Compare {
    compare(stored, EQUAL, MOD, Against::ModRevision(revision))
}

/// No key under `under` was created after `revision`.
pub fn none_created_since(under: &[u8], revision: i64) -> Compare {
    Compare {
        range_end: range_end(under),
        ..compare(under, LESS, CREATE, Against::CreateRevision(revision + 1))
    }
}

fn compare(key: &[u8], result: i32, target: i32, against: Against) -> Compare {
    Compare {
        result,
        target,
        key: key.to_vec(),
        against: Some(against),
        range_end: Vec::new(),
    }
}

pub fn put(stored: &[u8], value: &[u8], lease: i64) -> RequestOp {
    op(Request::Put(PutRequest {
        key: stored.to_vec(),
        value: value.to_vec(),
        lease,
    }))
}

/// Every key under `under`.
pub fn range_under(under: &[u8]) -> RequestOp {
    op(Request::Range(RangeRequest {
        key: under.to_vec(),
        range_end: range_end(under),
        ..Default::default()
    }))
}

/// A transaction run as one step of another.
pub fn nested(txn: TxnRequest) -> RequestOp {
    op(Request::Txn(Box::new(txn)))
}

pub fn range(stored: &[u8]) -> RequestOp {
    op(Request::Range(RangeRequest {
        key: stored.to_vec(),
        ..Default::default()
    }))
}

/// How many keys are under `under` (read with [`count`]).
pub fn count_under(under: &[u8]) -> RequestOp {
    op(Request::Range(RangeRequest {
        key: under.to_vec(),
        range_end: range_end(under),
        count_only: true,
        ..Default::default()
    }))
}

pub fn delete(stored: &[u8]) -> RequestOp {
    op(Request::DeleteRange(DeleteRangeRequest {
        key: stored.to_vec(),
    }))
}

fn op(request: Request) -> RequestOp {
    RequestOp {
        request: Some(request),
    }
}

/// The revision the transaction was answered at: what it wrote, if it wrote.
pub fn written(answer: &TxnResponse) -> i64 {
    answer.header.as_ref().map_or(0, |h| h.revision)
}

/// [`written`], as a fencing token.
pub fn revision(answer: &TxnResponse) -> u64 {
    u64::try_from(written(answer)).unwrap_or(0)
}

/// The first key any of the transaction's reads found.
pub fn first_kv(answer: &TxnResponse) -> Option<&KeyValue> {
    answer.responses.iter().find_map(|op| match &op.response {
        Some(Response::Range(range)) => range.kvs.first(),
        _ => None,
    })
}

/// What its `at`-th operation, a transaction, answered.
pub fn nested_at(answer: &TxnResponse, at: usize) -> Option<&TxnResponse> {
    match answer.responses.get(at)?.response.as_ref()? {
        Response::Txn(inner) => Some(inner),
        _ => None,
    }
}

/// Every key its `at`-th operation read.
pub fn kvs_at(answer: &TxnResponse, at: usize) -> &[KeyValue] {
    match answer.responses.get(at).and_then(|op| op.response.as_ref()) {
        Some(Response::Range(read)) => &read.kvs,
        _ => &[],
    }
}

/// The first key its `at`-th operation read.
pub fn kv_at(answer: &TxnResponse, at: usize) -> Option<&KeyValue> {
    match answer.responses.get(at)?.response.as_ref()? {
        Response::Range(read) => read.kvs.first(),
        _ => None,
    }
}

/// The count its `at`-th operation ([`count_under`]) read: an error when
/// there is none, never taken as nobody (that would admit past a limit).
pub fn count(answer: &TxnResponse, at: usize) -> Result<i64, StoreError> {
    match answer.responses.get(at).and_then(|op| op.response.as_ref()) {
        Some(Response::Range(counted)) => Ok(counted.count),
        _ => Err(backend(
            OTHER,
            "etcd answered a count without one".to_owned(),
        )),
    }
}
