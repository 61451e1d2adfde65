//! The connection every command on Tokio rides: one server's reconnecting
//! multiplexed connection, or a Redis Cluster's (opened on first use, by
//! `Shared::connection`).

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

pub(super) enum Connection {
    /// Not connected yet: the connection is made on first use, inside Tokio.
    Idle,
    Open(OpenConnection),
    Closed,
}

/// One server's reconnecting multiplexed connection, or a cluster's.
#[derive(Clone)]
pub enum OpenConnection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for OpenConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            OpenConnection::Single(c) => c.req_packed_command(cmd),
            OpenConnection::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self, pipeline: &'a Pipeline, offset: usize, count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            OpenConnection::Single(c) => c.req_packed_commands(pipeline, offset, count),
            OpenConnection::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            OpenConnection::Single(c) => c.get_db(),
            OpenConnection::Cluster(c) => c.get_db(),
        }
    }
}
