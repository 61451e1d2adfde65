//! One connection's life on a real loop and a real socket: opened on first
//! use, answers in order however the bytes arrive, back-pressure, a peer
//! that closes or goes silent, a refused connection, closing and collection.

use std::thread;
use std::time::Duration;

use super::super::conn::State;
use super::super::uv;
use super::{failure, read_line, send, server, World};

fn ok(answer: &str) -> Result<String, (String, String)> {
    Ok(answer.to_owned())
}

/// Answers every request line `x` with `re:x`, until the client closes.
fn echo(reader: &mut std::io::BufReader<std::net::TcpStream>, stream: &mut std::net::TcpStream) {
    while let Some(line) = read_line(reader) {
        send(stream, format!("re:{line}\n").as_bytes());
    }
}

#[test]
fn opens_on_first_use_and_answers_in_order() {
    let (port, accepted) = server(|_, mut stream, reader| echo(reader, &mut stream));
    let world = World::new(port, 2_000);
    world.harness.lp.run_for(20);
    assert_eq!(accepted.count(), 0, "no connection before a command");
    for request in ["a", "b", "c"] {
        world.submit(request);
    }
    assert_eq!(world.outcomes(3), [ok("re:a"), ok("re:b"), ok("re:c")]);
    assert_eq!(world.ask("d"), ok("re:d"));
    assert_eq!(accepted.count(), 1, "one connection for all");
    assert!(
        world.harness.seen.scopes.get() > 0,
        "answers delivered inside a callback scope"
    );
}

#[test]
fn a_request_the_server_would_not_read_fails_alone() {
    let (port, accepted) = server(|_, mut stream, reader| echo(reader, &mut stream));
    let world = World::new(port, 2_000);
    let long = format!("{}x", super::REFUSED);
    // Waiting for the connection to open, then on the open connection: the
    // long one fails (at once), the others are answered.
    for request in ["a", &long, "b"] {
        world.submit(request);
    }
    world.outcomes(3);
    for request in [long.as_str(), "c"] {
        world.submit(request);
    }
    let outcomes = world.outcomes(5);
    let answered: Vec<_> = outcomes.iter().filter_map(|o| o.clone().ok()).collect();
    assert_eq!(answered, ["re:a", "re:b", "re:c"]);
    let refused = outcomes
        .iter()
        .filter(|o| matches!(o, Err((_, message)) if message.contains("too long")));
    assert_eq!(refused.count(), 2, "{outcomes:?}");
    assert_eq!(accepted.count(), 1, "the connection lived on");
}

#[test]
fn replies_split_across_reads_or_joined_in_one_meet_their_requests() {
    let (port, _) = server(|_, mut stream, reader| {
        for _ in 0..3 {
            read_line(reader);
        }
        // Cut mid-answer, and two answers ending in one write.
        for chunk in ["re", ":a", "\nre:b\nre:", "c", "\n"] {
            send(&mut stream, chunk.as_bytes());
            thread::sleep(Duration::from_millis(30));
        }
        echo(reader, &mut stream);
    });
    let world = World::new(port, 2_000);
    for request in ["a", "b", "c"] {
        world.submit(request);
    }
    assert_eq!(world.outcomes(3), [ok("re:a"), ok("re:b"), ok("re:c")]);
}

#[test]
fn a_request_larger_than_the_socket_takes_waits_for_room_to_write() {
    const SIZE: usize = 8 * 1024 * 1024;
    let (port, _) = server(|_, mut stream, reader| {
        // Slow to read: the client's socket fills up first.
        thread::sleep(Duration::from_millis(300));
        let line = read_line(reader).unwrap_or_default();
        send(&mut stream, format!("len:{}\n", line.len()).as_bytes());
        echo(reader, &mut stream);
    });
    let world = World::new(port, 5_000);
    world.submit(&"x".repeat(SIZE));
    let engine = std::rc::Rc::clone(&world.direct().local().expect("local").0.engines[0]);
    world
        .harness
        .lp
        .run_until("the socket full, watched for room", || {
            match &engine.conn.borrow().state {
                State::Open(socket) => socket.watching & uv::WRITABLE != 0,
                _ => false,
            }
        });
    assert!(
        !engine.conn.borrow().out.is_empty(),
        "the rest waits for room"
    );
    assert_eq!(world.outcomes(1), [Ok(format!("len:{SIZE}"))]);
    assert_eq!(world.ask("after"), ok("re:after"));
}

#[test]
fn a_peer_closing_mid_reply_has_the_request_sent_again_on_a_fresh_connection() {
    let (port, accepted) = server(|n, mut stream, reader| {
        if n == 0 {
            read_line(reader);
            send(&mut stream, b"re:");
            return; // closed, half an answer sent
        }
        echo(reader, &mut stream);
    });
    let world = World::new(port, 2_000);
    assert_eq!(world.ask("a"), ok("re:a"));
    assert_eq!(accepted.count(), 2);
}

