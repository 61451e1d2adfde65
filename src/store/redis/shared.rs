//! What a store's operations, its transport and its subscriber share: its
//! options, the clients of its server (or cluster), the connection every
//! command on Tokio rides (opened on first use), its key layout.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::{Client, ConnectionAddr, RedisError};

use super::connection::{Connection, OpenConnection};
use super::errors::{closed, diagnosed, failure};
use super::layout::Layout;
use super::limits::Limits;
use super::options::RedisOptions;
use super::pubsub::Watch;
use crate::store::follow::{FirstOpened, Follower};
use crate::store::{StoreError, StoreResult};

pub struct Shared {
    pub options: RedisOptions,
    /// The server as error messages name it (no password).
    pub display: String,
    /// The server, or for a cluster one client per node URL given (for pub/sub).
    pub clients: Vec<Client>,
    pub cluster: Option<ClusterClient>,
    /// Held while a cluster connection is being made, so only one is.
    pub connecting: tokio::sync::Mutex<()>,
    pub connection: Mutex<Connection>,
    pub layout: Layout,
    /// The subscriber of announced releases, once anyone waits.
    pub follower: Follower<Watch>,
    /// The longest command the server reads.
    pub limits: Arc<Limits>,
    /// Whether a connection for the operations opened: the subscriber waits for it.
    pub first_opened: FirstOpened,
}

impl Shared {
    /// The open connection, made on first use. A single server's opens lazily
    /// and reconnects by itself; a cluster's is made here (the slot map read)
    /// and, should that fail, tried again by the next operation.
    pub async fn connection(&self, name: &'static str) -> StoreResult<OpenConnection> {
        if let Some(open) = self.open_or_single(name)? {
            return Ok(open);
        }
        let Some(cluster) = &self.cluster else {
            return Err(closed(name));
        };
        let _one_at_a_time = self.connecting.lock().await;
        if let Some(open) = self.open_or_single(name)? {
            return Ok(open);
        }
        let conn = cluster
            .get_async_connection()
            .await
            .map_err(|e| failure(&self.display, name, &e))?;
        let mut connection = self.connection.lock().map_err(|_| closed(name))?;
        match &*connection {
            Connection::Closed => Err(closed(name)),
            _ => {
                *connection = Connection::Open(OpenConnection::Cluster(conn.clone()));
                Ok(OpenConnection::Cluster(conn))
            }
        }
    }

    /// The connection if open; a single server's made now (lazily). None: a
    /// cluster's still to be made.
    fn open_or_single(&self, name: &'static str) -> StoreResult<Option<OpenConnection>> {
        let mut connection = self.connection.lock().map_err(|_| closed(name))?;
        match &*connection {
            Connection::Open(conn) => Ok(Some(conn.clone())),
            Connection::Closed => Err(closed(name)),
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
                        .map_err(|e| failure(&self.display, name, &e))?;
                let conn = OpenConnection::Single(manager);
                *connection = Connection::Open(conn.clone());
                Ok(Some(conn))
            }
        }
    }

    /// The error a failed command becomes ([`diagnosed`]).
    pub async fn diagnose(&self, name: &'static str, e: &RedisError) -> StoreError {
        let single = match self.clients[0].get_connection_info().addr() {
            ConnectionAddr::Tcp(host, port) if self.cluster.is_none() => {
                let within = self.options.connect_timeout.min(Duration::from_secs(1));
                Some((host.as_str(), *port, within))
            }
            _ => None,
        };
        diagnosed(name, e, &self.display, single).await
    }
}
