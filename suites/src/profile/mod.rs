//! Device profiles: what a platform publishes about a class of devices, and what the suite
//! checks. A profile is a DeviceClass (inline, created by the suite, or an existing one), the
//! claim shape workloads use, and the guarantees that must hold, each with its parameters.
//! The format is described in `profiles/README.md`; shipped profiles live in
//! `profiles/<driver>/<name>.yaml`, embedded in the binary (`build.rs`, `lookup`).
//!
//! Parsing is strict: unknown fields, wrongly typed values and contradictions (a constraint
//! naming a request that does not exist, a limit below the claim's own size, …) are errors
//! that name the file, the line and the field.
//!
//! `model` is the typed profile, `family` declares each guarantee family once (its key, its
//! IDs, its scenarios), `file` parses and validates the YAML (and derives the format's JSON
//! Schema, `profiles/profile.schema.json`, from the file's types), `lookup` finds profiles.

mod error;
pub mod family;
mod file;
pub mod ids;
mod located;
mod lookup;
mod model;
mod version;

pub use error::ProfileError;
pub use file::schema::{SCHEMA_PATH, json_schema, json_schema_text};
pub use file::{invalid_field, load, parse};
pub use lookup::{load_for, profiles_dir, resolve, shipped};
pub use model::{
    Allocation, CapacityRecovery, ClassSource, Config, DriverOutage, DriverRestart, Guarantees, Impossible,
    ImpossibleVariant, Isolation, IsolationMode, Limits, Metadata, NodeReboot, NodeRemoval, NodeRestart, Profile,
    Retention, Versions,
};
pub use version::{Version, VersionError, VersionReq};

pub const API_VERSION: &str = "dracheck.io/v1alpha1";
pub const KIND: &str = "DeviceProfile";
/// How long the kubelet waits after a plugin unregisters before it wipes the node's slices;
/// a driver restart guarantee is only about restarts shorter than this.
pub const KUBELET_SLICE_WIPE_DELAY_SECONDS: u64 = 30;
const FORMAT_DOC: &str = "profiles/README.md";
