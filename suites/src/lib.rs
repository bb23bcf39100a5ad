//! dracheck's conformance scenarios, the run engine they are written against and the result
//! they produce. Drivers come in as [`adapters::Adapter`]s that their own crates make.

/// What the suite knows of a driver, as the driver crate states it.
pub use dracheck_adapter as adapters;
pub mod access;
pub mod catalogue;
pub mod coverage;
pub mod engine;
pub mod fidelity;
pub mod installation;
pub mod local_run;
pub mod profile;
pub mod published;
pub mod result;
pub mod scenarios;
