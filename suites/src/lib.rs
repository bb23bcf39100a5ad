//! dracheck's conformance scenarios, and how drivers are run on emulated nodes.

pub mod adapters;
