//! Device health as the 1.37 kubelet keeps it (KEP 4680, ResourceHealthStatus;
//! `pkg/kubelet/cm/dra/healthinfo.go`): the last report of each device by driver, pool and
//! device, trusted for its timeout (the plugin's `health_check_timeout_seconds`, else 30 s) and
//! read as Unknown afterwards; devices nobody reported are Unknown too. The cache is written to
//! the kubelet's state dir on every change and read back when the kubelet starts, as upstream's
//! `dra_health_state` checkpoint. Which devices a report changed is queued for the pod worker,
//! which re-reports the status of the pods using them (upstream's `Updates()` channel).
//!
//! `watch` keeps each plugin's `NodeWatchResources` stream open, `status` turns the cache and a
//! pod's prepared devices into its containers' `allocatedResourcesStatus`.

pub mod status;
pub mod watch;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use dracheck_kubelet_api::health_v1;
use serde::{Deserialize, Serialize};

use super::events::Log;

/// `DefaultHealthTimeout`: how long a report is trusted when the plugin names no timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// `maxDevicesPerDriver`: reports are not checked against the driver's slices, so a plugin
/// that invents device names would otherwise grow the cache (and its checkpoint) for ever.
const MAX_DEVICES_PER_DRIVER: usize = 16384;

/// `v1.ResourceHealthMessageMaxLength`: the API refuses longer messages, so the kubelet cuts
/// them.
const MESSAGE_MAX_LEN: usize = 1024;

/// A device's health as the pod status names it (`v1.ResourceHealthStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Health {
    Healthy,
    Unhealthy,
    Unknown,
}

impl Health {
    pub fn as_str(self) -> &'static str {
        match self {
            Health::Healthy => "Healthy",
            Health::Unhealthy => "Unhealthy",
            Health::Unknown => "Unknown",
        }
    }

    /// `toDeviceHealthStatus`: anything but HEALTHY and UNHEALTHY (a value this protocol
    /// version does not know included) is Unknown.
    fn from_wire(value: i32) -> Health {
        match health_v1::HealthStatus::try_from(value) {
            Ok(health_v1::HealthStatus::Healthy) => Health::Healthy,
            Ok(health_v1::HealthStatus::Unhealthy) => Health::Unhealthy,
            _ => Health::Unknown,
        }
    }
}

/// One device's last report (upstream `state.DeviceHealth`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceHealth {
    pub pool_name: String,
    pub device_name: String,
    pub health: Health,
    pub message: String,
    /// When the kubelet received the report: the plugin's own `last_updated_time` is not
    /// what the timeout counts from (upstream overwrites it on arrival).
    pub last_updated: SystemTime,
    pub timeout: Duration,
}

impl DeviceHealth {
    /// A device of a plugin's report, as `buildDeviceHealth` takes it: a timeout of 0 or
    /// less is the default, a message longer than the API allows is cut.
    pub fn from_report(d: &health_v1::DeviceHealth, received: SystemTime) -> DeviceHealth {
        let id = d.device.clone().unwrap_or_default();
        let timeout = u64::try_from(d.health_check_timeout_seconds)
            .ok()
            .filter(|s| *s > 0)
            .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
        DeviceHealth {
            pool_name: id.pool_name,
            device_name: id.device_name,
            health: Health::from_wire(d.health),
            message: truncate_message(&d.message),
            last_updated: received,
            timeout,
        }
    }

    fn key(&self) -> String {
        device_key(&self.pool_name, &self.device_name)
    }

    /// The report is older than its timeout (a checkpoint entry without one has the default).
    fn timed_out(&self, now: SystemTime) -> bool {
        let timeout = if self.timeout.is_zero() { DEFAULT_TIMEOUT } else { self.timeout };
        now.duration_since(self.last_updated).is_ok_and(|age| age > timeout)
    }
}

/// `truncateHealthMessage`: at most [`MESSAGE_MAX_LEN`] bytes, the cut marked with `...`.
/// Upstream cuts at a byte; here the cut moves back to a character boundary, so a message is
/// never invalid UTF-8.
fn truncate_message(message: &str) -> String {
    if message.len() <= MESSAGE_MAX_LEN {
        return message.to_string();
    }
    let mut end = MESSAGE_MAX_LEN - 3;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &message[..end])
}

/// The cache's key of a device within its driver, as upstream's `pool/device`.
fn device_key(pool: &str, device: &str) -> String {
    format!("{pool}/{device}")
}

/// What a reader sees of a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    pub health: Health,
    pub message: String,
}

impl Reading {
    pub const UNKNOWN: Reading = Reading { health: Health::Unknown, message: String::new() };
}

