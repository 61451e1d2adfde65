//! The line a plain lock's waiters wait in on one server, against a real
//! `redis-server`: two stores stand for two processes (each has an id of
//! its own), on the event loop and on Tokio, with the same hand-overs.

use super::tests::Server;
use super::*;
use crate::store::event_loop::tests::Harness;
use crate::store::line::contract::{
    leaving_keeps_a_lock_handed_over, more_waiting_keep_their_place,
    the_line_hands_the_lock_over_in_order,
};

#[test]
fn on_the_event_loop_the_line_hands_the_lock_over_in_order() {
    let (server, harness) = (Server::start(), Harness::new());
    let make = |told: OnReleased| {
        RedisStore::new(server.options(), Some(told), Some(&harness.make_host())).expect("a store")
    };
    the_line_hands_the_lock_over_in_order(&harness, &make);
}

#[test]
fn on_tokio_the_line_hands_the_lock_over_the_same() {
    let (server, harness) = (Server::start(), Harness::new());
    let make =
        |told: OnReleased| RedisStore::new(server.options(), Some(told), None).expect("a store");
    the_line_hands_the_lock_over_in_order(&harness, &make);
}

#[test]
fn an_attempt_with_more_waiting_keeps_their_place_however_it_gets_in() {
    let (server, harness) = (Server::start(), Harness::new());
    let make = |told: OnReleased| {
        RedisStore::new(server.options(), Some(told), Some(&harness.make_host())).expect("a store")
    };
    more_waiting_keep_their_place(&harness, &make);
}

#[test]
fn a_lock_handed_to_a_place_left_stays_its_process_s() {
    let (server, harness) = (Server::start(), Harness::new());
    let make = |told: OnReleased| {
        RedisStore::new(server.options(), Some(told), Some(&harness.make_host())).expect("a store")
    };
    leaving_keeps_a_lock_handed_over(&harness, &make);
}
