//! The members a store may reach and the call that goes to a live one: one
//! connection at a time, to the member that answered last; a connection
//! that breaks, or a member that answers "unavailable" (it lost its leader,
//! or is cut off with a minority), sends the call on to the next member
//! until the command timeout. Every read is linearizable (etcd's default),
//! so a member cut off from the majority never answers from its own stale
//! copy. With a user name, the store logs in once per connection and sends
//! the token with each call, logging in again when etcd says it expired.

use std::sync::Arc;
use std::time::Duration;

use prost::Message;
use tokio::sync::Mutex;
use tokio::time::Instant;

use super::endpoint::{Credentials, Endpoint};
use super::grpc::{status, CallError, Channel};
use super::messages::paths::AUTHENTICATE;
use super::messages::{AuthenticateRequest, AuthenticateResponse};
use crate::store::{BackendError, Code, StoreError};

/// The cluster as the store reaches it.
pub struct Members {
    endpoints: Vec<Endpoint>,
    tls: Option<Arc<rustls::ClientConfig>>,
    credentials: Option<Credentials>,
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
    current: Mutex<Current>,
    closed: std::sync::atomic::AtomicBool,
    in_flight: tokio::sync::Semaphore,
}

#[derive(Default)]
struct Current {
    /// The member tried first.
    at: usize,
    open: Option<(Channel, Option<Arc<str>>)>,
}

/// Calls in flight at once, the rest waiting their turn: etcd refuses
/// writes ("too many requests") once it has thousands committed and not yet
/// applied, which 10,000 locks asked at once would reach.
const IN_FLIGHT: usize = 256;

/// How long one attempt of a call waits for its answer before it is asked
/// again: etcd drops a write proposed while the cluster has no leader
/// without ever answering it, and elects a new one within a second or two.
const ATTEMPT: Duration = Duration::from_millis(1_000);

/// How long to wait before asking the next member after every member said
/// "unavailable" (an election takes about a second).
const ROUND_PAUSE: Duration = Duration::from_millis(50);

impl Members {
    pub fn new(
        endpoints: Vec<Endpoint>, tls: Option<Arc<rustls::ClientConfig>>,
        credentials: Option<Credentials>, connect_timeout: Duration, command_timeout: Duration,
    ) -> Members {
        // gRPC over TLS is HTTP/2 chosen by ALPN.
        let tls = tls.map(|config| {
            let mut config = (*config).clone();
            config.alpn_protocols = vec![b"h2".to_vec()];
            Arc::new(config)
        });
        Members {
            endpoints,
            tls,
            credentials,
            connect_timeout,
            command_timeout,
            current: Mutex::new(Current::default()),
            closed: std::sync::atomic::AtomicBool::new(false),
            in_flight: tokio::sync::Semaphore::new(IN_FLIGHT),
        }
    }