/// The timeout rule of `getHealthInfo`: the last report while it is fresh; Unknown, without
/// a message, once it is older than its timeout or where there is none.
pub fn read(entry: Option<&DeviceHealth>, now: SystemTime) -> Reading {
    match entry {
        Some(e) if !e.timed_out(now) => Reading { health: e.health, message: e.message.clone() },
        _ => Reading::UNKNOWN,
    }
}

/// A device of a driver, as the pod worker looks its users up.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceKey {
    pub driver: String,
    pub pool: String,
    pub device: String,
}

/// What one report did to a driver's entries.
#[derive(Debug, Default, PartialEq)]
struct Reconciled {
    /// New devices, and devices whose health, message or timeout differ; devices that went
    /// unreported past their timeout, now Unknown.
    changed: Vec<DeviceHealth>,
    /// Some entry went (timed out while unreported).
    removed: bool,
    /// New devices beyond [`MAX_DEVICES_PER_DRIVER`], not taken.
    ignored: usize,
}

/// `updateHealthInfo`'s first two phases for one driver's entries: the reported devices are
/// taken as they are now; a device the report leaves out stays until its report times out,
/// then it goes, and counts as changed (to Unknown) unless it was Unknown already.
fn reconcile(devices: &mut BTreeMap<String, DeviceHealth>, report: Vec<DeviceHealth>, now: SystemTime) -> Reconciled {
    let mut out = Reconciled::default();
    let mut reported = std::collections::HashSet::new();
    for mut device in report {
        device.last_updated = now;
        let key = device.key();
        reported.insert(key.clone());
        let existing = devices.get(&key);
        if existing.is_none() && devices.len() >= MAX_DEVICES_PER_DRIVER {
            out.ignored += 1;
            continue;
        }
        let differs = existing
            .is_none_or(|e| e.health != device.health || e.message != device.message || e.timeout != device.timeout);
        if differs {
            out.changed.push(device.clone());
        }
        devices.insert(key, device);
    }
    devices.retain(|key, existing| {
        if reported.contains(key) || !existing.timed_out(now) {
            return true;
        }
        if existing.health != Health::Unknown {
            out.changed.push(DeviceHealth {
                health: Health::Unknown,
                message: String::new(),
                last_updated: now,
                ..existing.clone()
            });
        }
        out.removed = true;
        false
    });
    out
}

/// Driver → `pool/device` → its last report (upstream `DevicesHealthMap`).
type Drivers = BTreeMap<String, BTreeMap<String, DeviceHealth>>;

/// One node's device health, shared by the plugins' health streams and the pod worker.
pub struct HealthCache {
    drivers: Mutex<Drivers>,
    /// The checkpoint; written whole on every change.
    path: PathBuf,
    /// Devices whose health changed since the pod worker last asked.
    changed: Mutex<Vec<DeviceKey>>,
    log: Log,
}

impl HealthCache {
    /// The cache as the checkpoint in `path` left it; empty if there is none or it does not
    /// read (said in the log), as upstream proceeds with an empty cache.
    pub fn load(path: PathBuf, log: Log) -> HealthCache {
        let drivers = match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).unwrap_or_else(|e| {
                log.warn(
                    "HealthCheckpoint",
                    format!("{} does not read ({e}); starting with no device health", path.display()),
                );
                Drivers::new()
            }),
            Err(_) => Drivers::new(),
        };
        HealthCache { drivers: Mutex::new(drivers), path, changed: Mutex::new(Vec::new()), log }
    }

    /// What the pod status says of a device now.
    pub fn read(&self, driver: &str, pool: &str, device: &str) -> Reading {
        let drivers = self.drivers.lock().unwrap();
        read(drivers.get(driver).and_then(|d| d.get(&device_key(pool, device))), SystemTime::now())
    }

    /// Takes a report of `driver`'s plugin: the changes are logged and queued for the pod
    /// worker, the checkpoint written.
    pub fn update(&self, driver: &str, report: Vec<DeviceHealth>) {
        let mut drivers = self.drivers.lock().unwrap();
        let result = reconcile(drivers.entry(driver.to_string()).or_default(), report, SystemTime::now());
        if result.ignored > 0 {
            self.log.warn(
                "HealthReportTooLarge",
                format!(
                    "plugin {driver} reports more than {MAX_DEVICES_PER_DRIVER} devices; {} new ones ignored",
                    result.ignored
                ),
            );
        }
        if result.changed.is_empty() && !result.removed {
            return;
        }
        self.save(&drivers);
        drop(drivers);
        if result.changed.is_empty() {
            return;
        }
        self.log.info(format!("device health of {driver} changed: {}", describe(&result.changed)));
        self.changed.lock().unwrap().extend(result.changed.into_iter().map(|d| DeviceKey {
            driver: driver.to_string(),
            pool: d.pool_name,
            device: d.device_name,
        }));
    }

    /// Forgets every report of `driver`, as upstream does when a health stream ends: its
    /// devices read Unknown from now on. Nothing is queued for the pods (neither does
    /// upstream); their status shows it at their next sync.
    pub fn clear_driver(&self, driver: &str) {
        let mut drivers = self.drivers.lock().unwrap();
        if drivers.remove(driver).is_some() {
            self.save(&drivers);
        }
    }

    /// The devices whose health changed since the last call.
    pub fn take_changed(&self) -> Vec<DeviceKey> {
        std::mem::take(&mut *self.changed.lock().unwrap())
    }

    /// Writes the checkpoint (through a temporary file, so that a reader never sees half of
    /// it). A failure is logged: the kubelet runs on and only a restart loses the health.
    fn save(&self, drivers: &Drivers) {
        let tmp = self.path.with_extension("tmp");
        let written = std::fs::write(&tmp, serde_json::to_vec(drivers).expect("serializes"))
            .and_then(|()| std::fs::rename(&tmp, &self.path));
        if let Err(e) = written {
            self.log.warn("HealthCheckpoint", format!("writing {}: {e}", self.path.display()));
        }
    }
}

