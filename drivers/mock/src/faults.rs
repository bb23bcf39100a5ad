//! Fault switches: each makes the driver misbehave like a real driver bug, so that the suite
//! can prove it notices. The guarantee IDs in the docs are the ones the suite reports; the
//! table of which fault breaks which guarantee is `suites/src/fidelity.rs`, shown in
//! drivers/mock/README.md and checked against real runs by `suites/tests/fidelity.rs`.

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// `fail-prepare=N`: the first N NodePrepareResources calls fail with a gRPC error
    /// (`UNAVAILABLE`). Breaks the plugin-tier checks that begin with a prepare
    /// (`plugin.prepare.allocated-claim`, …); a kubelet retries, so workloads only start late.
    FailPrepare(u32),
    /// `hang-prepare`: NodePrepareResources never answers, past kubelet's 45 s call timeout.
    /// Breaks the plugin-tier prepare checks and everything that needs a running workload
    /// (`workload.sees-devices`, …): the pod never starts.
    HangPrepare,
    /// `exit-on-prepare`: the process exits (status 1, no cleanup, like a crash) when a
    /// NodePrepareResources call arrives. Breaks what `hang-prepare` breaks.
    ExitOnPrepare,
    /// `non-idempotent-prepare`: every prepare of the same claim returns new CDI device IDs
    /// (and rewrites the spec with them). Breaks `plugin.prepare.idempotent`; a kubelet calls
    /// Prepare once per claim and node (not again after its restart), so nothing else.
    NonIdempotentPrepare,
    /// `lose-checkpoint`: the checkpoint is deleted at start, so claims prepared before a
    /// restart are forgotten: their unprepare succeeds but leaves the CDI spec behind.
    /// Breaks `plugin.restart.keeps-state`.
    LoseCheckpoint,
    /// `stale-slices-on-exit`: the slices stay after a clean shutdown even with
    /// `--remove-slices-on-exit`. Breaks no guarantee: the DRA contract leaves removal on exit
    /// to the driver (the upstream helper keeps slices by default), and the kubelet's wipe and
    /// the Node's garbage collection remove them.
    StaleSlicesOnExit,
    /// `cdi-without-spec`: prepare returns CDI device IDs but writes no CDI spec, so the
    /// runtime cannot resolve them. Breaks `plugin.cdi.resolvable` and every running workload.
    CdiWithoutSpec,
    /// `wrong-attribute=NAME=VALUE`: every published device carries attribute NAME = VALUE
    /// instead of the inventory's value. Breaks `plugin.slices.match-inventory`.
    WrongAttribute { name: String, value: String },
    /// `wrong-capacity=NAME=VALUE`: every published device has capacity NAME = VALUE instead
    /// of the inventory's, like a driver that reports memory in the wrong unit. The scheduler
    /// then allocates requests no device can meet. Breaks `plugin.slices.match-inventory`,
    /// `claim.impossible.capacity` (with a value above the inventory's) and
    /// `claim.impossible.explained`.
    WrongCapacity { name: String, value: String },
    /// `phantom-devices=N`: also publishes N devices the node does not have (copies of its
    /// last device named `phantom-<i>`), like a driver that counts a device twice or keeps a
    /// removed one. The scheduler allocates them; prepare refuses them. Breaks
    /// `plugin.slices.match-inventory`, and with enough phantoms `claim.impossible.count`,
    /// `claim.impossible.explained` and `capacity.recovered`.
    PhantomDevices(u32),
    /// `no-owner-reference`: the slices carry no controller ownerRef to the Node, as
    /// drivers written without the upstream helper often forget. Breaks
    /// `plugin.slices.owned-by-node` and `node.removal.slices-gone`: nothing removes the
    /// slices of a deleted Node.
    NoOwnerReference,
    /// `wipe-slices-on-start`: every start deletes the node's slices before publishing them
    /// again, so a restart makes the devices vanish for a moment and changes the slices.
    /// Breaks `driver.restart.slices-kept`.
    WipeSlicesOnStart,
    /// `prepare-wrong-device`: the CDI spec of every claim exposes the node's first device,
    /// whatever was allocated (the response still names the allocated devices), like a
    /// driver that ignores the allocation result. Breaks `workload.sees-devices`,
    /// `isolation.exclusive` and `limits.max-devices-per-claim`.
    PrepareWrongDevice,
    /// `prepare-first-device-only`: the CDI spec of a claim exposes only its first allocated
    /// device, like a driver whose loop over the allocation results stops early. Breaks
    /// `limits.max-devices-per-claim` and `workload.sees-devices` for multi-device claims.
    PrepareFirstDeviceOnly,
    /// `wrong-version=X`: `--version` reports X instead of the driver's version, like a build
    /// without its release stamp. Breaks `versions.driver`.
    WrongVersion(String),
    /// `prepare-foreign-claims`: prepare does not check that the allocated devices are in this
    /// node's pool, so a claim allocated on another node gets this node's devices of the same
    /// name. Breaks `plugin.prepare.refuses-foreign-node`.
    PrepareForeignClaims,
    /// `reset-devices-on-start`: at start-up the driver resets the devices its checkpoint
    /// lists as prepared, as a GPU reset during initialisation does, which kills the
    /// processes using them. Breaks `driver.restart.workload-keeps-devices`.
    ResetDevicesOnStart,
    /// `register-first-start-only`: only the first start on a state dir offers the
    /// registration socket; a restarted driver serves DRA but the kubelet never learns it is
    /// back. Breaks `plugin.restart.keeps-state` and `driver.restart.new-claims-work`, and
    /// `node.restart.driver-recovers` on the node where the driver restart ran first (a kubelet
    /// restart alone does not restart the driver: it finds the first start's socket).
    RegisterFirstStartOnly,
    /// `register-v1beta1-only`: GetInfo offers only `v1beta1.DRAPlugin`, like a driver whose
    /// registration was not updated for the v1 API; both services are still served, so a
    /// kubelet falls back to v1beta1 and everything else works. Breaks
    /// `plugin.registration.info`.
    RegisterV1beta1Only,
    /// `never-unprepare`: NodeUnprepareResources fails for every claim. Breaks
    /// `plugin.unprepare.removes-state`, `plugin.unprepare.unknown-claim`,
    /// `capacity.recovered` and `node.restart.driver-recovers`: pod deletions block and
    /// devices stay held.
    NeverUnprepare,
    /// `no-slice-reconcile`: the slices are written at start-up and when the inventory
    /// changes, never because the slices changed, like a driver that creates its slices once
    /// instead of running the upstream helper's reconciling controller. Whoever deletes them
    /// leaves the node without devices until the driver restarts; the kubelet does that at
    /// every start. Breaks `node.restart.driver-recovers`.
    NoSliceReconcile,
    /// `foreign-slice=NODE`: also publishes a slice for NODE's pool, which this plugin does
    /// not run on. Breaks `plugin.slices.owned-by-node`.
    ForeignSlice(String),
    /// `strict-authority`: the registration socket is served by a plain tonic (h2) server,
    /// which resets every call whose HTTP/2 `:authority` is no valid URI authority. The
    /// kubelet's plugin watcher sends the socket path there (percent-encoded by grpc-go), so
    /// GetInfo fails with `RST_STREAM … PROTOCOL_ERROR` and the plugin never registers, as
    /// every tonic driver without `dracheck_kubelet_api::authority`'s fix does on a real
    /// node. Breaks `plugin.registration.info` and all that needs a registered plugin.
    StrictAuthority,
}