    /// Call `method` with `request` on a live member: within the command
    /// timeout, plus the connect timeout when a connection has to be made.
    /// A call that failed on its connection is sent again to the next
    /// member, so every call must be safe to apply twice (the store's are
    /// written so).
    pub async fn call<Q: Message, A: Message + Default>(
        &self, method: &str, request: &Q,
    ) -> Result<A, StoreError> {
        if self.is_closed() {
            return Err(backend(
                Code::StoreClosed,
                "EtcdLockStore: the store was closed".to_owned(),
            ));
        }
        let deadline = Instant::now() + self.command_timeout + self.connect_timeout;
        let Ok(Ok(_turn)) = tokio::time::timeout_at(deadline, self.in_flight.acquire()).await
        else {
            return Err(self.timed_out());
        };
        let mut last: Option<StoreError> = None;
        let mut tried = 0usize;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(last.unwrap_or_else(|| self.timed_out()));
            }
            let (channel, token, at) = match tokio::time::timeout(left, self.channel()).await {
                Ok(Ok(open)) => open,
                Ok(Err(e)) => return Err(e),
                Err(_) => return Err(last.unwrap_or_else(|| self.timed_out())),
            };
            let within = left.min(self.command_timeout).min(ATTEMPT);
            let answer = tokio::time::timeout(
                within,
                channel.call::<Q, A>(method, request, token.as_deref(), within),
            )
            .await;
            let failure = match answer {
                Ok(Ok(answer)) => return Ok(answer),
                Ok(Err(failure)) if !out_of_time(&failure) => failure,
                _ if within < left => {
                    // A write proposed while the leader was lost is dropped
                    // and never answered; a member cut off with a minority
                    // answers nothing: asked again, of the next member.
                    last = Some(self.no_quorum());
                    tried += 1;
                    self.move_on(at).await;
                    continue;
                }
                _ => return Err(self.no_quorum()),
            };
            tried += 1;
            match failure {
                CallError::Connection(text) => {
                    last = Some(backend(
                        Code::StoreConnection,
                        format!("{} broke the connection: {text}", self.endpoints[at].name()),
                    ));
                    self.move_on(at).await;
                }
                CallError::Status { message, .. } if message.contains("too many requests") => {
                    // Behind on applying what it committed (nothing was
                    // proposed): asked again in a moment.
                    last = Some(backend(
                        Code::StoreUnavailable,
                        format!("{} is busy: {message}", self.endpoints[at].name()),
                    ));
                    tokio::time::sleep(ROUND_PAUSE.min(left)).await;
                    continue;
                }
                CallError::Status {
                    code: status::UNAVAILABLE,
                    message,
                } => {
                    last = Some(backend(
                        Code::StoreUnavailable,
                        format!("{} is unavailable: {message}", self.endpoints[at].name()),
                    ));
                    self.move_on(at).await;
                }
                CallError::Status { message, .. }
                    if (message.contains("invalid auth token")
                        || message.contains("revision of auth store is old"))
                        && tried <= 2 =>
                {
                    // The token lapsed (etcd's simple tokens last minutes), or
                    // users and roles changed since it was issued: log in again.
                    self.forget_token(at).await;
                    last = Some(backend(Code::StoreAuth, message));
                    continue;
                }
                CallError::Status { code, message } => {
                    return Err(answered(&self.endpoints[at], code, message))
                }
            }
            if tried.is_multiple_of(self.endpoints.len()) {
                tokio::time::sleep(ROUND_PAUSE.min(left)).await;
            }
        }
    }

    /// The open connection (made to the next member that answers if there
    /// is none), its auth token, and which member it is.
    async fn channel(&self) -> Result<(Channel, Option<Arc<str>>, usize), StoreError> {
        let mut current = self.current.lock().await;
        if self.is_closed() {
            current.open = None;
            return Err(backend(
                Code::StoreClosed,
                "EtcdLockStore: the store was closed".to_owned(),
            ));
        }
        if let Some((channel, token)) = &current.open {
            if !channel.is_broken() {
                return Ok((channel.clone(), token.clone(), current.at));
            }
            current.open = None;
        }
        let mut last = None;
        for step in 0..self.endpoints.len() {
            let at = (current.at + step) % self.endpoints.len();
            let endpoint = &self.endpoints[at];
            let opened = tokio::time::timeout(
                self.connect_timeout,
                Channel::open(endpoint, self.tls.as_ref()),
            )
            .await;
            let channel = match opened {
                Ok(Ok(channel)) => channel,
                Ok(Err(failure)) => {
                    last = Some(backend(failure.code, failure.text));
                    continue;
                }
                Err(_) => {
                    last = Some(backend(
                        Code::StoreTimeout,
                        format!(
                            "{} did not accept a connection within the connect timeout ({} ms)",
                            endpoint.name(),
                            self.connect_timeout.as_millis()
                        ),
                    ));
                    continue;
                }
            };
            let token = match &self.credentials {
                Some(credentials) => match self.log_in(&channel, endpoint, credentials).await {
                    Ok(token) => Some(token),
                    Err(e) if matches!(&e, StoreError::Backend(b) if b.code == Code::StoreAuth) => {
                        return Err(e)
                    }
                    Err(e) => {
                        last = Some(e);
                        continue;
                    }
                },
                None => None,
            };
            current.at = at;
            current.open = Some((channel.clone(), token.clone()));
            return Ok((channel, token, at));
        }
        Err(last.unwrap_or_else(|| backend(Code::StoreConnection, "no etcd endpoint".to_owned())))
    }

    async fn log_in(
        &self, channel: &Channel, endpoint: &Endpoint, credentials: &Credentials,
    ) -> Result<Arc<str>, StoreError> {
        let request = AuthenticateRequest {
            name: credentials.username.clone(),
            password: credentials.password.clone(),
        };
        let answer = channel
            .call::<_, AuthenticateResponse>(AUTHENTICATE, &request, None, self.command_timeout)
            .await;
        match answer {
            Ok(answer) => Ok(answer.token.into()),
            Err(CallError::Connection(text)) => Err(backend(
                Code::StoreConnection,
                format!(
                    "{} broke the connection while logging in: {text}",
                    endpoint.name()
                ),
            )),
            Err(CallError::Status { code, message }) => Err(answered(endpoint, code, message)),
        }
    }

    /// The member at `at` failed: the next one is tried first from now on.
    async fn move_on(&self, at: usize) {
        let mut current = self.current.lock().await;
        if current.at == at {
            current.open = None;
            current.at = (at + 1) % self.endpoints.len();
        }
    }

    async fn forget_token(&self, at: usize) {
        let mut current = self.current.lock().await;
        if current.at == at {
            current.open = None;
        }
    }

    /// A watch's connection: its own, so a slow watch never holds up a call.
    /// Members are tried in turn from `from` (the one calls go to, without
    /// it); answers the index of the one it opened.
    pub async fn open_apart(
        &self, from: Option<usize>,
    ) -> Result<(Channel, Option<Arc<str>>, usize), StoreError> {
        let at = match from {
            Some(at) => at % self.endpoints.len().max(1),
            None => self.current.lock().await.at,
        };
        let mut last = None;
        for step in 0..self.endpoints.len() {
            let at = (at + step) % self.endpoints.len();
            let endpoint = &self.endpoints[at];
            match tokio::time::timeout(
                self.connect_timeout,
                Channel::open(endpoint, self.tls.as_ref()),
            )
            .await
            {
                Ok(Ok(channel)) => {
                    let token = match &self.credentials {
                        Some(credentials) => {
                            Some(self.log_in(&channel, endpoint, credentials).await?)
                        }
                        None => None,
                    };
                    return Ok((channel, token, at));
                }
                Ok(Err(failure)) => last = Some(backend(failure.code, failure.text)),
                Err(_) => {
                    last = Some(backend(
                        Code::StoreTimeout,
                        format!("{} did not accept a connection in time", endpoint.name()),
                    ))
                }
            }
        }
        Err(last.unwrap_or_else(|| backend(Code::StoreConnection, "no etcd endpoint".to_owned())))
    }

    /// Every attempt went unanswered though a member took the call: no
    /// member with a majority of the cluster behind it answered.
    fn no_quorum(&self) -> StoreError {
        backend(
            Code::StoreUnavailable,
            format!(
                "no etcd member answered within the command timeout ({} ms): the cluster may have \
                 lost its leader, or the members reached may be cut off from the majority; \
                 the outcome is unknown",
                self.command_timeout.as_millis()
            ),
        )
    }

    fn timed_out(&self) -> StoreError {
        backend(
            Code::StoreTimeout,
            format!(
                "etcd did not answer within the command timeout ({} ms); the outcome is unknown",
                self.command_timeout.as_millis()
            ),
        )
    }

    /// Close: calls after this fail as closed, and the connection goes
    /// (now, or at the next call if one holds it at the moment).
    pub fn close(&self) {
        self.closed
            .store(true, std::sync::atomic::Ordering::Release);
        if let Ok(mut current) = self.current.try_lock() {
            current.open = None;
        }
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::Acquire)
    }
}

