//! The process's environment, read once: the first call of [`Env::process`] (at start, by a
//! binary's `main` or the first `AppState`) takes a snapshot, and every setting is parsed from it
//! and passed down (`state::Config`, `DeliveryConfig`, the tracking page's settings, the table
//! names, the local server's limits). Nothing else reads the environment: clippy's
//! `disallowed-methods` (clippy.toml) refuses `std::env::var` and its kin outside this file and
//! the tests. The variables are listed in docs/serve.md.

use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::Duration;

/// A snapshot of environment variables.
#[derive(Debug, Clone, Default)]
pub struct Env(HashMap<String, String>);

impl Env {
    /// The process's environment as it was at the first call.
    pub fn process() -> &'static Env {
        #[allow(clippy::disallowed_methods)] // the one place that reads it
        static PROCESS: LazyLock<Env> = LazyLock::new(|| Env(std::env::vars().collect()));
        &PROCESS
    }

    /// An environment of these variables only (tests, and settings given as flags).
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        Env(pairs.into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect())
    }

    /// A variable's value, trimmed; an empty one counts as unset.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(|v| v.trim()).filter(|v| !v.is_empty())
    }

    /// Whether a variable is set at all (even empty), as AWS's own tools read theirs.
    pub fn has(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }

    /// The WebSocket API's Management API endpoint (`WAYMARK_WS_ENDPOINT`: the stage's
    /// `https://<api>.execute-api.<region>.amazonaws.com/<stage>`): set, committed stream
    /// messages are posted to its connections (docs/streams.md, "AWS").
    pub fn ws_endpoint(&self) -> Option<&str> {
        self.get("WAYMARK_WS_ENDPOINT")
    }

    /// A duration in seconds (fractions allowed), `default` when unset or not a number.
    pub fn seconds(&self, name: &str, default: u64) -> Duration {
        self.get(name)
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map_or(Duration::from_secs(default), Duration::from_secs_f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_trimmed_and_empty_is_unset() {
        let env = Env::from_pairs([("A", " x "), ("B", ""), ("S", "1.5"), ("N", "-3")]);
        assert_eq!(env.get("A"), Some("x"));
        assert_eq!(env.get("B"), None);
        assert!(env.has("B") && !env.has("C"));
        assert_eq!(env.seconds("S", 9), Duration::from_millis(1500));
        assert_eq!(env.seconds("N", 9), Duration::from_secs(9));
        assert_eq!(env.seconds("C", 9), Duration::from_secs(9));
    }
}
