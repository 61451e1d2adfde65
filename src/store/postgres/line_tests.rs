//! The line a plain lock's waiters wait in on PostgreSQL, against a cluster
//! of the test's own: the same hand-overs as every store that keeps a line
//! (`store::line::contract`), on the event loop and on Tokio.

use super::tests::{options, World};
use super::*;
use crate::store::line::contract::{
    leaving_keeps_a_lock_handed_over, more_waiting_keep_their_place,
    the_line_hands_the_lock_over_in_order,
};

fn store(world: &World, told: OnReleased, on_loop: bool) -> PostgresStore {
    let make_host = world.harness.make_host();
    let options = options(world.cluster.url());
    let host = on_loop.then_some(&make_host as MakeHost<'_>);
    PostgresStore::new(options, None, Some(told), None, host).expect("a store")
}

#[test]
fn on_the_event_loop_the_line_hands_the_lock_over_in_order() {
    let world = World::new();
    let make = |told: OnReleased| store(&world, told, true);
    the_line_hands_the_lock_over_in_order(&world.harness, &make);
}

#[test]
fn an_attempt_with_more_waiting_keeps_their_place_however_it_gets_in() {
    let world = World::new();
    let make = |told: OnReleased| store(&world, told, true);
    more_waiting_keep_their_place(&world.harness, &make);
}

#[test]
fn on_tokio_the_line_hands_the_lock_over_the_same() {
    let world = World::new();
    let make = |told: OnReleased| store(&world, told, false);
    the_line_hands_the_lock_over_in_order(&world.harness, &make);
}

#[test]
fn a_lock_handed_to_a_place_left_stays_its_process_s() {
    let world = World::new();
    let make = |told: OnReleased| store(&world, told, true);
    leaving_keeps_a_lock_handed_over(&world.harness, &make);
}
