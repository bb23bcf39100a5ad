//! The stable guarantee IDs live in `dracheck-results` with the result schema; which family
//! publishes which is `family::FAMILIES`.

pub use dracheck_results::ids::*;
