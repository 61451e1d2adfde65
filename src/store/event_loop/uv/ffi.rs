//! Node's libuv, linked from the `node` binary at load time; in the crate's
//! tests, the system's libuv.

use std::ffi::{c_char, c_int, c_void};

use super::Loop;

pub type Cb = unsafe extern "C" fn(*mut c_void);
pub type PollCb = unsafe extern "C" fn(*mut c_void, c_int, c_int);
pub type CloseCb = unsafe extern "C" fn(*mut c_void);

#[cfg_attr(test, link(name = "uv"))]
extern "C" {
    pub fn uv_handle_size(kind: c_int) -> usize;
    pub fn uv_handle_set_data(handle: *mut c_void, data: *mut c_void);
    pub fn uv_handle_get_data(handle: *const c_void) -> *mut c_void;
    pub fn uv_close(handle: *mut c_void, cb: Option<CloseCb>);
    pub fn uv_ref(handle: *mut c_void);
    pub fn uv_unref(handle: *mut c_void);
    pub fn uv_now(loop_: *const Loop) -> u64;
    pub fn uv_update_time(loop_: *mut Loop);
    pub fn uv_err_name(err: c_int) -> *const c_char;

    pub fn uv_poll_init_socket(loop_: *mut Loop, handle: *mut c_void, socket: c_int) -> c_int;
    pub fn uv_poll_start(handle: *mut c_void, events: c_int, cb: PollCb) -> c_int;

    pub fn uv_timer_init(loop_: *mut Loop, handle: *mut c_void) -> c_int;
    pub fn uv_timer_start(handle: *mut c_void, cb: Cb, timeout: u64, repeat: u64) -> c_int;
    pub fn uv_timer_stop(handle: *mut c_void) -> c_int;

    pub fn uv_check_init(loop_: *mut Loop, handle: *mut c_void) -> c_int;
    pub fn uv_check_start(handle: *mut c_void, cb: Cb) -> c_int;
    pub fn uv_check_stop(handle: *mut c_void) -> c_int;

    pub fn uv_idle_init(loop_: *mut Loop, handle: *mut c_void) -> c_int;
    pub fn uv_idle_start(handle: *mut c_void, cb: Cb) -> c_int;
    pub fn uv_idle_stop(handle: *mut c_void) -> c_int;

    pub fn uv_async_init(loop_: *mut Loop, handle: *mut c_void, cb: Cb) -> c_int;
    pub fn uv_async_send(handle: *mut c_void) -> c_int;
}
