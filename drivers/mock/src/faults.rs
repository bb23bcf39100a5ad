//! Fault switches: each makes the driver misbehave like a real driver bug, so that the suite
//! can prove it notices. [`TABLE`] is the one place a fault is named, documented and parsed;
//! the guarantee IDs in its comments are the ones the suite reports. The table of which fault
//! breaks which guarantee is `suites/src/fidelity/mod.rs`, shown in drivers/mock/README.md and
//! checked against real runs by `suites/tests/fidelity/`.

use std::fmt;
use std::str::FromStr;

/// A fault switch. Its name, argument and what it does are its row in [`TABLE`]; a variant
/// without a row cannot be shown or parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    FailPrepare(u32),
    HangPrepare,
    ExitOnPrepare,
    NonIdempotentPrepare,
    LoseCheckpoint,
    StaleSlicesOnExit,
    CdiWithoutSpec,
    WrongAttribute { name: String, value: String },
    WrongCapacity { name: String, value: String },
    PhantomDevices(u32),
    NoOwnerReference,
    WipeSlicesOnStart,
    PrepareWrongDevice,
    PrepareFirstDeviceOnly,
    PrepareForeignClaims,
    ResetDevicesOnStart,
    RegisterFirstStartOnly,
    RegisterV1beta1Only,
    WrongVersion(String),
    NeverUnprepare,
    NoSliceReconcile,
    ForeignSlice(String),
    StrictAuthority,
    TrustCheckpoint,
    TrustPublished,
    ExpireCdiSpec(u32),
    PrepareEveryResult,
    KeyByName,
    IgnoreConfig,
    ConfigToEveryRequest,
    ClassConfigWins,
    DropUnlistedClaims,
    UnprepareNeedsClaim,
    StaleDevices,
    NoGenerationBump,
    UpgradeRenamesDevices,
    UpgradeForgetsClaims,
    UpgradeRemovesSockets,
    ExitOnRefusedRegistration,
    DuplicateDevice,
    NoNodePolicy,
    ConfigByExactRequest,
    SubrequestRequestNames,
    RefuseInUse,
    UntaintedUnhealthy,
    CountersLarger,
    PartitionConsumesNothing,
    SliceSyncDelay(u32),
    PrepareWholeDevice,
    NoDeviceStatus,
    NoHealth,
    FirstRequestNames,
    HealthWrongDevice,
    NoMultipleAllocations,
    ShareIdIgnored,
    UnprepareAllShares,
    NeverAttach,
    NoBindingConditions,
}

/// One fault as `--fault` and inventory files spell it.
pub struct FaultSpec {
    pub name: &'static str,
    /// What the driver does with the fault on, in one line (`--help` lists these).
    pub doc: &'static str,
    pub form: Form,
}

pub enum Form {
    /// `NAME`: the name alone is the fault.
    Bare(Fault),
    /// `NAME=ARG`.
    Arg {
        /// The argument's placeholder in usage and error messages, such as `N`.
        arg: &'static str,
        /// A valid argument, for examples and tests.
        sample: &'static str,
        /// `Err(None)` when the argument does not have the form `arg` at all (the message
        /// then shows the form); `Err(Some(reason))` when it has but is refused.
        parse: fn(&str) -> Result<Fault, Option<&'static str>>,
        /// The argument of a fault of this row's variant; `None` for any other variant.
        show: fn(&Fault) -> Option<String>,
    },
}

impl FaultSpec {
    /// `name` or `name=ARG`.
    pub fn usage(&self) -> String {
        match &self.form {
            Form::Bare(_) => self.name.to_string(),
            Form::Arg { arg, .. } => format!("{}={arg}", self.name),
        }
    }
}

/// Free text must be non-empty: `wrong-version=` would otherwise state an empty version.
fn text(arg: &str, fault: fn(String) -> Fault) -> Result<Fault, Option<&'static str>> {
    if arg.is_empty() { Err(None) } else { Ok(fault(arg.to_string())) }
}

