//! The [`Host`] of the addon's event-loop connections: Node, through napi.
//! Its symbols come from the `node` binary when Node loads the addon, so the
//! crate's tests, which run without Node, do not build this module.

use std::cell::Cell;
use std::ffi::c_void;
use std::ptr;

use napi::sys;

use crate::store::event_loop::host::{Host, Task};
use crate::store::event_loop::uv;

/// One connection's hold on its Node environment.
pub struct NapiHost {
    env: sys::napi_env,
    loop_: *mut uv::Loop,
    /// The async resource its callbacks into JS run under.
    async_context: sys::napi_async_context,
    /// The environment's cleanup hook, if added; removed in `release`.
    cleanup: Cell<sys::napi_async_cleanup_hook_handle>,
    /// What the hook runs, owned here (leaked to the hook as its data) until
    /// `release` removes the hook and frees it.
    exit: Cell<*mut OnExit>,
}

/// What the environment's cleanup hook calls, once.
struct OnExit(Cell<Option<Box<dyn FnOnce()>>>);

fn ok(status: sys::napi_status) -> bool {
    status == sys::Status::napi_ok
}

impl NapiHost {
    /// The host of a connection on the loop of `env`, whose async resource
    /// is named `resource`.
    ///
    /// # Safety
    /// Called on the JS thread of `env`, from a napi call.
    unsafe fn new(env: sys::napi_env, resource: &std::ffi::CStr) -> Result<NapiHost, String> {
        // libuv's functions, found before the loop is first used (a no-op
        // where the linker found them).
        uv::load()?;
        let mut loop_ = ptr::null_mut();
        // SAFETY: on the JS thread of `env`, as the caller promises.
        let status = unsafe { sys::napi_get_uv_event_loop(env, &mut loop_) };
        if !ok(status) || loop_.is_null() {
            return Err("no event loop to drive the connection on".to_owned());
        }
        let (mut name, mut async_context) = (ptr::null_mut(), ptr::null_mut());
        // SAFETY: as above; `resource` is NUL-terminated UTF-8.
        let made = unsafe {
            ok(sys::napi_create_string_utf8(
                env,
                resource.as_ptr(),
                -1,
                &mut name,
            )) && ok(sys::napi_async_init(
                env,
                ptr::null_mut(),
                name,
                &mut async_context,
            ))
        };
        if !made {
            return Err("could not make the connection's async resource".to_owned());
        }
        Ok(NapiHost {
            env,
            loop_: loop_.cast(),
            async_context,
            cleanup: Cell::new(ptr::null_mut()),
            exit: Cell::new(ptr::null_mut()),
        })
    }
}

/// The environment is going away (a worker thread ending, the process
/// exiting): the connection closes every handle; the hook is removed once
/// the last is closed ([`Host::release`]).
unsafe extern "C" fn on_env_exit(_hook: sys::napi_async_cleanup_hook_handle, data: *mut c_void) {
    // SAFETY: `data` is the `OnExit` the hook was added with; it is freed
    // only after the hook is removed, so it is alive.
    let on_exit = unsafe { &*data.cast::<OnExit>() };
    if let Some(on_exit) = on_exit.0.take() {
        on_exit();
    }
}

impl Host for NapiHost {
    fn event_loop(&self) -> *mut uv::Loop {
        self.loop_
    }

    fn in_callback_scope(&self, deliver: &mut dyn FnMut()) {
        let env = self.env;
        let mut handles = ptr::null_mut();
        // SAFETY: called from this env's loop callbacks, on its thread,
        // outside any other scope of ours; closed below.
        if !ok(unsafe { sys::napi_open_handle_scope(env, &mut handles) }) {
            // No scope to make JS values in: the environment is being torn
            // down, and nothing delivered could reach JS.
            return;
        }
        let (mut resource, mut scope) = (ptr::null_mut(), ptr::null_mut());
        // SAFETY: as above, inside the handle scope just opened.
        let scoped = unsafe {
            ok(sys::napi_create_object(env, &mut resource))
                && ok(sys::napi_open_callback_scope(
                    env,
                    resource,
                    self.async_context,
                    &mut scope,
                ))
        };
        // Without a callback scope the outcomes still settle their promises;
        // the continuations run at the next microtask checkpoint instead.
        deliver();
        if scoped {
            // SAFETY: the callback scope opened above, closed once.
            let closed = unsafe { sys::napi_close_callback_scope(env, scope) };
            debug_assert!(ok(closed), "napi_close_callback_scope failed");
        }
        // SAFETY: the handle scope opened above, closed once, innermost now.
        let closed = unsafe { sys::napi_close_handle_scope(env, handles) };
        debug_assert!(ok(closed), "napi_close_handle_scope failed");
    }

    fn spawn(&self, task: Task) {
        drop(napi::bindgen_prelude::spawn(task));
    }

    fn on_exit(&self, on_exit: Box<dyn FnOnce()>) {
        let data = Box::into_raw(Box::new(OnExit(Cell::new(Some(on_exit)))));
        let mut cleanup = ptr::null_mut();
        // SAFETY: on the JS thread of `env`; `data` stays valid until the hook
        // is removed (`release`).
        let status = unsafe {
            sys::napi_add_async_cleanup_hook(self.env, Some(on_env_exit), data.cast(), &mut cleanup)
        };
        if ok(status) {
            self.cleanup.set(cleanup);
        }
        // Without the hook the connection still closes with the store; a
        // worker ending first would find its handles open, as Node reports.
        self.exit.set(data);
    }

    fn release(&self) {
        let cleanup = self.cleanup.replace(ptr::null_mut());
        if !cleanup.is_null() {
            // SAFETY: the hook this host added, removed once.
            let removed = unsafe { sys::napi_remove_async_cleanup_hook(cleanup) };
            debug_assert!(ok(removed), "napi_remove_async_cleanup_hook failed");
        }
        let exit = self.exit.replace(ptr::null_mut());
        if !exit.is_null() {
            // SAFETY: the box `on_exit` leaked, no longer reachable by the hook.
            drop(unsafe { Box::from_raw(exit) });
        }
        // SAFETY: on the JS thread of the env the context was made in, once.
        let destroyed = unsafe { sys::napi_async_destroy(self.env, self.async_context) };
        debug_assert!(ok(destroyed), "napi_async_destroy failed");
    }
}

/// The hosts of connections on `env`'s loop ([`MakeHost`](crate::store::event_loop::host::MakeHost)).
/// An `Env` is only ever lent to a napi call, on its JS thread, which is
/// where a store is made and these hosts with it.
pub fn node_hosts(
    env: &napi::Env,
) -> impl Fn(&'static std::ffi::CStr) -> Result<Box<dyn Host>, String> + '_ {
    move |resource| {
        // SAFETY: on the JS thread of `env`, inside the napi call it was lent to.
        let host = unsafe { NapiHost::new(env.raw(), resource) }?;
        Ok(Box::new(host) as Box<dyn Host>)
    }
}