pub const NAMES: &str = "fail-prepare=N, hang-prepare, exit-on-prepare, non-idempotent-prepare, lose-checkpoint, \
                         stale-slices-on-exit, cdi-without-spec, wrong-attribute=NAME=VALUE, \
                         wrong-capacity=NAME=VALUE, phantom-devices=N, no-owner-reference, wipe-slices-on-start, \
                         prepare-wrong-device, prepare-first-device-only, prepare-foreign-claims, reset-devices-on-start, \
                         register-first-start-only, wrong-version=X, register-v1beta1-only, never-unprepare, \
                         no-slice-reconcile, foreign-slice=NODE, strict-authority";

impl FromStr for Fault {
    type Err = String;

    fn from_str(s: &str) -> Result<Fault, String> {
        let (name, arg) = match s.split_once('=') {
            Some((n, a)) => (n, Some(a)),
            None => (s, None),
        };
        let needs = |what: &str| format!("fault {name:?} needs an argument: {name}={what}");
        let bare = |fault: Fault| match arg {
            Some(_) => Err(format!("fault {name:?} takes no argument (got {s:?})")),
            None => Ok(fault),
        };
        match name {
            "fail-prepare" => {
                let n = arg.ok_or_else(|| needs("N"))?;
                n.parse().map(Fault::FailPrepare).map_err(|_| format!("fail-prepare={n}: N must be a whole number"))
            }
            "wrong-attribute" => match arg.and_then(|a| a.split_once('=')) {
                Some((attr, value)) if !attr.is_empty() => {
                    Ok(Fault::WrongAttribute { name: attr.to_string(), value: value.to_string() })
                }
                _ => Err(needs("NAME=VALUE")),
            },
            "wrong-capacity" => match arg.and_then(|a| a.split_once('=')) {
                Some((cap, value)) if !cap.is_empty() && crate::inventory::valid_quantity(value) => {
                    Ok(Fault::WrongCapacity { name: cap.to_string(), value: value.to_string() })
                }
                Some((cap, value)) if !cap.is_empty() => {
                    Err(format!("wrong-capacity={cap}={value}: VALUE must be a quantity such as 80Gi or 4"))
                }
                _ => Err(needs("NAME=VALUE")),
            },
            "phantom-devices" => {
                let n = arg.ok_or_else(|| needs("N"))?;
                match n.parse() {
                    Ok(n) if n > 0 => Ok(Fault::PhantomDevices(n)),
                    _ => Err(format!("phantom-devices={n}: N must be a whole number above 0")),
                }
            }
            "wrong-version" => match arg {
                Some(v) if !v.is_empty() => Ok(Fault::WrongVersion(v.to_string())),
                _ => Err(needs("X")),
            },
            "foreign-slice" => match arg {
                Some(node) if !node.is_empty() => Ok(Fault::ForeignSlice(node.to_string())),
                _ => Err(needs("NODE")),
            },
            "hang-prepare" => bare(Fault::HangPrepare),
            "exit-on-prepare" => bare(Fault::ExitOnPrepare),
            "non-idempotent-prepare" => bare(Fault::NonIdempotentPrepare),
            "lose-checkpoint" => bare(Fault::LoseCheckpoint),
            "stale-slices-on-exit" => bare(Fault::StaleSlicesOnExit),
            "cdi-without-spec" => bare(Fault::CdiWithoutSpec),
            "never-unprepare" => bare(Fault::NeverUnprepare),
            "no-slice-reconcile" => bare(Fault::NoSliceReconcile),
            "no-owner-reference" => bare(Fault::NoOwnerReference),
            "wipe-slices-on-start" => bare(Fault::WipeSlicesOnStart),
            "prepare-wrong-device" => bare(Fault::PrepareWrongDevice),
            "prepare-first-device-only" => bare(Fault::PrepareFirstDeviceOnly),
            "register-v1beta1-only" => bare(Fault::RegisterV1beta1Only),
            "prepare-foreign-claims" => bare(Fault::PrepareForeignClaims),
            "reset-devices-on-start" => bare(Fault::ResetDevicesOnStart),
            "register-first-start-only" => bare(Fault::RegisterFirstStartOnly),
            "strict-authority" => bare(Fault::StrictAuthority),
            _ => Err(format!("unknown fault {name:?}; known faults: {NAMES}")),
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::FailPrepare(n) => write!(f, "fail-prepare={n}"),
            Fault::HangPrepare => f.write_str("hang-prepare"),
            Fault::ExitOnPrepare => f.write_str("exit-on-prepare"),
            Fault::NonIdempotentPrepare => f.write_str("non-idempotent-prepare"),
            Fault::LoseCheckpoint => f.write_str("lose-checkpoint"),
            Fault::StaleSlicesOnExit => f.write_str("stale-slices-on-exit"),
            Fault::CdiWithoutSpec => f.write_str("cdi-without-spec"),
            Fault::WrongAttribute { name, value } => write!(f, "wrong-attribute={name}={value}"),
            Fault::WrongCapacity { name, value } => write!(f, "wrong-capacity={name}={value}"),
            Fault::PhantomDevices(n) => write!(f, "phantom-devices={n}"),
            Fault::NoOwnerReference => f.write_str("no-owner-reference"),
            Fault::WipeSlicesOnStart => f.write_str("wipe-slices-on-start"),
            Fault::PrepareWrongDevice => f.write_str("prepare-wrong-device"),
            Fault::PrepareFirstDeviceOnly => f.write_str("prepare-first-device-only"),
            Fault::WrongVersion(v) => write!(f, "wrong-version={v}"),
            Fault::RegisterV1beta1Only => f.write_str("register-v1beta1-only"),
            Fault::PrepareForeignClaims => f.write_str("prepare-foreign-claims"),
            Fault::ResetDevicesOnStart => f.write_str("reset-devices-on-start"),
            Fault::RegisterFirstStartOnly => f.write_str("register-first-start-only"),
            Fault::NeverUnprepare => f.write_str("never-unprepare"),
            Fault::NoSliceReconcile => f.write_str("no-slice-reconcile"),
            Fault::ForeignSlice(node) => write!(f, "foreign-slice={node}"),
            Fault::StrictAuthority => f.write_str("strict-authority"),
        }
    }
}

