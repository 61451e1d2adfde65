//! When a store on a server sweeps its expired rows away: at most once per
//! interval, and only as it acquires (a store nobody uses costs its server
//! nothing). Expired rows never decide anything (every statement reads the
//! server's clock); a sweep only keeps tables small.

use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct Sweeps {
    interval: Duration,
    /// When the last sweep started (None: not yet).
    last: Mutex<Option<Instant>>,
}

impl Sweeps {
    /// At most one sweep per `interval`, the first one due at once.
    pub fn every(interval: Duration) -> Sweeps {
        Sweeps {
            interval,
            last: Mutex::new(None),
        }
    }

    /// Whether a sweep is due (none started within the interval); if so, it
    /// counts as started now.
    pub fn due(&self) -> bool {
        let Ok(mut last) = self.last.lock() else {
            return false;
        };
        if last.is_some_and(|at| at.elapsed() < self.interval) {
            return false;
        }
        *last = Some(Instant::now());
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sweep_per_interval_the_first_at_once() {
        let sweeps = Sweeps::every(Duration::from_millis(50));
        assert!(sweeps.due());
        assert!(!sweeps.due(), "just started");
        std::thread::sleep(Duration::from_millis(60));
        assert!(sweeps.due());
        assert!(Sweeps::every(Duration::ZERO).due() && Sweeps::every(Duration::ZERO).due());
    }
}
