//! The event-loop connection, run without Node on the test's own loop
//! ([`harness`]): a protocol of lines ([`Lines`]) spoken to a
//! `std::net::TcpListener` in the test that plays the server, with replies
//! split, delayed, cut off or never sent as each test needs.

mod connection;
mod harness;
mod sent;

pub use self::harness::Harness;

use std::cell::RefCell;
use std::ffi::CStr;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::rc::Rc;
use std::sync::Arc;
use std::thread;

use bytes::BytesMut;

use super::{connect_tcp, Direct, Endpoint, Failure, Named, Opened, Opening, Verdict, Wire};
use crate::store::Code;
use crate::store::StoreError;

/// A protocol of lines: a request is a line, its answer the next line back.
/// A line starting with `!` is not this protocol (the connection is given
/// up); the answer `again` asks for the request again on the same connection.
/// A request starting with [`REFUSED`] is not sent (as one longer than a
/// server reads).
pub struct Lines;

/// How a request [`Lines`] will not send starts.
pub const REFUSED: &str = "refused:";

pub struct Target {
    port: u16,
    display: String,
}

impl Named for String {
    fn name(&self) -> &'static str {
        "op"
    }
}

impl Wire for Lines {
    type Target = Target;
    type Request = String;
    type Answer = String;
    type Session = ();
    type Prepared = ();

    const STORE: &'static str = "TestStore";
    const CODE: Code = Code::StoreRedis;
    const RESOURCE: &'static CStr = c"TestStore";
    const RESENDS: u32 = 1;

    fn encode(_session: &mut (), request: &String, out: &mut Vec<u8>) -> Result<(), Failure> {
        if request.starts_with(REFUSED) {
            return Err(Failure {
                code: crate::store::Code::StoreConnection,
                text: "too long".to_owned(),
            });
        }
        out.extend_from_slice(request.as_bytes());
        out.push(b'\n');
        Ok(())
    }

    fn decode(_session: &mut (), inbound: &mut BytesMut) -> Result<Option<String>, String> {
        let Some(end) = inbound.iter().position(|&b| b == b'\n') else {
            return Ok(None);
        };
        let line = inbound.split_to(end + 1);
        let line = String::from_utf8_lossy(&line[..end]).into_owned();
        match line.strip_prefix('!') {
            Some(what) => Err(format!("it sent {what:?}")),
            None => Ok(Some(line)),
        }
    }

    fn verdict(_session: &mut (), _request: &String, answer: &String) -> Verdict {
        if answer == "again" {
            Verdict::SendAgain
        } else {
            Verdict::Deliver
        }
    }

    fn open(target: Arc<Target>) -> Opening<()> {
        Box::pin(async move {
            let tcp = connect_tcp("127.0.0.1", target.port, &target.display).await?;
            let tcp = tcp.into_std().map_err(|e| Failure {
                code: crate::store::Code::StoreConnection,
                text: e.to_string(),
            })?;
            Ok(Opened {
                stream: tcp.into(),
                tls: None,
                server_process: None,
                prepared: (),
            })
        })
    }
}

/// The error code and message of an outcome, or its answer.
pub fn outcome(result: &Result<String, StoreError>) -> Result<String, (String, String)> {
    match result {
        Ok(answer) => Ok(answer.clone()),
        Err(StoreError::Backend(e)) => Err((e.code.as_str().to_owned(), e.message.clone())),
        Err(StoreError::Type(text)) => Err(("TypeError".to_owned(), text.clone())),
    }
}

/// A test's world: a loop, Tokio, a server on a free port, and the store's
/// side of one connection to it.
pub struct World {
    pub direct: Option<Direct<Lines>>,
    pub answers: Rc<RefCell<Vec<Result<String, StoreError>>>>,
    pub harness: Harness,
}

impl World {
    /// Connections to `port` with commands timing out after `timeout_ms`.
    pub fn new(port: u16, timeout_ms: u64) -> World {
        let harness = Harness::new();
        let direct = Direct::<Lines>::new(
            &harness.make_host(),
            Target {
                port,
                display: format!("the test server on port {port}"),
            },
            Endpoint {
                display: format!("the test server on port {port}"),
                connect_timeout_ms: 1_000,
                command_timeout_ms: timeout_ms,
            },
            1,
        )
        .expect("the connection's handles");
        World {
            direct: Some(direct),
            answers: Rc::default(),
            harness,
        }
    }

    pub fn direct(&self) -> &Direct<Lines> {
        self.direct.as_ref().expect("the store's side, not dropped")
    }

    /// Send `request`; its outcome lands in `answers`.
    pub fn submit(&self, request: &str) {
        let answers = Rc::clone(&self.answers);
        let local = self.direct().local().expect("the loop's own thread");
        local.submit(
            request.to_owned(),
            Box::new(move |outcome| answers.borrow_mut().push(outcome)),
        );
    }

    /// Run the loop until `count` outcomes are in; they are returned.
    pub fn outcomes(&self, count: usize) -> Vec<Result<String, (String, String)>> {
        self.harness.lp.run_until(&format!("{count} outcomes"), || {
            self.answers.borrow().len() >= count
        });
        self.answers.borrow().iter().map(outcome).collect()
    }

    /// Submit `request` and run the loop until its outcome is in.
    pub fn ask(&self, request: &str) -> Result<String, (String, String)> {
        let before = self.answers.borrow().len();
        self.submit(request);
        self.outcomes(before + 1).swap_remove(before)
    }
}

/// A server on a free port of 127.0.0.1 whose connections are each served
/// by `serve` (given its number, in the order they came, the connection, and
/// a reader of it) on a thread of their own. Returns the port and how many
/// connections came.
pub fn server(
    serve: impl Fn(usize, TcpStream, &mut BufReader<TcpStream>) + Send + Sync + 'static,
) -> (u16, Accepted) {
    let serve = Arc::new(serve);
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    let port = listener.local_addr().expect("its address").port();
    let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    thread::spawn(move || {
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(stream) = stream else { return };
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let serve = Arc::clone(&serve);
            thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().expect("a second handle"));
                serve(n, stream, &mut reader);
            });
        }
    });
    (port, Accepted(accepted))
}

/// How many connections a test server accepted.
pub struct Accepted(Arc<std::sync::atomic::AtomicUsize>);

impl Accepted {
    pub fn count(&self) -> usize {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// The code and message a request failed with; a test fails on an answer.
pub fn failure(outcome: &Result<String, (String, String)>) -> (&str, &str) {
    match outcome {
        Err((code, message)) => (code, message),
        Ok(answer) => panic!("answered {answer:?}, where a failure was due"),
    }
}

/// The next request line a server connection got (without its newline).
pub fn read_line(reader: &mut BufReader<TcpStream>) -> Option<String> {
    let mut line = String::new();
    match reader.read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim_end_matches('\n').to_owned()),
    }
}

/// Write `bytes` and send them now.
pub fn send(stream: &mut TcpStream, bytes: &[u8]) {
    // The client may have given the connection up already: not the server's concern.
    let _ = stream.write_all(bytes);
    let _ = stream.flush();
}
