//! Plugin-tier scenarios (being written).

use crate::engine::Scenario;

pub fn all() -> Vec<&'static Scenario> {
    Vec::new()
}