/// In the order of the README's table of faults, which a unit test holds to it.
pub const TABLE: &[FaultSpec] = &[
    // Breaks the plugin-tier checks that begin with a prepare (`plugin.prepare.allocated-claim`,
    // …); a kubelet retries, so workloads only start late.
    FaultSpec {
        name: "fail-prepare",
        doc: "the first N NodePrepareResources calls fail with a gRPC error (UNAVAILABLE)",
        form: Form::Arg {
            arg: "N",
            sample: "3",
            parse: |n| n.parse().map(Fault::FailPrepare).map_err(|_| Some("N must be a whole number")),
            show: |f| if let Fault::FailPrepare(n) = f { Some(n.to_string()) } else { None },
        },
    },
    // Breaks the plugin-tier prepare checks and everything that needs a running workload
    // (`workload.sees-devices`, …): the pod never starts.
    FaultSpec {
        name: "hang-prepare",
        doc: "NodePrepareResources never answers, past the kubelet's 45 s call timeout",
        form: Form::Bare(Fault::HangPrepare),
    },
    // Like a crash. Breaks what `hang-prepare` breaks.
    FaultSpec {
        name: "exit-on-prepare",
        doc: "the process exits (status 1, no clean-up) when a NodePrepareResources call arrives",
        form: Form::Bare(Fault::ExitOnPrepare),
    },
    // Breaks `plugin.prepare.idempotent`; a kubelet calls Prepare once per claim and node (not
    // again after its restart), so nothing else.
    FaultSpec {
        name: "non-idempotent-prepare",
        doc: "every prepare of the same claim returns new CDI device IDs and rewrites the spec with them",
        form: Form::Bare(Fault::NonIdempotentPrepare),
    },
    // Claims prepared before a restart are forgotten: their unprepare succeeds but leaves the
    // CDI spec behind. Breaks `plugin.restart.keeps-state` and `driver.restart.no-leaks`.
    FaultSpec {
        name: "lose-checkpoint",
        doc: "the checkpoint of prepared claims is deleted at start-up",
        form: Form::Bare(Fault::LoseCheckpoint),
    },
    // Breaks no guarantee: the DRA contract leaves removal on exit to the driver (the upstream
    // helper keeps slices by default), and the kubelet's wipe and the Node's garbage
    // collection remove them.
    FaultSpec {
        name: "stale-slices-on-exit",
        doc: "the slices stay after a clean shutdown even with --remove-slices-on-exit",
        form: Form::Bare(Fault::StaleSlicesOnExit),
    },
    // The runtime cannot resolve the IDs. Breaks `plugin.cdi.resolvable` and every running
    // workload.
    FaultSpec {
        name: "cdi-without-spec",
        doc: "prepare returns CDI device IDs but writes no CDI spec",
        form: Form::Bare(Fault::CdiWithoutSpec),
    },
    // Breaks `plugin.slices.match-inventory`.
    FaultSpec {
        name: "wrong-attribute",
        doc: "every published device carries attribute NAME = VALUE instead of the inventory's value",
        form: Form::Arg {
            arg: "NAME=VALUE",
            sample: "model=h100",
            parse: |arg| match arg.split_once('=') {
                Some((name, value)) if !name.is_empty() => {
                    Ok(Fault::WrongAttribute { name: name.to_string(), value: value.to_string() })
                }
                _ => Err(None),
            },
            show: |f| {
                if let Fault::WrongAttribute { name, value } = f { Some(format!("{name}={value}")) } else { None }
            },
        },
    },
    // Like a driver that reports memory in the wrong unit. The scheduler then allocates
    // requests no device can meet. Breaks `plugin.slices.match-inventory`,
    // `claim.impossible.capacity` (with a value above the inventory's) and
    // `claim.impossible.explained`.
    FaultSpec {
        name: "wrong-capacity",
        doc: "every published device has capacity NAME = VALUE, a quantity, instead of the inventory's",
        form: Form::Arg {
            arg: "NAME=VALUE",
            sample: "memory=1Ti",
            parse: |arg| match arg.split_once('=') {
                Some((name, value)) if !name.is_empty() => {
                    if crate::inventory::valid_quantity(value) {
                        Ok(Fault::WrongCapacity { name: name.to_string(), value: value.to_string() })
                    } else {
                        Err(Some("VALUE must be a quantity such as 80Gi or 4"))
                    }
                }
                _ => Err(None),
            },
            show: |f| if let Fault::WrongCapacity { name, value } = f { Some(format!("{name}={value}")) } else { None },
        },
    },
    // Like a driver that counts a device twice or keeps a removed one. The scheduler allocates
    // them; prepare refuses them. Breaks `plugin.slices.match-inventory`, and with enough
    // phantoms `claim.impossible.count`, `claim.impossible.explained` and `capacity.recovered`.
    FaultSpec {
        name: "phantom-devices",
        doc: "also publishes N devices the node does not have, copies of its last device named phantom-<i>",
        form: Form::Arg {
            arg: "N",
            sample: "32",
            parse: |n| match n.parse() {
                Ok(n) if n > 0 => Ok(Fault::PhantomDevices(n)),
                _ => Err(Some("N must be a whole number above 0")),
            },
            show: |f| if let Fault::PhantomDevices(n) = f { Some(n.to_string()) } else { None },
        },
    },
    // As drivers written without the upstream helper often forget. Breaks
    // `plugin.slices.owned-by-node` and `node.removal.slices-gone`: nothing removes the slices
    // of a deleted Node.
    FaultSpec {
        name: "no-owner-reference",
        doc: "the slices carry no controller ownerRef to the Node",
        form: Form::Bare(Fault::NoOwnerReference),
    },
    // A restart makes the devices vanish for a moment and changes the slices. Breaks
    // `driver.restart.slices-kept`.
    FaultSpec {
        name: "wipe-slices-on-start",
        doc: "every start deletes the node's slices before publishing them again",
        form: Form::Bare(Fault::WipeSlicesOnStart),
    },
    // The response still names the allocated devices, like a driver that ignores the
    // allocation result. Breaks `workload.sees-devices`, `isolation.exclusive` and
    // `limits.max-devices-per-claim`.
    FaultSpec {
        name: "prepare-wrong-device",
        doc: "the CDI spec of every claim exposes the node's first device, whatever was allocated",
        form: Form::Bare(Fault::PrepareWrongDevice),
    },
    // Like a driver whose loop over the allocation results stops early. Breaks
    // `limits.max-devices-per-claim` and `workload.sees-devices` for multi-device claims.
    FaultSpec {
        name: "prepare-first-device-only",
        doc: "the CDI spec of a claim exposes only its first allocated device",
        form: Form::Bare(Fault::PrepareFirstDeviceOnly),
    },
    // A claim allocated on another node gets this node's devices of the same name. Breaks
    // `plugin.prepare.refuses-foreign-node`.
    FaultSpec {
        name: "prepare-foreign-claims",
        doc: "prepare does not check that the allocated devices are in this node's pool",
        form: Form::Bare(Fault::PrepareForeignClaims),
    },
    // As a GPU reset during initialisation does. Breaks `driver.restart.workload-keeps-devices`
    // and `driver.restart.long-outage`.
    FaultSpec {
        name: "reset-devices-on-start",
        doc: "at start-up the driver resets the devices its checkpoint lists as prepared, killing their processes",
        form: Form::Bare(Fault::ResetDevicesOnStart),
    },
    // A restarted driver serves DRA but the kubelet never learns it is back. Breaks
    // `plugin.restart.keeps-state` and `driver.restart.new-claims-work`, and
    // `node.restart.driver-recovers` on the node where the driver restart ran first (a kubelet
    // restart alone does not restart the driver: it finds the first start's socket).
    FaultSpec {
        name: "register-first-start-only",
        doc: "only the first start on a state dir offers the registration socket",
        form: Form::Bare(Fault::RegisterFirstStartOnly),
    },
    // Like a driver whose registration was not updated for the v1 API; a kubelet falls back to
    // v1beta1 and everything else works. Breaks `plugin.registration.v1` (a `should`).
    FaultSpec {
        name: "register-v1beta1-only",
        doc: "GetInfo offers only v1beta1.DRAPlugin; both services are still served",
        form: Form::Bare(Fault::RegisterV1beta1Only),
    },
    // Like a build without its release stamp. Breaks `versions.driver`.
    FaultSpec {
        name: "wrong-version",
        doc: "--version reports X instead of the driver's version",
        form: Form::Arg {
            arg: "X",
            sample: "0.0.1",
            parse: |v| text(v, Fault::WrongVersion),
            show: |f| if let Fault::WrongVersion(v) = f { Some(v.clone()) } else { None },
        },
    },
    // Breaks `plugin.unprepare.removes-state`, `plugin.unprepare.unknown-claim`,
    // `capacity.recovered` and `node.restart.driver-recovers`: pod deletions block and devices
    // stay held.
    FaultSpec {
        name: "never-unprepare",
        doc: "NodeUnprepareResources fails for every claim",
        form: Form::Bare(Fault::NeverUnprepare),
    },
    // Like a driver that creates its slices once instead of running the upstream helper's
    // reconciling controller. Whoever deletes them leaves the node without devices until the
    // driver restarts; the kubelet does that at every start. Breaks
    // `node.restart.driver-recovers`.
    FaultSpec {
        name: "no-slice-reconcile",
        doc: "the slices are written at start-up and when the inventory changes, never because the slices changed",
        form: Form::Bare(Fault::NoSliceReconcile),
    },
    // Breaks `plugin.slices.owned-by-node`.
    FaultSpec {
        name: "foreign-slice",
        doc: "also publishes a slice for NODE's pool, which this plugin does not run on",
        form: Form::Arg {
            arg: "NODE",
            sample: "node-b",
            parse: |node| text(node, Fault::ForeignSlice),
            show: |f| if let Fault::ForeignSlice(node) = f { Some(node.clone()) } else { None },
        },
    },
    // The kubelet's plugin watcher sends the socket path as `:authority` (percent-encoded by
    // grpc-go), so GetInfo fails with `RST_STREAM … PROTOCOL_ERROR` and the plugin never
    // registers, as every tonic driver without `dracheck_kubelet_api::authority`'s fix does on
    // a real node. Breaks `plugin.registration.info` and all that needs a registered plugin.
    FaultSpec {
        name: "strict-authority",
        doc: "the registration socket is served by a plain tonic (h2) server, which resets calls whose \
              :authority is no valid URI authority",
        form: Form::Bare(Fault::StrictAuthority),
    },
    // After a reboot the CDI specs (tmpfs) are gone while the checkpoints (disk) are kept; the
    // kubelet prepares the pods' claims again and gets IDs that nothing resolves, so the pods
    // stay in CreateContainerError. Breaks `node.reboot.workloads-resume`.
    FaultSpec {
        name: "trust-checkpoint",
        doc: "a prepare of a claim the driver's checkpoint lists answers from the checkpoint without writing its CDI \
              spec again",
        form: Form::Bare(Fault::TrustCheckpoint),
    },
    // Like a driver that keeps "published" in its state and skips the start-up publish. After
    // an outage past the kubelet's 30 s wipe delay (or a reboot, whose kubelet wipes at
    // start-up) the node stays without devices. Breaks `driver.restart.long-outage` (and
    // `node.reboot.workloads-resume` where the wipe came before the driver).
    FaultSpec {
        name: "trust-published",
        doc: "a restarted driver takes the slices it published before to be in place and writes none until they \
              change",
        form: Form::Bare(Fault::TrustPublished),
    },
    // Like a driver that takes a CDI spec to be used up once the container is created. A
    // container that exits and is restarted is a new container, whose CDI devices the runtime
    // resolves again: it cannot be created. Breaks `lifecycle.container-restart`.
    FaultSpec {
        name: "expire-cdi-spec",
        doc: "a claim's CDI spec is removed SECS seconds after the prepare that wrote it, the claim still prepared",
        form: Form::Arg {
            arg: "SECS",
            sample: "10",
            parse: |n| match n.parse() {
                Ok(0) => Err(Some("SECS must be at least 1")),
                Ok(secs) => Ok(Fault::ExpireCdiSpec(secs)),
                Err(_) => Err(Some("SECS must be a whole number")),
            },
            show: |f| if let Fault::ExpireCdiSpec(n) = f { Some(n.to_string()) } else { None },
        },
    },
    // Like a driver that never looks at a result's driver name: a claim with devices of
    // several drivers fails to prepare on each. Breaks `plugin.prepare.own-results-only`.
    FaultSpec {
        name: "prepare-every-result",
        doc: "prepare takes every allocation result of a claim as its own, also those of other drivers",
        form: Form::Bare(Fault::PrepareEveryResult),
    },
    // Like a driver whose state is keyed by claim name: of two claims of one name (two
    // namespaces, or a claim made again while a force-deleted pod's is still prepared) the
    // second gets the first's devices. Breaks `plugin.prepare.keyed-by-uid`.
    FaultSpec {
        name: "key-by-name",
        doc: "a prepare finds a claim in the checkpoint by its name, not its UID, and answers with what it finds",
        form: Form::Bare(Fault::KeyByName),
    },
    // Like a driver that prepares every device the same way. Breaks `config.class-and-claim`
    // and `config.per-request`.
    FaultSpec {
        name: "ignore-config",
        doc: "prepare applies no opaque configuration, neither the class's nor the claim's",
        form: Form::Bare(Fault::IgnoreConfig),
    },
    // Like a driver that never reads a config's `requests`: with a config per request, every
    // container gets every request's settings. Breaks `config.per-request`.
    FaultSpec {
        name: "config-to-every-request",
        doc: "every opaque configuration of a claim is applied to every device, whichever requests it names",
        form: Form::Bare(Fault::ConfigToEveryRequest),
    },
    // Like a driver that applies the configs in the wrong order. Breaks
    // `config.class-and-claim` and `config.per-request` (its first request is configured by
    // both).
    FaultSpec {
        name: "class-config-wins",
        doc: "where the class's and the claim's configuration set the same value, the class's is applied",
        form: Form::Bare(Fault::ClassConfigWins),
    },
    // Like a driver that takes each prepare call for the node's whole set of claims and
    // reconciles its state to it: the claims the call does not name are undone, though their
    // pods still use them. The kubelet names only claims not yet prepared on the node, so a
    // pod that shares a prepared claim and brings a new one cannot start. Breaks
    // `lifecycle.prepared-and-new`.
    FaultSpec {
        name: "drop-unlisted-claims",
        doc: "a prepare undoes (CDI spec and checkpoint entry) every prepared claim the call does not name",
        form: Form::Bare(Fault::DropUnlistedClaims),
    },
    // Like a driver that reads the claim from the API server to learn what to undo (its
    // allocation, its config) instead of from its own checkpoint. A force-deleted pod's claim
    // may be gone from the API before the kubelet unprepares it; the unprepare then fails
    // for good, the kubelet keeps the claim in its cache, and a new claim of the same name
    // never gets prepared on the node. Breaks `lifecycle.force-delete`.
    FaultSpec {
        name: "unprepare-needs-claim",
        doc: "an unprepare of a prepared claim reads the claim from the API server and fails when it is gone or \
              was made again",
        form: Form::Bare(Fault::UnprepareNeedsClaim),
    },
    // Like a driver that merges what it finds with what it published before instead of
    // publishing its inventory as it is: a device taken out stays offered, and the scheduler
    // allocates a device the node no longer has. Breaks `plugin.slices.follow-inventory`.
    FaultSpec {
        name: "stale-devices",
        doc: "devices published before that the inventory no longer has stay published",
        form: Form::Bare(Fault::StaleDevices),
    },
    // Like a driver that updates its slices in place: consumers that take the newest
    // generation of a pool as one consistent set cannot tell the new devices from the old.
    // Breaks `plugin.slices.follow-inventory`.
    FaultSpec {
        name: "no-generation-bump",
        doc: "a change of the inventory is published under the pool generation of the slices already there",
        form: Form::Bare(Fault::NoGenerationBump),
    },
    // Like a new release that names its devices another way (a new naming scheme, an index
    // that starts elsewhere): through a rolling update the pool changes under the claims
    // allocated from it, and the old instance, still running, writes its names back. Breaks
    // `driver.upgrade.rolling`.
    FaultSpec {
        name: "upgrade-renames-devices",
        doc: "an instance started with --instance publishes every device as <name>-<instance>",
        form: Form::Bare(Fault::UpgradeRenamesDevices),
    },
    // Like a new release that keeps its state elsewhere or in a new format and starts empty:
    // the claims the old instance prepared are unknown to the new one, whose unprepare of
    // them succeeds and leaves their CDI specs behind. Breaks `driver.upgrade.rolling`.
    FaultSpec {
        name: "upgrade-forgets-claims",
        doc: "an instance started with --instance deletes the shared checkpoint of prepared claims at start-up",
        form: Form::Bare(Fault::UpgradeForgetsClaims),
    },
    // Like a driver that clears "stale" sockets at start-up: the running old instance loses
    // its sockets, the kubelet unregisters it, and when the new instance fails and goes, no
    // instance is left to serve the node. Breaks `driver.upgrade.failed`.
    FaultSpec {
        name: "upgrade-removes-sockets",
        doc: "an instance started with --instance deletes the other sockets of its driver (registration and DRA) at \
              start-up",
        form: Form::Bare(Fault::UpgradeRemovesSockets),
    },
    // As CSI's node-driver-registrar does: a refused registration ends the process, and the
    // plugin is gone until its container is restarted. Breaks `plugin.registration.recovers`.
    FaultSpec {
        name: "exit-on-refused-registration",
        doc: "a NotifyRegistrationStatus that reports an error ends the process (status 1)",
        form: Form::Bare(Fault::ExitOnRefusedRegistration),
    },
    // Like a driver whose slices overlap (a device listed by two of its sources): the
    // scheduler takes the whole pool for invalid and allocates nothing of the node. Breaks
    // `plugin.slices.match-inventory` and everything that needs an allocation.
    FaultSpec {
        name: "duplicate-device",
        doc: "the pool gets one more slice that lists its first device again",
        form: Form::Bare(Fault::DuplicateDevice),
    },
    // Like a chart that binds its plugin's account to the rights it needs and ships no
    // admission policy: every node's plugin may write every node's slices. The process itself
    // is unchanged; the mock's installation (`installation.rs`) is. Breaks
    // `plugin.slices.own-node-only`.
    FaultSpec {
        name: NO_NODE_POLICY,
        doc: "its installation (the ServiceAccount and rights the local cluster applies for it) lacks the admission policy that holds each node's plugin to its own node's ResourceSlices",
        form: Form::Bare(Fault::NoNodePolicy),
    },
    // Like a driver written before `firstAvailable` that matches a configuration to a result
    // by comparing request names (`slices.Contains(config.Requests, result.Request)`): a
    // configuration given for a whole request (`gpu`) never reaches a device allocated for one
    // of its alternatives (`gpu/small`). Breaks `prioritized.chosen-subrequest`.
    FaultSpec {
        name: "config-by-exact-request",
        doc: "an opaque configuration reaches a device only when it names the result's request exactly: one for a \
              whole request misses the devices of its alternatives (`request/alternative`)",
        form: Form::Bare(Fault::ConfigByExactRequest),
    },
    // Like a driver that speaks the kubelet's gRPC API itself and copies each result's request
    // name into its answer (the upstream helper strips the alternative): the kubelet gives a
    // container that names the request (`gpu`) no device of a result for `gpu/small`. Breaks
    // `prioritized.chosen-subrequest`.
    FaultSpec {
        name: "subrequest-request-names",
        doc: "a prepare answers the request names of results for an alternative as `request/alternative`, not as the \
              request a container names",
        form: Form::Bare(Fault::SubrequestRequestNames),
    },
    // Like a driver that fills in the request names of its answer from the claim's first
    // result: the kubelet gives each container the devices whose request names include the
    // request it uses, so a container of another request gets none (and one of the first
    // request all). Breaks what maps requests to containers: `config.per-request`,
    // `prioritized.chosen-subrequest`, `extended-resource.prepared`.
    FaultSpec {
        name: "first-request-names",
        doc: "a prepare answers every device of a claim with the request name of the claim's first result",
        form: Form::Bare(Fault::FirstRequestNames),
    },
    // Like a driver that guards against double allocation itself: it refuses to prepare a
    // device another prepared claim holds, which admin access (a monitoring claim on a device
    // in use) needs it to do. Breaks `admin-access.in-use-device`.
    FaultSpec {
        name: "refuse-in-use",
        doc: "a prepare fails for a device that another prepared claim on the node holds",
        form: Form::Bare(Fault::RefuseInUse),
    },
    // Like a driver whose health checks find a faulty device and log it, but publish it as
    // before: the scheduler goes on handing it out. Breaks `plugin.slices.taints-unhealthy`.
    FaultSpec {
        name: "untainted-unhealthy",
        doc: "a device the inventory marks unhealthy is published without its taint",
        form: Form::Bare(Fault::UntaintedUnhealthy),
    },
    // Like a driver that publishes a partitionable GPU's counters from a wrong table (twice
    // its memory): the scheduler may hand out partitions the device cannot hold together.
    // Breaks `plugin.slices.match-inventory`.
    FaultSpec {
        name: "counters-larger",
        doc: "every shared counter is published at twice the inventory's value",
        form: Form::Bare(Fault::CountersLarger),
    },
    // Like a driver that publishes partitions without what they take from the physical
    // device: the scheduler may allocate overlapping partitions together. Breaks
    // `plugin.slices.match-inventory`.
    FaultSpec {
        name: "partition-consumes-nothing",
        doc: "partitions are published without consumesCounters",
        form: Form::Bare(Fault::PartitionConsumesNothing),
    },
    // Breaks no guarantee: upstream's ResourceSlice controller re-syncs a pool 30 s
    // (`DefaultSyncDelay`) after the latest event about its slices and has no periodic resync,
    // so a driver on it publishes the slices a kubelet wiped at start-up 30 s later. The suite
    // must wait for that, not race it.
    FaultSpec {
        name: "slice-sync-delay",
        doc: "slices someone deleted or edited are written again SECS seconds after the first event about them, as \
              upstream's helper does (no periodic resync either)",
        form: Form::Arg {
            arg: "SECS",
            sample: "30",
            parse: |n| match n.parse() {
                Ok(0) => Err(Some("SECS must be at least 1")),
                Ok(secs) => Ok(Fault::SliceSyncDelay(secs)),
                Err(_) => Err(Some("SECS must be a whole number")),
            },
            show: |f| if let Fault::SliceSyncDelay(n) = f { Some(n.to_string()) } else { None },
        },
    },
    // Like a driver that sets up the physical device for any partition of it (a MIG slice
    // prepared as the whole GPU). Breaks `partitionable.prepared-partition`.
    FaultSpec {
        name: "prepare-whole-device",
        doc: "a prepare of a partition sets up the partition that takes its whole device instead",
        form: Form::Bare(Fault::PrepareWholeDevice),
    },
    // Like a driver that prepares devices but never reports them in the claim's status, so
    // users and controllers cannot see their state. Breaks `device-status.reported`.
    FaultSpec {
        name: "no-device-status",
        doc: "a prepared claim's status.devices gets no entry for its devices",
        form: Form::Bare(Fault::NoDeviceStatus),
    },
    // Like a driver without health monitoring: the kubelet never learns that a device turned
    // faulty. Breaks `health.pod-status`; the plugin-tier check is then skipped, since the
    // service is optional.
    FaultSpec {
        name: "no-health",
        doc: "the optional DRAResourceHealth service is neither offered at registration nor served",
        form: Form::Bare(Fault::NoHealth),
    },
    // Like an off-by-one between the hardware's index and the published device. Breaks
    // `plugin.health.reported` and `health.pod-status`.
    FaultSpec {
        name: "health-wrong-device",
        doc: "each device's health is reported under the next device's name",
        form: Form::Bare(Fault::HealthWrongDevice),
    },
    // Like a driver that publishes a shareable GPU as an ordinary one: each claim takes it
    // whole, so the claims a platform promised to share it wait. Breaks
    // `plugin.slices.match-inventory` and `consumable.shared`.
    FaultSpec {
        name: "no-multiple-allocations",
        doc: "devices that allow multiple allocations are published without allowMultipleAllocations and request policies",
        form: Form::Bare(Fault::NoMultipleAllocations),
    },
    // Like a driver that keys what it sets up for a shared device by the device alone: the
    // first share's setup is handed to every later share. Breaks `consumable.prepared-share`
    // and `plugin.shares.independent`.
    FaultSpec {
        name: "share-id-ignored",
        doc: "a share of a device is prepared with the share ID and capacity of the first share prepared on it, which the answer then names",
        form: Form::Bare(Fault::ShareIdIgnored),
    },
    // Like a driver that tears a shared device's sharing down when one of its users goes.
    // Breaks `plugin.shares.independent`.
    FaultSpec {
        name: "unprepare-all-shares",
        doc: "unprepare of a claim with a share of a device also undoes every other claim's share of it",
        form: Form::Bare(Fault::UnprepareAllShares),
    },
    // Like a driver whose controller never finishes attaching (a partition never carved out):
    // the scheduler holds the pod's binding until its timeout. Breaks
    // `binding-conditions.bound-when-ready` and the partitions' checks, whose pods never bind.
    FaultSpec {
        name: "never-attach",
        doc: "the binding conditions of allocated devices are never set in the claim's status",
        form: Form::Bare(Fault::NeverAttach),
    },
    // Like a driver that publishes devices that need attaching as ready ones: pods bind and
    // start before the device is there. Breaks `plugin.slices.match-inventory` and
    // `binding-conditions.bound-when-ready`.
    FaultSpec {
        name: "no-binding-conditions",
        doc: "devices are published without their bindingConditions and bindingFailureConditions",
        form: Form::Bare(Fault::NoBindingConditions),
    },
];

