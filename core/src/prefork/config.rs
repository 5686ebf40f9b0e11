//! Pool settings, named and defaulted as spamd's options.

use core::fmt;

/// Apache's cap on children spawned in one maintenance tick (`MAX_SPAWN_RATE`).
pub const SPAWN_RATE_MAX: usize = 32;

/// Default `busy_grace_ms`: far above a typical scan (a few ms), far below a client's
/// patience.
pub const BUSY_GRACE_MS: u64 = 100;

/// How the pool scales, with spamd's option names and defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Config {
    /// `--max-children`: never more child processes than this, retiring ones included.
    pub max_children: usize,
    /// `--min-children`: keep at least this many children that take work.
    pub min_children: usize,
    /// `--min-spare`: fewer idle children than this and the pool grows.
    pub min_spare: usize,
    /// `--max-spare`: more idle children than this and the pool shrinks.
    pub max_spare: usize,
    /// `--max-conn-per-child`: a child that has taken this many connections is
    /// retired and replaced (spamd's default; siftd's daemon sets `u32::MAX` unless
    /// told, since its children hold their memory bounded and warm caches are worth keeping).
    pub max_conn_per_child: u32,
    /// `--timeout-child`, seconds: a child busy (or starting, or retiring) longer is
    /// killed. 0 disables.
    pub timeout_child_secs: u32,
    /// Most children spawned in one tick; the rate doubles up to this (Apache: 32).
    pub spawn_rate_max: usize,
    /// The maintenance period, ms: at most one grow or shrink step per period.
    pub tick_ms: u64,
    /// `--round-robin`: every child accepts on its own (the comparison mode); the
    /// policy gives no accept orders and only scales.
    pub round_robin: bool,
    /// `--max-busy`: most children serving at once that took their connection less
    /// than `busy_grace_ms` ago; further connections wait for one to finish. A scan
    /// is CPU work: more at once than CPUs only time-slices them, which costs
    /// throughput, tail latency and the caches of every extra child put to work.
    /// 0: no cap (spamd's behaviour).
    pub max_busy: usize,
    /// A child serving one connection longer than this (ms) stops counting toward
    /// `max_busy`: a slow client holds its own child, not the pool.
    pub busy_grace_ms: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_children: 5,
            min_children: 1,
            min_spare: 1,
            max_spare: 2,
            max_conn_per_child: 200,
            timeout_child_secs: 300,
            spawn_rate_max: SPAWN_RATE_MAX,
            tick_ms: 1000,
            round_robin: false,
            max_busy: 0,
            busy_grace_ms: BUSY_GRACE_MS,
        }
    }
}

/// Why a [`Config`] cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ConfigError {
    /// `max_children` is 0.
    MaxChildrenZero,
    /// `max_children` exceeds the child table's capacity.
    MaxChildrenOverCapacity {
        /// Requested maximum.
        max_children: usize,
        /// Table capacity.
        capacity: usize,
    },
    /// `min_children` is 0.
    MinChildrenZero,
    /// `min_children` exceeds `max_children`.
    MinChildrenOverMax {
        /// Requested minimum.
        min_children: usize,
        /// Requested maximum.
        max_children: usize,
    },
    /// `min_spare` exceeds `max_spare`.
    MinSpareOverMaxSpare {
        /// Requested minimum spare.
        min_spare: usize,
        /// Requested maximum spare.
        max_spare: usize,
    },
    /// `min_spare` exceeds `max_children`: the pool could never satisfy it.
    MinSpareOverMaxChildren {
        /// Requested minimum spare.
        min_spare: usize,
        /// Requested maximum.
        max_children: usize,
    },
    /// `max_conn_per_child` is 0.
    MaxConnPerChildZero,
    /// `spawn_rate_max` is 0.
    SpawnRateZero,
    /// `tick_ms` is 0.
    TickZero,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ConfigError::MaxChildrenZero => f.write_str("--max-children must be at least 1"),
            ConfigError::MaxChildrenOverCapacity { max_children, capacity } => {
                write!(f, "--max-children {max_children} exceeds the child table capacity {capacity}")
            }
            ConfigError::MinChildrenZero => f.write_str("--min-children must be at least 1"),
            ConfigError::MinChildrenOverMax { min_children, max_children } => {
                write!(f, "--min-children {min_children} exceeds --max-children {max_children}")
            }
            ConfigError::MinSpareOverMaxSpare { min_spare, max_spare } => {
                write!(f, "--min-spare {min_spare} exceeds --max-spare {max_spare}")
            }
            ConfigError::MinSpareOverMaxChildren { min_spare, max_children } => {
                write!(f, "--min-spare {min_spare} exceeds --max-children {max_children}")
            }
            ConfigError::MaxConnPerChildZero => f.write_str("--max-conn-per-child must be at least 1"),
            ConfigError::SpawnRateZero => f.write_str("spawn rate cap must be at least 1"),
            ConfigError::TickZero => f.write_str("tick period must be at least 1 ms"),
        }
    }
}

