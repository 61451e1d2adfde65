//! Node's libuv: on unix linked from the `node` binary at load time, on
//! Windows (where a DLL cannot leave a symbol to be found at load time)
//! looked up by name in the Node process, once, before the first loop is
//! used; in the crate's tests, the system's libuv.

use std::ffi::{c_char, c_int, c_void};

/// `uv_loop_t`, opaque: only ever behind a pointer libuv (or Node) gave.
#[repr(C)]
pub struct Loop {
    _opaque: [u8; 0],
    /// Neither `Send`, `Sync` nor `Unpin`: a loop belongs to its thread.
    _thread_bound: std::marker::PhantomData<(*mut u8, std::marker::PhantomPinned)>,
}

pub type Cb = unsafe extern "C" fn(*mut c_void);
pub type PollCb = unsafe extern "C" fn(*mut c_void, c_int, c_int);
pub type CloseCb = unsafe extern "C" fn(*mut c_void);

/// `uv_os_sock_t`: a file descriptor on unix.
#[cfg(unix)]
pub type OsSock = c_int;
/// `uv_os_sock_t`: a `SOCKET` (pointer-sized) on Windows.
#[cfg(windows)]
pub type OsSock = usize;

/// The functions below: declared for the linker, or (Windows, outside the
/// tests) as `unsafe fn`s of the same signature that call what [`load`]
/// found.
macro_rules! libuv {
    ($(pub fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?;)*) => {
        #[cfg(any(not(windows), test))]
        #[cfg_attr(test, link(name = "uv"))]
        extern "C" {
            $(pub fn $name($($arg: $ty),*) $(-> $ret)?;)*
        }

        /// Whether libuv's functions can be called: always, where the
        /// linker found them.
        #[cfg(any(not(windows), test))]
        pub fn load() -> Result<(), String> {
            Ok(())
        }

        #[cfg(all(windows, not(test)))]
        pub use self::by_name::load;
        #[cfg(all(windows, not(test)))]
        pub use self::by_name::{$($name),*};

        #[cfg(all(windows, not(test)))]
        mod by_name {
            use std::sync::OnceLock;

            use super::*;

            struct Table {
                $($name: unsafe extern "C" fn($($ty),*) $(-> $ret)?,)*
            }

            static TABLE: OnceLock<Result<Table, String>> = OnceLock::new();

            /// Find libuv's functions in the Node process (once), or say
            /// why not. Called before a loop is first used; every function
            /// below may be called only after it succeeded.
            pub fn load() -> Result<(), String> {
                match TABLE.get_or_init(find) {
                    Ok(_) => Ok(()),
                    Err(why) => Err(why.clone()),
                }
            }

            fn find() -> Result<Table, String> {
                let module = windows::node_module(c"uv_poll_init_socket")
                    .ok_or("libuv's functions were not found in this process (is it Node?)")?;
                Ok(Table {
                    $($name: {
                        let name = concat!(stringify!($name), "\0").as_ptr().cast();
                        // SAFETY: a module of this process, kept loaded while
                        // it runs (the executable, or Node's DLL); a
                        // NUL-terminated name.
                        let found = unsafe { windows::GetProcAddress(module, name) };
                        if found.is_null() {
                            return Err(format!(
                                "libuv's {} was not found in this process",
                                stringify!($name)
                            ));
                        }
                        // SAFETY: libuv's function of that name, whose C
                        // signature the declaration repeats; a code pointer
                        // is the size of a data pointer on Windows.
                        unsafe {
                            std::mem::transmute::<
                                *mut c_void,
                                unsafe extern "C" fn($($ty),*) $(-> $ret)?,
                            >(found)
                        }
                    },)*
                })
            }

            fn table() -> &'static Table {
                match TABLE.get() {
                    Some(Ok(table)) => table,
                    // A handle exists only on a loop a host gave, and a host
                    // is made only once `load` succeeded.
                    _ => unreachable!("libuv called before its functions were found"),
                }
            }

            $(
                /// # Safety
                /// As libuv's function of the same name.
                pub unsafe fn $name($($arg: $ty),*) $(-> $ret)? {
                    // SAFETY: as the caller promises.
                    unsafe { (table().$name)($($arg),*) }
                }
            )*
        }
    };
}

libuv! {
    pub fn uv_handle_size(kind: c_int) -> usize;
    pub fn uv_handle_set_data(handle: *mut c_void, data: *mut c_void);
    pub fn uv_handle_get_data(handle: *const c_void) -> *mut c_void;
    pub fn uv_close(handle: *mut c_void, cb: Option<CloseCb>);
    pub fn uv_ref(handle: *mut c_void);
    pub fn uv_unref(handle: *mut c_void);
    pub fn uv_now(loop_: *const Loop) -> u64;
    pub fn uv_update_time(loop_: *mut Loop);
    pub fn uv_err_name(err: c_int) -> *const c_char;

    pub fn uv_poll_init_socket(loop_: *mut Loop, handle: *mut c_void, socket: OsSock) -> c_int;
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

/// The few Win32 functions that find a symbol in a module of the process.
#[cfg(all(windows, not(test)))]
mod windows {
    use std::ffi::{c_char, c_void, CStr};

    #[link(name = "kernel32")]
    extern "system" {
        fn GetModuleHandleA(name: *const c_char) -> *mut c_void;
        pub fn GetProcAddress(module: *mut c_void, name: *const c_char) -> *mut c_void;
    }

    /// The module of this process that exports `symbol`: the executable
    /// (`node.exe`, Electron's), or Node's DLL where Node is embedded as
    /// one. Only modules already loaded are looked at; none is loaded here.
    pub fn node_module(symbol: &CStr) -> Option<*mut c_void> {
        [None, Some(c"libnode.dll"), Some(c"node.dll")]
            .into_iter()
            .find_map(|name| {
                let name = name.map_or(std::ptr::null(), CStr::as_ptr);
                // SAFETY: null (the executable) or a NUL-terminated name; the
                // handle is not counted, and the module stays loaded while
                // the process runs (it is what loaded this addon).
                let module = unsafe { GetModuleHandleA(name) };
                // SAFETY: a loaded module, a NUL-terminated name.
                let exports = !module.is_null()
                    && !unsafe { GetProcAddress(module, symbol.as_ptr()) }.is_null();
                exports.then_some(module)
            })
    }
}