/// The fault that changes the mock's installation rather than its process.
pub const NO_NODE_POLICY: &str = "no-node-policy";

/// The faults' usages, `fail-prepare=N, hang-prepare, …`, for error messages.
pub fn names() -> String {
    TABLE.iter().map(FaultSpec::usage).collect::<Vec<_>>().join(", ")
}

/// One fault a line with what it does, for `--fault`'s long help.
pub fn help() -> String {
    let width = TABLE.iter().map(|spec| spec.usage().len()).max().unwrap_or(0);
    let mut help = String::from("Switch on a fault (repeatable; see README.md):");
    for spec in TABLE {
        help += &format!("\n  {:width$}  {}", spec.usage(), spec.doc);
    }
    help
}

impl FromStr for Fault {
    type Err = String;

    fn from_str(s: &str) -> Result<Fault, String> {
        let (name, arg) = match s.split_once('=') {
            Some((n, a)) => (n, Some(a)),
            None => (s, None),
        };
        let Some(spec) = TABLE.iter().find(|spec| spec.name == name) else {
            return Err(format!("unknown fault {name:?}; known faults: {}", names()));
        };
        match (&spec.form, arg) {
            (Form::Bare(fault), None) => Ok(fault.clone()),
            (Form::Bare(_), Some(_)) => Err(format!("fault {name:?} takes no argument (got {s:?})")),
            (Form::Arg { arg: form, parse, .. }, arg) => {
                let needs = || format!("fault {name:?} needs an argument: {name}={form}");
                let arg = arg.ok_or_else(needs)?;
                parse(arg).map_err(|refusal| match refusal {
                    Some(reason) => format!("{name}={arg}: {reason}"),
                    None => needs(),
                })
            }
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for spec in TABLE {
            match &spec.form {
                Form::Bare(fault) if fault == self => return f.write_str(spec.name),
                Form::Bare(_) => {}
                Form::Arg { show, .. } => {
                    if let Some(arg) = show(self) {
                        return write!(f, "{}={arg}", spec.name);
                    }
                }
            }
        }
        unreachable!("fault {self:?} has no row in faults::TABLE")
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
    /// As given, repeats included: of faults with one value the last one given counts.
    given: Vec<Fault>,
}

impl Faults {
    pub fn is_empty(&self) -> bool {
        self.given.is_empty()
    }

    /// Whether `fault` is on; meant for the faults without argument.
    pub fn has(&self, fault: &Fault) -> bool {
        self.given.contains(fault)
    }

    fn last<T>(&self, pick: impl Fn(&Fault) -> Option<T>) -> Option<T> {
        self.given.iter().rev().find_map(pick)
    }

    /// How many prepare calls fail: `fail-prepare=N`, else 0.
    pub fn fail_prepare(&self) -> u32 {
        self.last(|f| if let Fault::FailPrepare(n) = f { Some(*n) } else { None }).unwrap_or(0)
    }

    /// How long after an event about its slices the driver writes them again:
    /// `slice-sync-delay=SECS`; `None`: at once.
    pub fn slice_sync_delay(&self) -> Option<std::time::Duration> {
        self.last(|f| {
            if let Fault::SliceSyncDelay(n) = f { Some(std::time::Duration::from_secs((*n).into())) } else { None }
        })
    }

    /// How many devices to make up: `phantom-devices=N`, else 0.
    pub fn phantom_devices(&self) -> u32 {
        self.last(|f| if let Fault::PhantomDevices(n) = f { Some(*n) } else { None }).unwrap_or(0)
    }

    /// How long a CDI spec stays after its prepare: `expire-cdi-spec=SECS`.
    pub fn expire_cdi_spec(&self) -> Option<std::time::Duration> {
        self.last(|f| {
            if let Fault::ExpireCdiSpec(n) = f { Some(std::time::Duration::from_secs((*n).into())) } else { None }
        })
    }

    /// The `wrong-attribute` (NAME, VALUE) pairs, in the order given.
    pub fn wrong_attributes(&self) -> impl Iterator<Item = (&str, &str)> {
        self.given.iter().filter_map(|f| match f {
            Fault::WrongAttribute { name, value } => Some((name.as_str(), value.as_str())),
            _ => None,
        })
    }

    /// The `wrong-capacity` (NAME, VALUE) pairs, in the order given.
    pub fn wrong_capacities(&self) -> impl Iterator<Item = (&str, &str)> {
        self.given.iter().filter_map(|f| match f {
            Fault::WrongCapacity { name, value } => Some((name.as_str(), value.as_str())),
            _ => None,
        })
    }

    /// The nodes of the `foreign-slice` faults, in the order given.
    pub fn foreign_slices(&self) -> impl Iterator<Item = &str> {
        self.given.iter().filter_map(|f| if let Fault::ForeignSlice(node) = f { Some(node.as_str()) } else { None })
    }
}

/// Each fault once, in the order first given.
impl fmt::Display for Faults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut shown: Vec<&Fault> = Vec::new();
        for fault in &self.given {
            if !shown.contains(&fault) {
                shown.push(fault);
            }
        }
        let names: Vec<String> = shown.iter().map(|fault| fault.to_string()).collect();
        f.write_str(&names.join(", "))
    }
}

