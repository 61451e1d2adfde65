//! The connection every command rides: one server's reconnecting
//! multiplexed connection, or a Redis Cluster's, opened on first use.

use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

use super::Shared;
use crate::store::{BackendError, Code, StoreError, StoreResult};

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
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
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

impl Shared {
    pub(super) fn closed(name: &'static str) -> StoreError {
        StoreError::Backend(BackendError {
            code: Code::StoreClosed,
            message: format!("RedisLockStore.{name}: the store is closed"),
        })
    }

    /// The open connection, made on first use. A single server's opens lazily
    /// and reconnects by itself; a cluster's is made here (the slot map read)
    /// and, should that fail, tried again by the next operation.
    pub(super) async fn connection(&self, name: &'static str) -> StoreResult<OpenConnection> {
        if let Some(open) = self.open_or_single(name)? {
            return Ok(open);
        }
        let Some(cluster) = &self.cluster else {
            return Err(Self::closed(name));
        };
        let _one_at_a_time = self.connecting.lock().await;
        if let Some(open) = self.open_or_single(name)? {
            return Ok(open);
        }
        let conn = cluster
            .get_async_connection()
            .await
            .map_err(|e| self.failure(name, &e))?;
        let mut connection = self.connection.lock().map_err(|_| Self::closed(name))?;
        match &*connection {
            Connection::Closed => Err(Self::closed(name)),
            _ => {
                *connection = Connection::Open(OpenConnection::Cluster(conn.clone()));
                Ok(OpenConnection::Cluster(conn))
            }
        }
    }

    /// The connection if open; a single server's made now (lazily). None: a
    /// cluster's still to be made.
    fn open_or_single(&self, name: &'static str) -> StoreResult<Option<OpenConnection>> {
        let mut connection = self.connection.lock().map_err(|_| Self::closed(name))?;
        match &*connection {
            Connection::Open(conn) => Ok(Some(conn.clone())),
            Connection::Closed => Err(Self::closed(name)),
            Connection::Idle if self.cluster.is_some() => Ok(None),
            Connection::Idle => {
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(self.options.connect_timeout))
                    .set_response_timeout(Some(self.options.command_timeout))
                    // Reconnects are retried a few times, quickly; an operation
                    // waiting on one is still bounded by its own timeout.
                    .set_number_of_retries(2)
                    .set_min_delay(Duration::from_millis(20))
                    .set_max_delay(Duration::from_millis(500));
                let manager =
                    ConnectionManager::new_lazy_with_config(self.clients[0].clone(), config)
                        .map_err(|e| self.failure(name, &e))?;
                let conn = OpenConnection::Single(manager);
                *connection = Connection::Open(conn.clone());
                Ok(Some(conn))
            }
        }
    }
}
