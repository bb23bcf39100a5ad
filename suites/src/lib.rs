//! dracheck's conformance scenarios, the run engine they are written against, the result
//! they produce, and the adapters that run drivers on emulated nodes.

pub mod adapters;
pub mod engine;
pub mod fidelity;
pub mod local_run;
pub mod profile;
pub mod published;
pub mod result;
pub mod scenarios;
