//! Fault switches: each makes the driver break exactly one guarantee of the DRA driver
//! contract, so that the suite can prove it notices. The guarantee IDs in the docs are the
//! ones the suite reports; drivers/mock/README.md has the same table.

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// `fail-prepare=N`: the first N NodePrepareResources calls fail with a gRPC error
    /// (`UNAVAILABLE`). Breaks `plugin.prepare.succeeds`; a kubelet retries, so the workload
    /// starts late.
    FailPrepare(u32),
    /// `hang-prepare`: NodePrepareResources never answers, past kubelet's 45 s call timeout.
    /// Breaks `plugin.prepare.timely` (and `workload.runs`: the pod stays Pending).
    HangPrepare,
    /// `exit-on-prepare`: the process exits (status 1, no cleanup, like a crash) when a
    /// NodePrepareResources call arrives. Breaks `workload.runs`.
    ExitOnPrepare,
    /// `non-idempotent-prepare`: every prepare of the same claim returns new CDI device IDs
    /// (and rewrites the spec with them). Breaks `plugin.prepare.idempotent`.
    NonIdempotentPrepare,
    /// `lose-checkpoint`: the checkpoint is deleted at start, so claims prepared before a
    /// restart are forgotten: their unprepare succeeds but leaves the CDI spec behind.
    /// Breaks `plugin.restart.keeps-state`.
    LoseCheckpoint,
    /// `stale-slices-on-exit`: the slices stay after a clean shutdown even with
    /// `--remove-slices-on-exit`. Breaks `slices.removed-on-exit`.
    StaleSlicesOnExit,
    /// `cdi-without-spec`: prepare returns CDI device IDs but writes no CDI spec, so the
    /// runtime cannot resolve them. Breaks `plugin.cdi.resolvable`.
    CdiWithoutSpec,
    /// `wrong-attribute=NAME=VALUE`: every published device carries attribute NAME = VALUE
    /// instead of the inventory's value. Breaks `slices.match-inventory`.
    WrongAttribute { name: String, value: String },
    /// `never-unprepare`: NodeUnprepareResources fails for every claim. Breaks
    /// `lifecycle.unprepare`.
    NeverUnprepare,
    /// `foreign-slice=NODE`: also publishes a slice for NODE's pool, which this plugin does
    /// not run on. Breaks `slices.owned-by-node`.
    ForeignSlice(String),
}

pub const NAMES: &str = "fail-prepare=N, hang-prepare, exit-on-prepare, non-idempotent-prepare, lose-checkpoint, \
                         stale-slices-on-exit, cdi-without-spec, wrong-attribute=NAME=VALUE, never-unprepare, \
                         foreign-slice=NODE";

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
            Fault::NeverUnprepare => f.write_str("never-unprepare"),
            Fault::ForeignSlice(node) => write!(f, "foreign-slice={node}"),
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
    pub never_unprepare: bool,
    pub foreign_slices: Vec<String>,
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
                Fault::NeverUnprepare => set.never_unprepare = true,
                Fault::ForeignSlice(node) => set.foreign_slices.push(node.clone()),
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
            "never-unprepare",
            "foreign-slice=node-b",
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
