//! The part of etcd's v3 API the store speaks, as protobuf messages declared
//! here by hand (the field numbers are those of etcd's `rpc.proto` and
//! `kv.proto`): no `.proto` files and no `protoc` at build time. Only the
//! fields the store writes or reads are declared; protobuf skips the rest.

use prost::Message;

/// The header of every answer: the store's revision when it was applied.
#[derive(Clone, PartialEq, Message)]
pub struct ResponseHeader {
    #[prost(int64, tag = "3")]
    pub revision: i64,
}

/// A stored key, as `kv.proto` has it.
#[derive(Clone, PartialEq, Message)]
pub struct KeyValue {
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    #[prost(int64, tag = "2")]
    pub create_revision: i64,
    #[prost(int64, tag = "3")]
    pub mod_revision: i64,
    #[prost(bytes = "vec", tag = "5")]
    pub value: Vec<u8>,
    #[prost(int64, tag = "6")]
    pub lease: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct RangeRequest {
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub range_end: Vec<u8>,
    #[prost(int64, tag = "3")]
    pub limit: i64,
    #[prost(bool, tag = "9")]
    pub count_only: bool,
}

#[derive(Clone, PartialEq, Message)]
pub struct RangeResponse {
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    #[prost(message, repeated, tag = "2")]
    pub kvs: Vec<KeyValue>,
    #[prost(int64, tag = "4")]
    pub count: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct PutRequest {
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
    #[prost(int64, tag = "3")]
    pub lease: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct PutResponse {
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
}

#[derive(Clone, PartialEq, Message)]
pub struct DeleteRangeRequest {
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
}

#[derive(Clone, PartialEq, Message)]
pub struct DeleteRangeResponse {
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    #[prost(int64, tag = "2")]
    pub deleted: i64,
}

/// One step of a transaction's branch.
#[derive(Clone, PartialEq, Message)]
pub struct RequestOp {
    #[prost(oneof = "Request", tags = "1, 2, 3, 4")]
    pub request: Option<Request>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Request {
    #[prost(message, tag = "1")]
    Range(RangeRequest),
    #[prost(message, tag = "2")]
    Put(PutRequest),
    #[prost(message, tag = "3")]
    DeleteRange(DeleteRangeRequest),
    /// A transaction within the transaction (etcd 3.3 and later).
    #[prost(message, boxed, tag = "4")]
    Txn(Box<TxnRequest>),
}

#[derive(Clone, PartialEq, Message)]
pub struct ResponseOp {
    #[prost(oneof = "Response", tags = "1, 2, 3, 4")]
    pub response: Option<Response>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Response {
    #[prost(message, tag = "1")]
    Range(RangeResponse),
    #[prost(message, tag = "2")]
    Put(PutResponse),
    #[prost(message, tag = "3")]
    DeleteRange(DeleteRangeResponse),
    #[prost(message, boxed, tag = "4")]
    Txn(Box<TxnResponse>),
}

/// A transaction's condition on one key: `result` of comparing its `target`.
#[derive(Clone, PartialEq, Message)]
pub struct Compare {
    #[prost(int32, tag = "1")]
    pub result: i32,
    #[prost(int32, tag = "2")]
    pub target: i32,
    #[prost(bytes = "vec", tag = "3")]
    pub key: Vec<u8>,
    #[prost(oneof = "Against", tags = "5, 6, 7")]
    pub against: Option<Against>,
    /// With it, the comparison holds for every key in `[key, range_end)`
    /// (and for none at all).
    #[prost(bytes = "vec", tag = "64")]
    pub range_end: Vec<u8>,
}

/// `Compare.result`: equal.
pub const EQUAL: i32 = 0;
/// `Compare.result`: greater than.
pub const GREATER: i32 = 1;
/// `Compare.result`: less than.
pub const LESS: i32 = 2;
/// `Compare.target`: the key's create revision (0: the key does not exist).
pub const CREATE: i32 = 1;
/// `Compare.target`: the revision of the key's last write.
pub const MOD: i32 = 2;
/// `Compare.target`: the key's value.
pub const VALUE: i32 = 3;

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Against {
    #[prost(int64, tag = "5")]
    CreateRevision(i64),
    #[prost(int64, tag = "6")]
    ModRevision(i64),
    #[prost(bytes = "vec", tag = "7")]
    Value(Vec<u8>),
}

#[derive(Clone, PartialEq, Message)]
pub struct TxnRequest {
    #[prost(message, repeated, tag = "1")]
    pub compare: Vec<Compare>,
    #[prost(message, repeated, tag = "2")]
    pub success: Vec<RequestOp>,
    #[prost(message, repeated, tag = "3")]
    pub failure: Vec<RequestOp>,
}

#[derive(Clone, PartialEq, Message)]
pub struct TxnResponse {
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    #[prost(bool, tag = "2")]
    pub succeeded: bool,
    #[prost(message, repeated, tag = "3")]
    pub responses: Vec<ResponseOp>,
}

#[derive(Clone, PartialEq, Message)]
pub struct LeaseGrantRequest {
    #[prost(int64, tag = "1")]
    pub ttl: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct LeaseGrantResponse {
    #[prost(int64, tag = "2")]
    pub id: i64,
    #[prost(int64, tag = "3")]
    pub ttl: i64,
    #[prost(string, tag = "4")]
    pub error: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct LeaseTimeToLiveRequest {
    #[prost(int64, tag = "1")]
    pub id: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct LeaseTimeToLiveResponse {
    /// Seconds left, whole: the lease ends in under `ttl` + 1 seconds; -1
    /// once it has ended.
    #[prost(int64, tag = "3")]
    pub ttl: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct AuthenticateRequest {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub password: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct AuthenticateResponse {
    #[prost(string, tag = "2")]
    pub token: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct WatchRequest {
    #[prost(oneof = "WatchAsk", tags = "1, 2, 3")]
    pub ask: Option<WatchAsk>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum WatchAsk {
    #[prost(message, tag = "1")]
    Create(WatchCreateRequest),
    #[prost(message, tag = "2")]
    Cancel(WatchCancelRequest),
    /// Asks the member to answer on the stream with its revision (etcd 3.4
    /// and later): a stream that does not answer is no longer heard.
    #[prost(message, tag = "3")]
    Progress(WatchProgressRequest),
}

#[derive(Clone, PartialEq, Message)]
pub struct WatchProgressRequest {}

/// `WatchCreateRequest.filters`: leave out puts (a watch here hears deletes).
pub const NO_PUT: i32 = 0;

#[derive(Clone, PartialEq, Message)]
pub struct WatchCreateRequest {
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub range_end: Vec<u8>,
    #[prost(int64, tag = "3")]
    pub start_revision: i64,
    #[prost(int32, repeated, tag = "5")]
    pub filters: Vec<i32>,
    #[prost(int64, tag = "7")]
    pub watch_id: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct WatchCancelRequest {
    #[prost(int64, tag = "1")]
    pub watch_id: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct WatchResponse {
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    #[prost(int64, tag = "2")]
    pub watch_id: i64,
    #[prost(bool, tag = "3")]
    pub created: bool,
    #[prost(bool, tag = "4")]
    pub canceled: bool,
    #[prost(message, repeated, tag = "11")]
    pub events: Vec<Event>,
}

/// `Event.kind`: the key was deleted (or its lease ended).
pub const DELETE: i32 = 1;

#[derive(Clone, PartialEq, Message)]
pub struct Event {
    #[prost(int32, tag = "1")]
    pub kind: i32,
    #[prost(message, optional, tag = "2")]
    pub kv: Option<KeyValue>,
}

/// The methods called, as gRPC names them.
pub mod paths {
    pub const RANGE: &str = "/etcdserverpb.KV/Range";
    pub const TXN: &str = "/etcdserverpb.KV/Txn";
    pub const LEASE_GRANT: &str = "/etcdserverpb.Lease/LeaseGrant";
    pub const TIME_TO_LIVE: &str = "/etcdserverpb.Lease/LeaseTimeToLive";
    pub const AUTHENTICATE: &str = "/etcdserverpb.Auth/Authenticate";
    pub const WATCH: &str = "/etcdserverpb.Watch/Watch";
}
