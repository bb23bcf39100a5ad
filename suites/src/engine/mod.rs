//! The run engine and what scenarios are written against.

mod ctx;
pub(crate) mod driver_pods;
pub mod dry_run;
mod error;
pub mod leftovers;
pub mod runner;
mod scenario;
pub mod served;
pub mod target;
pub mod wait;

pub use ctx::Ctx;
pub use error::{ApiContext, ApiError, DisruptionError, ScenarioError};
pub use runner::{Filter, NamespaceLifetime, Outcome, Plan, cleanup_run, lanes_wanted, run};
pub use scenario::{Disruption, Role, RunFn, Scenario, Tier};
pub use target::{Abilities, Target};
