//! gRPC over one HTTP/2 connection to one etcd member: a call is a POST of
//! one length-prefixed protobuf message, answered by one (or, for a stream,
//! many) and a `grpc-status` at the end. HTTP/2 carries every call of the
//! store on the one connection at once, each its own stream.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use h2::client::SendRequest;
use h2::RecvStream;
use prost::Message;

use super::endpoint::Endpoint;
use crate::store::event_loop::{connect_tcp, start_tls, Failure};
use crate::store::Code;

/// Why a call failed: the connection (the call may or may not have been
/// applied), or the server's answer (a gRPC status and its message).
#[derive(Debug)]
pub enum CallError {
    Connection(String),
    Status { code: u32, message: String },
}

/// gRPC status codes the store tells apart.
pub mod status {
    pub const DEADLINE_EXCEEDED: u32 = 4;
    pub const PERMISSION_DENIED: u32 = 7;
    pub const RESOURCE_EXHAUSTED: u32 = 8;
    pub const UNAVAILABLE: u32 = 14;
    pub const UNAUTHENTICATED: u32 = 16;
}

/// One open connection to a member. Cloning shares it.
#[derive(Clone)]
pub struct Channel {
    send: SendRequest<Bytes>,
    base: Arc<str>,
}

impl Channel {
    /// Connect to `endpoint` (TCP, TLS when its URL says `https`, then
    /// HTTP/2), or why not.
    pub async fn open(
        endpoint: &Endpoint, tls: Option<&Arc<rustls::ClientConfig>>,
    ) -> Result<Channel, Failure> {
        let server = endpoint.name();
        let tcp = connect_tcp(&endpoint.host, endpoint.port, &server).await?;
        let send = match (&endpoint.tls_name, tls) {
            (Some(name), Some(config)) => {
                let stream = start_tls(config, name, tcp, &server).await?;
                handshake(stream, &server).await?
            }
            (Some(_), None) => {
                return Err(Failure {
                    code: Code::StoreConnection,
                    text: format!("{server}: https without a TLS configuration"),
                })
            }
            (None, _) => handshake(tcp, &server).await?,
        };
        let scheme = if endpoint.tls_name.is_some() {
            "https"
        } else {
            "http"
        };
        Ok(Channel {
            send,
            base: if endpoint.host.contains(':') {
                format!("{scheme}://[{}]:{}", endpoint.host, endpoint.port).into()
            } else {
                format!("{scheme}://{}:{}", endpoint.host, endpoint.port).into()
            },
        })
    }

    /// Whether the connection can take no more calls (it broke or closed).
    pub fn is_broken(&self) -> bool {
        let mut send = self.send.clone();
        let waker = futures_util::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        matches!(send.poll_ready(&mut cx), std::task::Poll::Ready(Err(_)))
    }

    /// Call `method` (`/etcdserverpb.KV/Txn`) with `request`, within
    /// `within` (told to the server too), with the auth `token` if any.
    pub async fn call<Q: Message, A: Message + Default>(
        &self, method: &str, request: &Q, token: Option<&str>, within: Duration,
    ) -> Result<A, CallError> {
        let (mut body, answer) = self.start(method, token, Some(within)).await?;
        body.send_data(frame(request), true).map_err(connection)?;
        let mut answer = answer.answers::<A>().await?;
        let response = answer.recv().await?;
        answer.end_of_call().await?;
        response.ok_or_else(|| CallError::Connection("the call ended without an answer".to_owned()))
    }

    /// Start a call to `method`: where to send its messages, and its
    /// answers to come (the server answers once it has read a message).
    pub async fn start(
        &self, method: &str, token: Option<&str>, within: Option<Duration>,
    ) -> Result<(h2::SendStream<Bytes>, Answering), CallError> {
        let mut request = http::Request::builder()
            .method("POST")
            .uri(format!("{}{method}", self.base))
            .header("content-type", "application/grpc")
            .header("te", "trailers");
        if let Some(token) = token {
            request = request.header("token", token);
        }
        match within {
            Some(within) => {
                request = request.header("grpc-timeout", format!("{}m", within.as_millis().max(1)));
            }
            // A stream (a watch) is ended by a member that loses its leader,
            // rather than going quiet while cut off from the majority.
            None => request = request.header("hasleader", "true"),
        }
        let request = request
            .body(())
            .map_err(|e| CallError::Connection(format!("the request could not be made: {e}")))?;
        let mut send = self.send.clone().ready().await.map_err(connection)?;
        let (response, body) = send.send_request(request, false).map_err(connection)?;
        Ok((body, Answering(response)))
    }
}

