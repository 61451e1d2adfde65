//! etcd clusters of the tests' own: members started from Debian's
//! `etcd-server` on free loopback ports, each beating every 10 ms and
//! calling an election after 100 ms, so a lease can be as short as a second
//! and a new leader comes within a fraction of one.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{EtcdOptions, EtcdStore};
use crate::store::{LockStore, Op, StoreResult};

/// Members of one cluster of the test's own, killed when dropped.
pub struct Cluster {
    members: Vec<Option<Child>>,
    args: Vec<Vec<String>>,
    clients: Vec<String>,
    dir: std::path::PathBuf,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

impl Cluster {
    pub fn start(size: usize) -> Cluster {
        let dir =
            std::env::temp_dir().join(format!("keel-etcd-{}-{}", std::process::id(), free_port()));
        let clients: Vec<String> = (0..size)
            .map(|_| format!("http://127.0.0.1:{}", free_port()))
            .collect();
        let peers: Vec<String> = (0..size)
            .map(|_| format!("http://127.0.0.1:{}", free_port()))
            .collect();
        let initial = (0..size)
            .map(|i| format!("m{i}={}", peers[i]))
            .collect::<Vec<_>>()
            .join(",");
        let args: Vec<Vec<String>> = (0..size)
            .map(|i| {
                [
                    "--name",
                    &format!("m{i}"),
                    "--data-dir",
                    &dir.join(format!("m{i}")).to_string_lossy(),
                    "--listen-client-urls",
                    &clients[i],
                    "--advertise-client-urls",
                    &clients[i],
                    "--listen-peer-urls",
                    &peers[i],
                    "--initial-advertise-peer-urls",
                    &peers[i],
                    "--initial-cluster",
                    &initial,
                    "--heartbeat-interval",
                    "10",
                    "--election-timeout",
                    "100",
                    "--log-level",
                    "error",
                ]
                .iter()
                .map(|s| s.to_string())
                .collect()
            })
            .collect();
        let mut cluster = Cluster {
            members: Vec::new(),
            args,
            clients,
            dir,
        };
        for i in 0..size {
            let child = cluster.spawn(i);
            cluster.members.push(Some(child));
        }
        let store = cluster.store();
        let runtime = runtime();
        let until = Instant::now() + Duration::from_secs(20);
        while let Err(e) = runtime.block_on(store.ping().settle()) {
            assert!(Instant::now() < until, "etcd did not start answering: {e}");
            std::thread::sleep(Duration::from_millis(50));
        }
        cluster
    }

    fn spawn(&self, i: usize) -> Child {
        Command::new("etcd")
            .args(&self.args[i])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("etcd to start: install it with `apt-get install etcd-server`")
    }

    pub fn options(&self) -> EtcdOptions {
        let urls: Vec<&str> = self.clients.iter().map(String::as_str).collect();
        let mut options = EtcdOptions::for_urls(&urls).expect("the test's URLs");
        options.prefix = format!("test:{}:", free_port()).into_bytes();
        options.command_timeout = Duration::from_secs(3);
        options.connect_timeout = Duration::from_secs(1);
        options
    }

    pub fn store(&self) -> EtcdStore {
        EtcdStore::new(self.options(), None).expect("a store")
    }

    /// The index of the member that leads now, as etcdctl reports it.
    pub fn leader(&self) -> usize {
        for _ in 0..100 {
            for (i, url) in self.clients.iter().enumerate() {
                if self.members[i].is_none() {
                    continue;
                }
                let out = Command::new("etcdctl")
                    .env("ETCDCTL_API", "3")
                    .args(["--endpoints", url, "endpoint", "status", "-w", "json"])
                    .output()
                    .expect("etcdctl: install it with `apt-get install etcd-client`");
                let Ok(status) = serde_json::from_slice::<serde_json::Value>(&out.stdout) else {
                    continue;
                };
                let status = &status[0]["Status"];
                if status["leader"].as_u64().is_some()
                    && status["leader"] == status["header"]["member_id"]
                {
                    return i;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("no member leads");
    }

    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn restart(&mut self, i: usize) {
        assert!(self.members[i].is_none());
        self.members[i] = Some(self.spawn(i));
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// The outcome of `op`, waited for on `runtime`.
pub fn settle<T: Send + 'static>(runtime: &tokio::runtime::Runtime, op: Op<T>) -> StoreResult<T> {
    runtime.block_on(op.settle())
}
