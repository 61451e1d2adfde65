//! The in-memory store's clock: the monotonic one, counted in whole
//! milliseconds as the other stores count them.

use std::time::{Duration, Instant};

/// Fallback when `now + ttl` does not fit an `Instant` (far beyond any TTL
/// the API accepts, which stops at 2^53 - 1 ms): about 34 years.
const FAR_TTL: Duration = Duration::from_secs(1 << 30);

/// TTLs count in whole milliseconds, a fraction rounding up, so even the
/// smallest positive TTL holds the lock for a moment rather than none.
pub(super) fn expiry(now: Instant, ttl_ms: f64) -> Instant {
    Duration::try_from_secs_f64(ttl_ms.ceil() / 1000.0)
        .ok()
        .and_then(|ttl| now.checked_add(ttl))
        .unwrap_or(now + FAR_TTL)
}

/// Milliseconds left, rounded up so a live entry never reports 0.
pub(super) fn ms_until(at: Instant, now: Instant) -> f64 {
    let left = at.duration_since(now);
    let whole = left.as_millis();
    let ms = if left > Duration::from_millis(whole as u64) {
        whole + 1
    } else {
        whole
    };
    ms as f64
}
