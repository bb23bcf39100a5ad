//! A conformance run's result as dracheck writes it (`reports/<driver>-<k8s>-<run>.json`): the
//! schema, the stable guarantee IDs and the `--only`/`--skip` filters over them. Nothing but
//! serde: `report` renders from this alone, and so can any tool that reads results.

pub mod filter;
pub mod ids;
pub mod levels;
mod result;

pub use result::*;
