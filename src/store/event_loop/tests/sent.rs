//! Telling that what was submitted is written (`Local::sent`), before its
//! answer: once the bytes are in the socket, not when the server answers;
//! not while they wait for room or for a connection; and at once when the
//! connection could not be opened (the answer then says why).

use std::cell::Cell;
use std::rc::Rc;
use std::sync::{mpsc, Mutex};
use std::thread;
use std::time::Duration;

use super::{read_line, send, server, World};
use crate::store::Op;

/// Start `op`; the returned flag turns true once it settles (Ok).
fn started(op: Op<()>) -> Rc<Cell<bool>> {
    let told = Rc::new(Cell::new(false));
    match op {
        Op::Local(op) => {
            let into = Rc::clone(&told);
            op.start(Box::new(move |outcome| {
                assert!(outcome.is_ok(), "sent settles without an error");
                into.set(true);
            }));
        }
        Op::Ready(outcome) => panic!("settled at once ({outcome:?}): something was unsent"),
        Op::Pending(_) => panic!("settled on Tokio: the event loop says when it wrote"),
    }
    told
}

#[test]
fn told_once_written_before_the_answer_comes() {
    let (got, got_rx) = mpsc::channel();
    let (answer, answer_rx) = mpsc::channel::<()>();
    let (got, answer_rx) = (Mutex::new(got), Mutex::new(answer_rx));
    let (port, _) = server(move |_, mut stream, reader| {
        while let Some(line) = read_line(reader) {
            let _ = got.lock().map(|got| got.send(line.clone()));
            // Answered only when the test says so.
            let _ = answer_rx.lock().map(|answer| answer.recv());
            send(&mut stream, format!("re:{line}\n").as_bytes());
        }
    });
    let world = World::new(port, 5_000);
    let local = world.direct().local().expect("the loop's own thread");
    assert!(
        matches!(local.sent("k"), Op::Ready(Ok(()))),
        "nothing submitted: settled at once"
    );
    world.submit("release");
    let told = started(local.sent("k"));
    world
        .harness
        .lp
        .run_until("told it was written", || told.get());
    assert_eq!(
        got_rx.recv_timeout(Duration::from_secs(5)).ok().as_deref(),
        Some("release"),
        "the server has it"
    );
    assert!(world.answers.borrow().is_empty(), "told before the answer");
    assert!(
        matches!(local.sent("k"), Op::Ready(Ok(()))),
        "nothing left unsent"
    );
    let _ = answer.send(());
    assert_eq!(world.outcomes(1), [Ok("re:release".to_owned())]);
}

#[test]
fn not_told_while_the_bytes_wait_for_room_in_the_socket() {
    const SIZE: usize = 8 * 1024 * 1024;
    let (port, _) = server(|_, mut stream, reader| {
        // Slow to read: the client's socket fills up first.
        thread::sleep(Duration::from_millis(300));
        let line = read_line(reader).unwrap_or_default();
        send(&mut stream, format!("len:{}\n", line.len()).as_bytes());
    });
    let world = World::new(port, 5_000);
    world.submit(&"x".repeat(SIZE));
    let local = world.direct().local().expect("the loop's own thread");
    let told = started(local.sent("k"));
    let engine = Rc::clone(&local.0.engines[0]);
    world.harness.lp.run_until("some of it written", || {
        engine.conn.borrow().out.len() < SIZE && !engine.conn.borrow().out.is_empty()
    });
    assert!(!told.get(), "told while part of it waits for room");
    world
        .harness
        .lp
        .run_until("told once all of it was written", || told.get());
    assert_eq!(world.outcomes(1), [Ok(format!("len:{SIZE}"))]);
}

#[test]
fn told_when_the_connection_cannot_be_opened_and_the_answer_says_why() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        listener.local_addr().expect("its address").port()
    };
    let world = World::new(port, 2_000);
    world.submit("release");
    let local = world.direct().local().expect("the loop's own thread");
    let told = started(local.sent("k"));
    world
        .harness
        .lp
        .run_until("told: it will never be written", || told.get());
    let outcomes = world.outcomes(1);
    assert!(
        matches!(&outcomes[0], Err((code, _)) if code == "ERR_LOCK_STORE_CONNECTION"),
        "{outcomes:?}"
    );
}

#[test]
fn what_those_told_submit_next_is_written_and_answered() {
    let (port, accepted) = server(|_, mut stream, reader| {
        while let Some(line) = read_line(reader) {
            send(&mut stream, format!("re:{line}\n").as_bytes());
        }
    });
    let world = World::new(port, 5_000);
    world.submit("release");
    let local = world.direct().local().expect("the loop's own thread");
    let (next, answers) = (local.clone(), Rc::clone(&world.answers));
    let Op::Local(op) = local.sent("k") else {
        panic!("something was unsent");
    };
    // As a run() loop does: its next acquire, made once the release is written.
    op.start(Box::new(move |_| {
        next.submit(
            "acquire".to_owned(),
            Box::new(move |outcome| answers.borrow_mut().push(outcome)),
        );
    }));
    assert_eq!(
        world.outcomes(2),
        [Ok("re:release".to_owned()), Ok("re:acquire".to_owned())]
    );
    assert_eq!(accepted.count(), 1);
}
