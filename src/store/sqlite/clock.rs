//! The file's clock: every process of one machine reads the same monotonic
//! clock, which a wall-clock step (NTP, a VM resumed, an operator's `date`)
//! never moves, so it decides when a lock lapses. It starts again at a
//! reboot, so beside the holds the file keeps which boot they were taken in
//! ([`boot_id`]) and the latest time it was written at (`open` clears the
//! holds of another boot).

/// Milliseconds on the machine's monotonic clock (the one Node's
/// `performance.now()` and timers read), whole, counted from some moment
/// before this boot's first process.
pub(super) fn now_ms() -> i64 {
    monotonic_us() / 1000
}

/// The same clock in whole microseconds: the order waiters arrived in.
pub(super) fn now_us() -> i64 {
    monotonic_us()
}

#[cfg(unix)]
fn monotonic_us() -> i64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec for the call's duration;
    // CLOCK_MONOTONIC exists on every unix this crate builds for, so the call
    // cannot fail (and on failure `now` stays 0, which only makes the clock
    // look young).
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    // `time_t` and `c_long` are 32 bits on some targets (armv7).
    #[allow(clippy::useless_conversion)]
    let us = i64::from(now.tv_sec) * 1_000_000 + i64::from(now.tv_nsec) / 1_000;
    us
}

#[cfg(windows)]
fn monotonic_us() -> i64 {
    #[link(name = "kernel32")]
    extern "system" {
        fn QueryUnbiasedInterruptTime(time: *mut u64) -> i32;
    }
    let mut ticks: u64 = 0;
    // SAFETY: `ticks` is a valid, writable u64 for the call's duration; the
    // function only writes it (100 ns units since boot, sleep left out).
    unsafe { QueryUnbiasedInterruptTime(&mut ticks) };
    i64::try_from(ticks / 10).unwrap_or(i64::MAX)
}

/// What names this boot of the machine, where the system says: Linux's
/// `boot_id`, macOS's boot session. Elsewhere `None`, and only the clock
/// running behind the file's latest write tells a reboot.
pub(super) fn boot_id() -> Option<String> {
    let id = system_boot_id()?;
    let id = id.trim();
    (!id.is_empty()).then(|| id.to_owned())
}

#[cfg(target_os = "linux")]
fn system_boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()
}

#[cfg(target_os = "macos")]
fn system_boot_id() -> Option<String> {
    let name = c"kern.bootsessionuuid";
    let mut buffer = [0u8; 64];
    let mut size = buffer.len();
    // SAFETY: the name is a NUL-terminated string; `buffer` and `size`
    // describe writable memory the call fills up to `size` bytes, and no new
    // value is set (null, 0).
    let status = unsafe {
        libc::sysctlbyname(
            name.as_ptr(),
            buffer.as_mut_ptr().cast(),
            &mut size,
            std::ptr::null_mut(),
            0,
        )
    };
    if status != 0 {
        return None;
    }
    let text = buffer.get(..size)?;
    let text = text.split(|&b| b == 0).next()?;
    String::from_utf8(text.to_vec()).ok()
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn system_boot_id() -> Option<String> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_only_goes_forward_and_the_boot_has_a_name() {
        let a = now_ms();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let b = now_ms();
        assert!(b >= a + 5, "{a} then {b}");
        #[cfg(target_os = "linux")]
        assert_eq!(boot_id().map(|id| id.len()), Some(36));
    }
}
