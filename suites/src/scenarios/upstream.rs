//! Periods of upstream components that a correct driver's timing follows, and the bounds the
//! scenarios derive from them. A bound set at an upstream period races it and flips with load
//! (a driver on upstream's helper re-created the slices a kubelet wiped at start-up 29-30 s
//! later, against a 30 s bound); every bound here is the period it races plus [`SLACK`], and
//! the scenarios name the period in their reasons.

use std::time::Duration;

/// `DefaultSyncDelay` of upstream's ResourceSlice controller
/// (k8s.io/dynamic-resource-allocation `resourceslice/resourceslicecontroller.go`): it
/// re-syncs a pool this long after the latest event about its slices, a deletion included.
pub const HELPER_SYNC_DELAY: Duration = Duration::from_secs(30);

/// `DefaultMutationCacheTTL` of the same controller: slices it wrote stay in its cache this
/// long, so a deletion within it is seen only once they leave the cache.
pub const HELPER_MUTATION_CACHE_TTL: Duration = Duration::from_secs(60);

/// What a loaded machine adds on top of a period: timers, watch delivery, the writes.
pub const SLACK: Duration = Duration::from_secs(30);

/// How long a driver may take to publish again the slices someone deleted (a kubelet at
/// start-up, an admin): upstream's helper waits out its mutation cache and its sync delay.
pub const REPUBLISHED_AFTER_DELETION: Duration =
    Duration::from_secs(HELPER_MUTATION_CACHE_TTL.as_secs() + HELPER_SYNC_DELAY.as_secs() + SLACK.as_secs());

/// [`REPUBLISHED_AFTER_DELETION`] as a reason says it.
pub fn republish_bound_named() -> String {
    format!(
        "{}s: upstream's helper re-creates deleted slices {}s (DefaultSyncDelay) after it sees the deletion, and sees \
         it only once slices it wrote leave its {}s mutation cache (DefaultMutationCacheTTL), plus {}s of slack",
        REPUBLISHED_AFTER_DELETION.as_secs(),
        HELPER_SYNC_DELAY.as_secs(),
        HELPER_MUTATION_CACHE_TTL.as_secs(),
        SLACK.as_secs()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bounds come from upstream's source, not from memory: where the module is in the Go
    /// module cache, its constants are read and compared.
    #[test]
    fn the_periods_are_upstream_s() {
        let Some(home) = std::env::var_os("HOME") else { return };
        let file = std::path::Path::new(&home)
            .join("go/pkg/mod/k8s.io/dynamic-resource-allocation@v0.37.2/resourceslice/resourceslicecontroller.go");
        let Ok(go) = std::fs::read_to_string(&file) else {
            eprintln!("skipped: {} is not in the Go module cache", file.display());
            return;
        };
        assert!(go.contains("DefaultSyncDelay = 30 * time.Second"), "{}", file.display());
        assert!(go.contains("DefaultMutationCacheTTL = time.Minute"), "{}", file.display());
        assert!(REPUBLISHED_AFTER_DELETION > HELPER_SYNC_DELAY + HELPER_MUTATION_CACHE_TTL);
    }
}
