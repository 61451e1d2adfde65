//! What a connection needs from the runtime whose loop drives it, and no
//! more: the loop, a way into JS for what it delivers, Tokio to open
//! connections on, and word of the environment going away. In the addon
//! that is Node through napi (the napi surface's host); the crate's tests drive a libuv
//! loop of their own through the same seam, without Node.

use std::ffi::CStr;

use super::uv;
pub use crate::store::Task;

/// Makes the host of each connection a store drives on an event loop:
/// called on the thread making the store, once per connection, with the
/// async resource name its callbacks into JS run under. A store given one
/// puts its connections on that loop; a store given none stays on Tokio.
pub type MakeHost<'a> = &'a dyn Fn(&'static CStr) -> Result<Box<dyn Host>, String>;

/// The runtime one connection lives in, used only on its loop's thread.
pub trait Host {
    /// The live loop the connection is driven by, on this thread.
    fn event_loop(&self) -> *mut uv::Loop;

    /// Run `deliver` as a callback from the loop into JS (in a handle scope
    /// and a callback scope, whose closing runs the promise continuations).
    /// Called only from the loop's own callbacks, outside any other scope.
    fn in_callback_scope(&self, deliver: &mut dyn FnMut());

    /// Run `task` on Tokio.
    fn spawn(&self, task: Task);

    /// Call `on_exit` if the environment goes away (a worker thread ending)
    /// while the connection is open; it closes every handle, after which
    /// [`Host::release`] follows.
    fn on_exit(&self, on_exit: Box<dyn FnOnce()>);

    /// Every handle of the connection is closed: undo what was set up for it.
    fn release(&self);
}