/// `pool/device Health ("message")`, for the log; long reports are shortened.
fn describe(changed: &[DeviceHealth]) -> String {
    const SHOWN: usize = 16;
    let mut parts: Vec<String> = changed
        .iter()
        .take(SHOWN)
        .map(|d| {
            let message = if d.message.is_empty() { String::new() } else { format!(" ({:?})", d.message) };
            format!("{} {}{message}", d.key(), d.health.as_str())
        })
        .collect();
    if changed.len() > SHOWN {
        parts.push(format!("and {} more", changed.len() - SHOWN));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(pool: &str, device: &str, health: Health) -> DeviceHealth {
        DeviceHealth {
            pool_name: pool.into(),
            device_name: device.into(),
            health,
            message: String::new(),
            last_updated: SystemTime::UNIX_EPOCH,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + secs)
    }

    #[test]
    fn a_report_is_trusted_for_its_timeout_and_unknown_afterwards() {
        let entry = DeviceHealth {
            message: "ECC errors".into(),
            last_updated: at(0),
            timeout: Duration::from_secs(10),
            ..report("pool", "gpu-0", Health::Unhealthy)
        };
        let fresh = Reading { health: Health::Unhealthy, message: "ECC errors".into() };
        assert_eq!(read(Some(&entry), at(0)), fresh);
        // Exactly the timeout is still fresh (upstream: older than the timeout is stale).
        assert_eq!(read(Some(&entry), at(10)), fresh);
        assert_eq!(read(Some(&entry), at(11)), Reading::UNKNOWN, "stale: Unknown, and the message is dropped");
        assert_eq!(read(None, at(0)), Reading::UNKNOWN, "never reported: Unknown");
        // A checkpoint entry without a timeout has the default.
        let untimed = DeviceHealth { timeout: Duration::ZERO, ..entry };
        assert_eq!(read(Some(&untimed), at(30)).health, Health::Unhealthy);
        assert_eq!(read(Some(&untimed), at(31)), Reading::UNKNOWN);
    }

    #[test]
    fn reports_take_the_plugins_timeout_or_the_default_and_cut_long_messages() {
        let wire = |timeout: i64, message: &str| health_v1::DeviceHealth {
            device: Some(health_v1::DeviceIdentifier { pool_name: "p".into(), device_name: "d".into() }),
            health: health_v1::HealthStatus::Unhealthy as i32,
            last_updated_time: 5,
            health_check_timeout_seconds: timeout,
            message: message.into(),
        };
        let d = DeviceHealth::from_report(&wire(60, "hot"), at(0));
        assert_eq!((d.pool_name.as_str(), d.device_name.as_str(), d.health), ("p", "d", Health::Unhealthy));
        assert_eq!((d.timeout, d.message.as_str(), d.last_updated), (Duration::from_secs(60), "hot", at(0)));
        assert_eq!(DeviceHealth::from_report(&wire(0, ""), at(0)).timeout, DEFAULT_TIMEOUT);
        assert_eq!(DeviceHealth::from_report(&wire(-5, ""), at(0)).timeout, DEFAULT_TIMEOUT);
        let long = DeviceHealth::from_report(&wire(0, &"x".repeat(2000)), at(0)).message;
        assert_eq!(long.len(), MESSAGE_MAX_LEN);
        assert!(long.ends_with("x..."));
        // A cut inside a multi-byte character moves back to its start.
        let wide = DeviceHealth::from_report(&wire(0, &"é".repeat(1000)), at(0)).message;
        assert!(wide.len() <= MESSAGE_MAX_LEN && wide.ends_with("é..."), "{}", wide.len());
        let unknown_value = health_v1::DeviceHealth { health: 7, ..wire(0, "") };
        assert_eq!(DeviceHealth::from_report(&unknown_value, at(0)).health, Health::Unknown);
    }

    #[test]
    fn a_report_changes_what_differs_and_unreported_devices_go_once_stale() {
        let mut devices = BTreeMap::new();
        let first =
            reconcile(&mut devices, vec![report("p", "a", Health::Healthy), report("p", "b", Health::Healthy)], at(0));
        assert_eq!(first.changed.len(), 2, "new devices are changes");
        assert_eq!(devices["p/a"].last_updated, at(0), "stamped on arrival, not with the plugin's time");

        // The same again: nothing changed. A message or a timeout alone is a change.
        let same = reconcile(&mut devices, vec![report("p", "a", Health::Healthy)], at(5));
        assert_eq!(same, Reconciled::default());
        let worded = DeviceHealth { message: "fan".into(), ..report("p", "a", Health::Healthy) };
        assert_eq!(reconcile(&mut devices, vec![worded], at(6)).changed.len(), 1);
        let slower = DeviceHealth { timeout: Duration::from_secs(90), ..report("p", "a", Health::Healthy) };
        assert_eq!(reconcile(&mut devices, vec![slower], at(7)).changed.len(), 1);

        // b went unreported since 0: kept until its report is stale, then Unknown and gone.
        let kept = reconcile(&mut devices, vec![report("p", "a", Health::Unhealthy)], at(30));
        assert_eq!(kept.changed.iter().map(|d| d.key()).collect::<Vec<_>>(), ["p/a"]);
        assert!(devices.contains_key("p/b"));
        let gone = reconcile(&mut devices, vec![report("p", "a", Health::Unhealthy)], at(31));
        assert_eq!(gone.changed.len(), 1);
        assert_eq!((gone.changed[0].key(), gone.changed[0].health), ("p/b".to_string(), Health::Unknown));
        assert!(gone.removed && !devices.contains_key("p/b"));

        // An entry that was Unknown goes without a change.
        reconcile(&mut devices, vec![report("p", "c", Health::Unknown)], at(40));
        let quiet = reconcile(&mut devices, vec![report("p", "a", Health::Unhealthy)], at(71));
        assert!(quiet.changed.is_empty() && quiet.removed && !devices.contains_key("p/c"));
    }

    #[test]
    fn new_devices_beyond_the_cap_are_ignored_known_ones_still_update() {
        let mut devices: BTreeMap<String, DeviceHealth> = (0..MAX_DEVICES_PER_DRIVER)
            .map(|i| {
                let d = DeviceHealth { last_updated: at(0), ..report("p", &format!("d{i}"), Health::Healthy) };
                (d.key(), d)
            })
            .collect();
        let all: Vec<DeviceHealth> = devices.values().cloned().collect();
        let mut next = all.clone();
        next[0].health = Health::Unhealthy;
        next.push(report("p", "extra", Health::Healthy));
        let result = reconcile(&mut devices, next, at(1));
        assert_eq!((result.changed.len(), result.ignored), (1, 1));
        assert!(!devices.contains_key("p/extra"));
    }

    #[test]
    fn the_cache_reads_queues_changes_and_forgets_a_driver() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open("node-1", &dir.path().join("kubelet.log")).unwrap();
        let path = dir.path().join("dra_health_state");
        let cache = HealthCache::load(path.clone(), log.clone());
        cache.update("gpu.example.com", vec![report("p", "a", Health::Unhealthy)]);
        assert_eq!(cache.read("gpu.example.com", "p", "a").health, Health::Unhealthy);
        assert_eq!(cache.read("gpu.example.com", "p", "b"), Reading::UNKNOWN);
        assert_eq!(cache.read("other.example.com", "p", "a"), Reading::UNKNOWN);
        let key = DeviceKey { driver: "gpu.example.com".into(), pool: "p".into(), device: "a".into() };
        assert_eq!(cache.take_changed(), [key]);
        assert!(cache.take_changed().is_empty());
        cache.update("gpu.example.com", vec![report("p", "a", Health::Unhealthy)]);
        assert!(cache.take_changed().is_empty(), "an unchanged report notifies nobody");

        // A restarted kubelet reads the checkpoint.
        let again = HealthCache::load(path.clone(), log.clone());
        assert_eq!(again.read("gpu.example.com", "p", "a").health, Health::Unhealthy);

        cache.clear_driver("gpu.example.com");
        assert_eq!(cache.read("gpu.example.com", "p", "a"), Reading::UNKNOWN);
        assert!(cache.take_changed().is_empty(), "a cleared driver notifies nobody, as upstream");
        assert_eq!(HealthCache::load(path, log).read("gpu.example.com", "p", "a"), Reading::UNKNOWN);
    }
}