/// A call the server gave up on for want of time (its deadline passed).
fn out_of_time(failure: &CallError) -> bool {
    matches!(failure, CallError::Status { code, message }
        if *code == status::DEADLINE_EXCEEDED || message.contains("deadline exceeded"))
}

/// The code of etcd's other answers (a request larger than it reads, a
/// lease it would not grant).
pub const OTHER: Code = Code::StoreEtcd;

pub fn backend(code: Code, message: String) -> StoreError {
    StoreError::Backend(BackendError { code, message })
}

/// What an error status from `endpoint` becomes.
fn answered(endpoint: &Endpoint, code: u32, message: String) -> StoreError {
    // etcd answers a wrong password and a missing user as invalid arguments.
    const REFUSALS: [&str; 3] = [
        "authentication failed",
        "user name is empty",
        "permission denied",
    ];
    let code = match code {
        _ if REFUSALS.iter().any(|refusal| message.contains(refusal)) => Code::StoreAuth,
        status::UNAUTHENTICATED | status::PERMISSION_DENIED => Code::StoreAuth,
        status::UNAVAILABLE | status::RESOURCE_EXHAUSTED => Code::StoreUnavailable,
        status::DEADLINE_EXCEEDED => Code::StoreTimeout,
        _ => OTHER,
    };
    backend(code, format!("{} answered: {message}", endpoint.name()))
}
