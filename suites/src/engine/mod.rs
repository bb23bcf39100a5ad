//! The run engine and what scenarios are written against.

mod ctx;
pub mod runner;
mod scenario;
pub mod target;

pub use ctx::Ctx;
pub use runner::{Filter, Outcome, Plan, cleanup_run, run};
pub use scenario::{Role, RunFn, Scenario, Tier};
pub use target::Target;