impl Config {
    /// Checks the settings against each other and a table of `capacity` children.
    pub fn validate(&self, capacity: usize) -> Result<(), ConfigError> {
        let (max, min) = (self.max_children, self.min_children);
        if max == 0 {
            return Err(ConfigError::MaxChildrenZero);
        }
        if max > capacity {
            return Err(ConfigError::MaxChildrenOverCapacity { max_children: max, capacity });
        }
        if min == 0 {
            return Err(ConfigError::MinChildrenZero);
        }
        if min > max {
            return Err(ConfigError::MinChildrenOverMax { min_children: min, max_children: max });
        }
        if self.min_spare > self.max_spare {
            return Err(ConfigError::MinSpareOverMaxSpare { min_spare: self.min_spare, max_spare: self.max_spare });
        }
        if self.min_spare > max {
            return Err(ConfigError::MinSpareOverMaxChildren { min_spare: self.min_spare, max_children: max });
        }
        if self.max_conn_per_child == 0 {
            return Err(ConfigError::MaxConnPerChildZero);
        }
        if self.spawn_rate_max == 0 {
            return Err(ConfigError::SpawnRateZero);
        }
        if self.tick_ms == 0 {
            return Err(ConfigError::TickZero);
        }
        Ok(())
    }

    /// The settings corrected as spamd corrects its options before use: at least one
    /// child, `min_spare` below `max_children`, `max_spare` above `min_spare`.
    pub fn spamd_adjusted(mut self) -> Config {
        self.max_children = self.max_children.max(1);
        self.min_children = self.min_children.max(1);
        if self.min_spare > self.max_children {
            self.min_spare = self.max_children - 1;
        }
        if self.max_spare < self.min_spare {
            self.max_spare = self.min_spare.saturating_add(1);
        }
        self.max_conn_per_child = self.max_conn_per_child.max(1);
        self
    }

    /// `timeout_child_secs` in ms, `None` when disabled.
    pub fn timeout_child_ms(&self) -> Option<u64> {
        (self.timeout_child_secs > 0).then(|| u64::from(self.timeout_child_secs) * 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn defaults_are_spamds() {
        let c = Config::default();
        assert_eq!((c.max_children, c.min_children, c.min_spare, c.max_spare), (5, 1, 1, 2));
        assert_eq!((c.max_conn_per_child, c.timeout_child_secs, c.spawn_rate_max, c.tick_ms), (200, 300, 32, 1000));
        assert!(!c.round_robin);
        assert_eq!((c.max_busy, c.busy_grace_ms), (0, BUSY_GRACE_MS));
        assert_eq!(c.validate(5), Ok(()));
        assert_eq!(c.timeout_child_ms(), Some(300_000));
    }

    #[test]
    fn validate_table() {
        let d = Config::default();
        let cases: &[(Config, usize, Result<(), ConfigError>, &str)] = &[
            (Config { max_children: 0, ..d }, 8, Err(ConfigError::MaxChildrenZero), "at least 1"),
            (d, 4, Err(ConfigError::MaxChildrenOverCapacity { max_children: 5, capacity: 4 }), "capacity 4"),
            (Config { min_children: 0, ..d }, 8, Err(ConfigError::MinChildrenZero), "--min-children"),
            (
                Config { min_children: 6, ..d },
                8,
                Err(ConfigError::MinChildrenOverMax { min_children: 6, max_children: 5 }),
                "--min-children 6 exceeds --max-children 5",
            ),
            (
                Config { min_spare: 3, ..d },
                8,
                Err(ConfigError::MinSpareOverMaxSpare { min_spare: 3, max_spare: 2 }),
                "--min-spare 3",
            ),
            (
                Config { min_spare: 6, max_spare: 9, ..d },
                8,
                Err(ConfigError::MinSpareOverMaxChildren { min_spare: 6, max_children: 5 }),
                "--max-children 5",
            ),
            (Config { max_conn_per_child: 0, ..d }, 8, Err(ConfigError::MaxConnPerChildZero), "conn"),
            (Config { spawn_rate_max: 0, ..d }, 8, Err(ConfigError::SpawnRateZero), "spawn"),
            (Config { tick_ms: 0, ..d }, 8, Err(ConfigError::TickZero), "tick"),
            (Config { min_spare: 0, max_spare: 0, timeout_child_secs: 0, ..d }, 5, Ok(()), ""),
        ];
        for (config, capacity, want, text) in cases {
            let got = config.validate(*capacity);
            assert_eq!(got, *want, "{config:?}");
            if let Err(e) = got {
                assert!(e.to_string().contains(text), "{e}");
            }
        }
    }

    #[test]
    fn spamd_adjustments() {
        let d = Config::default();
        let c = Config { min_children: 0, min_spare: 9, max_spare: 1, max_conn_per_child: 0, ..d }.spamd_adjusted();
        assert_eq!((c.min_children, c.min_spare, c.max_spare, c.max_conn_per_child), (1, 4, 5, 1));
        assert_eq!(c.validate(5), Ok(()));
        assert_eq!(Config { timeout_child_secs: 0, ..d }.timeout_child_ms(), None);
    }
}