/// A call's answers before the server's headers came.
pub struct Answering(h2::client::ResponseFuture);

impl Answering {
    /// The answers, once the server's headers say the call goes on.
    pub async fn answers<A: Message + Default>(self) -> Result<Answers<A>, CallError> {
        let response = self.0.await.map_err(connection)?;
        let (head, recv) = response.into_parts();
        if head.status != http::StatusCode::OK {
            return Err(CallError::Connection(format!(
                "answered HTTP {} where gRPC was expected",
                head.status
            )));
        }
        // A call the server refuses at once ends in its headers ("trailers only").
        if let Some(error) = status_of(&head.headers) {
            return Err(error);
        }
        Ok(Answers {
            recv,
            buffer: BytesMut::new(),
            _answer: std::marker::PhantomData,
        })
    }
}

/// The answers of one call, read one message at a time.
pub struct Answers<A> {
    recv: RecvStream,
    buffer: BytesMut,
    _answer: std::marker::PhantomData<fn() -> A>,
}

impl<A: Message + Default> Answers<A> {
    /// The next message, or `None` once the server ended the call well.
    pub async fn recv(&mut self) -> Result<Option<A>, CallError> {
        loop {
            if let Some(message) = self.take()? {
                return Ok(Some(message));
            }
            match self.recv.data().await {
                Some(data) => {
                    let data = data.map_err(connection)?;
                    let _ = self.recv.flow_control().release_capacity(data.len());
                    self.buffer.extend_from_slice(&data);
                }
                None => {
                    self.end_of_call().await?;
                    return Ok(None);
                }
            }
        }
    }

    /// The status the call ended with: an error unless it is OK.
    async fn end_of_call(&mut self) -> Result<(), CallError> {
        while let Some(data) = self.recv.data().await {
            let data = data.map_err(connection)?;
            let _ = self.recv.flow_control().release_capacity(data.len());
        }
        match self.recv.trailers().await.map_err(connection)? {
            Some(trailers) => status_of(&trailers).map_or(Ok(()), Err),
            None => Err(CallError::Connection(
                "the call ended without a status".to_owned(),
            )),
        }
    }

    fn take(&mut self) -> Result<Option<A>, CallError> {
        if self.buffer.len() < 5 {
            return Ok(None);
        }
        let length = u32::from_be_bytes([
            self.buffer[1],
            self.buffer[2],
            self.buffer[3],
            self.buffer[4],
        ]);
        let length = length as usize;
        if self.buffer.len() < 5 + length {
            return Ok(None);
        }
        if self.buffer[0] != 0 {
            return Err(CallError::Connection(
                "answered with a compressed message".to_owned(),
            ));
        }
        self.buffer.advance(5);
        let message = self.buffer.split_to(length);
        A::decode(message.freeze()).map(Some).map_err(|e| {
            CallError::Connection(format!("answered with a message that does not decode: {e}"))
        })
    }
}

/// `message` as gRPC sends it: uncompressed, its length, its bytes.
pub fn frame<Q: Message>(message: &Q) -> Bytes {
    let length = message.encoded_len();
    let mut framed = BytesMut::with_capacity(5 + length);
    framed.put_u8(0);
    framed.put_u32(u32::try_from(length).unwrap_or(u32::MAX));
    // Encoding into a buffer with room for it cannot fail.
    let _ = message.encode(&mut framed);
    framed.freeze()
}

fn status_of(headers: &http::HeaderMap) -> Option<CallError> {
    let code = headers
        .get("grpc-status")?
        .to_str()
        .ok()?
        .parse::<u32>()
        .ok()?;
    if code == 0 {
        return None;
    }
    let message = headers
        .get("grpc-message")
        .and_then(|m| m.to_str().ok())
        .map(percent_decoded)
        .unwrap_or_default();
    Some(CallError::Status { code, message })
}

/// gRPC percent-encodes its status message.
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                i += 3;
            }
            (byte, _, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn connection(e: h2::Error) -> CallError {
    CallError::Connection(e.to_string())
}

async fn handshake<T>(io: T, server: &str) -> Result<SendRequest<Bytes>, Failure>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (send, connection) = h2::client::Builder::new()
        .initial_window_size(4 << 20)
        .initial_connection_window_size(8 << 20)
        .handshake(io)
        .await
        .map_err(|e| Failure {
            code: Code::StoreConnection,
            text: format!("{server} did not speak HTTP/2 (gRPC): {e}"),
        })?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(send)
}