#[test]
fn a_peer_that_keeps_closing_fails_the_request_once_its_resends_are_spent() {
    let (port, accepted) = server(|_, _stream, reader| {
        read_line(reader);
    });
    let world = World::new(port, 2_000);
    let outcome = world.ask("a");
    let (code, message) = failure(&outcome);
    assert_eq!(code, "ERR_LOCK_STORE_CONNECTION");
    assert!(message.starts_with("TestStore.op: lost the connection to the test server"));
    assert!(message.ends_with("the server closed it"), "{message}");
    assert_eq!(accepted.count(), 2, "sent, then sent once again");
}

#[test]
fn what_is_not_the_protocol_gives_the_connection_up() {
    let (port, accepted) = server(|n, mut stream, reader| {
        if n == 0 {
            read_line(reader);
            send(&mut stream, b"!garbage\n");
            thread::sleep(Duration::from_millis(500));
            return;
        }
        echo(reader, &mut stream);
    });
    let world = World::new(port, 2_000);
    assert_eq!(world.ask("a"), ok("re:a"));
    assert_eq!(accepted.count(), 2);
}

#[test]
fn an_answer_asking_for_the_request_again_sends_it_on_the_same_connection() {
    let (port, accepted) = server(|_, mut stream, reader| {
        read_line(reader);
        send(&mut stream, b"again\n");
        echo(reader, &mut stream);
    });
    let world = World::new(port, 2_000);
    assert_eq!(world.ask("a"), ok("re:a"));
    assert_eq!(accepted.count(), 1);
}

#[test]
fn a_silent_server_times_the_command_out_and_the_next_use_connects_again() {
    let (port, accepted) = server(|n, mut stream, reader| {
        if n == 0 {
            // Reads, never answers, keeps the connection open.
            while read_line(reader).is_some() {}
            return;
        }
        echo(reader, &mut stream);
    });
    let world = World::new(port, 200);
    let outcome = world.ask("a");
    let (code, message) = failure(&outcome);
    assert_eq!(code, "ERR_LOCK_STORE_TIMEOUT");
    assert!(
        message.contains("no answer from the test server"),
        "{message}"
    );
    assert_eq!(world.ask("b"), ok("re:b"));
    assert_eq!(accepted.count(), 2, "the silent one given up");
}

#[test]
fn a_slow_answer_times_out_and_the_answers_after_it_still_meet_their_own() {
    let (port, accepted) = server(|_, mut stream, reader| {
        for _ in 0..2 {
            let line = read_line(reader).unwrap_or_default();
            send(&mut stream, format!("re:{line}\n").as_bytes());
        }
        // Something came back after `a` was sent: slow, not silent.
        read_line(reader);
        thread::sleep(Duration::from_millis(500));
        send(&mut stream, b"re:a\n");
        echo(reader, &mut stream);
    });
    let world = World::new(port, 300);
    world.submit("x");
    assert_eq!(world.outcomes(1), [ok("re:x")], "open");
    world.submit("w");
    world.submit("a");
    let outcomes = world.outcomes(3);
    assert_eq!(outcomes[1], ok("re:w"));
    assert!(matches!(&outcomes[2], Err((code, _)) if code == "ERR_LOCK_STORE_TIMEOUT"));
    world.submit("b");
    assert_eq!(
        world.outcomes(4)[3],
        ok("re:b"),
        "the late answer read and dropped"
    );
    assert_eq!(accepted.count(), 1, "a slow connection is kept");
}

#[test]
fn a_refused_connection_fails_the_requests_waiting_for_it() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        listener.local_addr().expect("its address").port()
    };
    let world = World::new(port, 2_000);
    let outcome = world.ask("a");
    let (code, message) = failure(&outcome);
    assert_eq!(code, "ERR_LOCK_STORE_CONNECTION");
    assert!(
        message.contains("could not connect to the test server"),
        "{message}"
    );
}

#[test]
fn closing_fails_what_waits_and_what_comes_later_and_closes_every_handle() {
    let (port, accepted) = server(|_, _stream, reader| while read_line(reader).is_some() {});
    let world = World::new(port, 5_000);
    world.submit("a");
    world
        .harness
        .lp
        .run_until("the connection", || accepted.count() == 1);
    world.direct().close();
    world.submit("b");
    let outcomes = world.outcomes(2);
    for outcome in &outcomes {
        let (code, message) = failure(outcome);
        assert_eq!(code, "ERR_LOCK_STORE_CLOSED");
        assert_eq!(message, "TestStore.op: the store is closed");
    }
    world.harness.lp.run_until("the handles closed", || {
        world.harness.seen.released.get() == 1
    });
}

#[test]
fn a_collected_store_closes_at_the_end_of_the_turn_inside_a_callback_scope() {
    let (port, accepted) = server(|_, _stream, reader| while read_line(reader).is_some() {});
    let mut world = World::new(port, 5_000);
    world.submit("a");
    world
        .harness
        .lp
        .run_until("the connection", || accepted.count() == 1);
    let scopes = world.harness.seen.scopes.get();
    world.direct = None;
    assert!(
        world.answers.borrow().is_empty(),
        "not failed while being dropped"
    );
    let outcomes = world.outcomes(1);
    assert!(matches!(&outcomes[0], Err((code, _)) if code == "ERR_LOCK_STORE_CLOSED"));
    assert_eq!(world.harness.seen.scopes.get(), scopes + 1);
    world.harness.lp.run_until("the handles closed", || {
        world.harness.seen.released.get() == 1
    });
}