/// Inventory files list faults as strings of the same syntax as `--fault`, so that a bad one
/// is reported with its line.
impl<'de> serde::Deserialize<'de> for Fault {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Fault, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The active faults, looked up by the code paths they bend.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Faults {
    pub fail_prepare: u32,
    pub hang_prepare: bool,
    pub exit_on_prepare: bool,
    pub non_idempotent_prepare: bool,
    pub lose_checkpoint: bool,
    pub stale_slices_on_exit: bool,
    pub cdi_without_spec: bool,
    pub wrong_attributes: Vec<(String, String)>,
    pub wrong_capacities: Vec<(String, String)>,
    pub phantom_devices: u32,
    pub no_owner_reference: bool,
    pub wipe_slices_on_start: bool,
    pub prepare_wrong_device: bool,
    pub prepare_first_device_only: bool,
    pub wrong_version: Option<String>,
    pub register_v1beta1_only: bool,
    pub prepare_foreign_claims: bool,
    pub reset_devices_on_start: bool,
    pub register_first_start_only: bool,
    pub never_unprepare: bool,
    pub no_slice_reconcile: bool,
    pub foreign_slices: Vec<String>,
    pub strict_authority: bool,
    listed: Vec<Fault>,
}

impl Faults {
    pub fn is_empty(&self) -> bool {
        self.listed.is_empty()
    }
}

impl fmt::Display for Faults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = self.listed.iter().map(Fault::to_string).collect();
        f.write_str(&names.join(", "))
    }
}

