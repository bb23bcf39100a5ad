//! The result schema lives in `dracheck-results` (serde only), so that reports read results
//! without the suite; these are its names as the suite uses them.

pub use dracheck_results::*;