impl FromIterator<Fault> for Faults {
    fn from_iter<I: IntoIterator<Item = Fault>>(faults: I) -> Faults {
        Faults { given: faults.into_iter().collect() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A valid spelling of each fault.
    fn samples() -> impl Iterator<Item = String> {
        TABLE.iter().map(|spec| match &spec.form {
            Form::Bare(_) => spec.name.to_string(),
            Form::Arg { sample, .. } => format!("{}={sample}", spec.name),
        })
    }

    #[test]
    fn every_fault_round_trips_through_its_name() {
        for s in samples() {
            assert_eq!(s.parse::<Fault>().unwrap().to_string(), s);
        }
    }

    #[test]
    fn every_fault_has_one_row() {
        let mut names: Vec<&str> = TABLE.iter().map(|spec| spec.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), TABLE.len(), "a name has two rows");
        let faults: Vec<Fault> = samples().map(|s| s.parse().unwrap()).collect();
        for (i, fault) in faults.iter().enumerate() {
            let same_kind =
                faults.iter().filter(|other| std::mem::discriminant(*other) == std::mem::discriminant(fault));
            assert_eq!(same_kind.count(), 1, "{} and another row make the same variant", TABLE[i].name);
        }
    }

    /// The README's table of faults and what each does lists exactly the table's usages.
    #[test]
    fn readme_lists_every_fault() {
        let readme = include_str!("../README.md");
        let listed: Vec<&str> = readme
            .lines()
            .skip_while(|line| *line != "| fault | what the driver does |")
            .skip(2)
            .take_while(|line| line.starts_with('|'))
            .filter_map(|line| line.split('`').nth(1))
            .collect();
        let usages: Vec<String> = TABLE.iter().map(FaultSpec::usage).collect();
        assert_eq!(listed, usages, "drivers/mock/README.md's fault table and faults::TABLE differ");
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
        assert!("foreign-slice=".parse::<Fault>().unwrap_err().contains("foreign-slice=NODE"));
        let unknown = "crash".parse::<Fault>().unwrap_err();
        assert!(unknown.contains("unknown fault") && unknown.contains("never-unprepare"), "{unknown}");
        assert!(unknown.contains("known faults: fail-prepare=N, hang-prepare, "), "{unknown}");
    }

    #[test]
    fn faults_combine() {
        let set: Faults = ["fail-prepare=2", "foreign-slice=b", "foreign-slice=c", "fail-prepare=2"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(set.fail_prepare(), 2);
        assert_eq!(set.foreign_slices().collect::<Vec<_>>(), ["b", "c"]);
        assert!(!set.has(&Fault::HangPrepare));
        assert_eq!(set.to_string(), "fail-prepare=2, foreign-slice=b, foreign-slice=c");
    }

    #[test]
    fn the_last_value_counts() {
        let set: Faults = ["phantom-devices=1", "phantom-devices=4"].iter().map(|s| s.parse().unwrap()).collect();
        assert_eq!(set.phantom_devices(), 4);
        assert_eq!(Faults::default().fail_prepare(), 0);
    }
}