impl FromIterator<Fault> for Faults {
    fn from_iter<I: IntoIterator<Item = Fault>>(faults: I) -> Faults {
        let mut set = Faults::default();
        for fault in faults {
            match &fault {
                Fault::FailPrepare(n) => set.fail_prepare = *n,
                Fault::HangPrepare => set.hang_prepare = true,
                Fault::ExitOnPrepare => set.exit_on_prepare = true,
                Fault::NonIdempotentPrepare => set.non_idempotent_prepare = true,
                Fault::LoseCheckpoint => set.lose_checkpoint = true,
                Fault::StaleSlicesOnExit => set.stale_slices_on_exit = true,
                Fault::CdiWithoutSpec => set.cdi_without_spec = true,
                Fault::WrongAttribute { name, value } => set.wrong_attributes.push((name.clone(), value.clone())),
                Fault::WrongCapacity { name, value } => set.wrong_capacities.push((name.clone(), value.clone())),
                Fault::PhantomDevices(n) => set.phantom_devices = *n,
                Fault::NoOwnerReference => set.no_owner_reference = true,
                Fault::WipeSlicesOnStart => set.wipe_slices_on_start = true,
                Fault::PrepareWrongDevice => set.prepare_wrong_device = true,
                Fault::PrepareFirstDeviceOnly => set.prepare_first_device_only = true,
                Fault::WrongVersion(v) => set.wrong_version = Some(v.clone()),
                Fault::RegisterV1beta1Only => set.register_v1beta1_only = true,
                Fault::PrepareForeignClaims => set.prepare_foreign_claims = true,
                Fault::ResetDevicesOnStart => set.reset_devices_on_start = true,
                Fault::RegisterFirstStartOnly => set.register_first_start_only = true,
                Fault::NeverUnprepare => set.never_unprepare = true,
                Fault::NoSliceReconcile => set.no_slice_reconcile = true,
                Fault::ForeignSlice(node) => set.foreign_slices.push(node.clone()),
                Fault::StrictAuthority => set.strict_authority = true,
            }
            if !set.listed.contains(&fault) {
                set.listed.push(fault);
            }
        }
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fault_round_trips_through_its_name() {
        for s in [
            "fail-prepare=3",
            "hang-prepare",
            "exit-on-prepare",
            "non-idempotent-prepare",
            "lose-checkpoint",
            "stale-slices-on-exit",
            "cdi-without-spec",
            "wrong-attribute=model=h100",
            "wrong-capacity=memory=1Ti",
            "phantom-devices=32",
            "no-owner-reference",
            "wipe-slices-on-start",
            "prepare-wrong-device",
            "prepare-first-device-only",
            "wrong-version=0.0.1",
            "register-v1beta1-only",
            "prepare-foreign-claims",
            "reset-devices-on-start",
            "register-first-start-only",
            "never-unprepare",
            "no-slice-reconcile",
            "foreign-slice=node-b",
            "strict-authority",
        ] {
            assert_eq!(s.parse::<Fault>().unwrap().to_string(), s);
        }
    }

    #[test]
    fn bad_faults_say_what_is_expected() {
        assert!("fail-prepare".parse::<Fault>().unwrap_err().contains("fail-prepare=N"));
        assert!("fail-prepare=x".parse::<Fault>().unwrap_err().contains("whole number"));
        assert!("wrong-attribute=model".parse::<Fault>().unwrap_err().contains("NAME=VALUE"));
        assert!("hang-prepare=1".parse::<Fault>().unwrap_err().contains("takes no argument"));
        assert!("wrong-capacity=memory".parse::<Fault>().unwrap_err().contains("NAME=VALUE"));
        assert!("wrong-capacity=memory=lots".parse::<Fault>().unwrap_err().contains("quantity"));
        assert!("phantom-devices=0".parse::<Fault>().unwrap_err().contains("above 0"));
        assert!("wrong-version".parse::<Fault>().unwrap_err().contains("wrong-version=X"));
        let unknown = "crash".parse::<Fault>().unwrap_err();
        assert!(unknown.contains("unknown fault") && unknown.contains("never-unprepare"), "{unknown}");
    }

    #[test]
    fn faults_combine() {
        let set: Faults =
            ["fail-prepare=2", "foreign-slice=b", "foreign-slice=c"].iter().map(|s| s.parse().unwrap()).collect();
        assert_eq!(set.fail_prepare, 2);
        assert_eq!(set.foreign_slices, ["b", "c"]);
        assert!(!set.hang_prepare);
        assert_eq!(set.to_string(), "fail-prepare=2, foreign-slice=b, foreign-slice=c");
    }
}
