//! Shared counters (partitionable devices, `sharedCounters`): as the scheduler's allocator has
//! it, a device that consumes counters can be allocated only while its pool's counter sets
//! have what it takes left, after the devices allocated to other claims and those chosen for
//! the claims being explained. A free partition of a device whose whole is allocated is not
//! free capacity.

use std::collections::HashMap;

use dracheck_objects::quantity::Quantity;

use crate::pools::{Pool, PoolDevice};

pub struct Counters {
    /// Per device: the counters it takes (counter index, amount).
    consumes: Vec<Vec<(usize, f64)>>,
    /// Per counter: what is left of it after the devices in use.
    left: Vec<f64>,
    /// Per counter: `counter <name> of <set>`, for messages.
    pub names: Vec<String>,
}

impl Counters {
    /// The counters of `pools` and what `devices` take of them, less what the devices
    /// `in_use` hold.
    pub fn new(pools: &[Pool<'_>], devices: &[PoolDevice<'_>], in_use: &[bool]) -> Counters {
        let mut index: HashMap<(usize, &str, &str), usize> = HashMap::new();
        let (mut left, mut names) = (Vec::new(), Vec::new());
        for (p, pool) in pools.iter().enumerate() {
            for set in pool.slices.iter().flat_map(|s| s.spec.shared_counters.iter().flatten()) {
                for (name, counter) in &set.counters {
                    index.insert((p, set.name.as_str(), name.as_str()), left.len());
                    left.push(amount(&counter.value.0));
                    names.push(format!("counter {name} of {}", set.name));
                }
            }
        }
        let consumes: Vec<Vec<(usize, f64)>> = devices
            .iter()
            .map(|pd| {
                pd.device
                    .consumes_counters
                    .iter()
                    .flatten()
                    .flat_map(|c| c.counters.iter().map(move |(name, q)| (c.counter_set.as_str(), name, q)))
                    .filter_map(|(set, name, q)| {
                        Some((*index.get(&(pd.pool, set, name.as_str()))?, amount(&q.value.0)))
                    })
                    .collect()
            })
            .collect();
        for (d, taken) in consumes.iter().enumerate() {
            if in_use[d] {
                for &(k, q) in taken {
                    left[k] -= q;
                }
            }
        }
        Counters { consumes, left, names }
    }

    /// The first counter that device `d` needs more of than is left beside the devices in
    /// use and `chosen`; `None` where it fits.
    pub fn short(&self, d: usize, chosen: impl Iterator<Item = usize> + Clone) -> Option<usize> {
        self.consumes[d].iter().find_map(|&(k, q)| {
            let by_chosen: f64 =
                chosen.clone().flat_map(|c| self.consumes[c].iter()).filter(|(ck, _)| *ck == k).map(|(_, q)| q).sum();
            (q + by_chosen > self.left[k]).then_some(k)
        })
    }

    /// Whether device `d` takes counter `k`.
    pub fn takes(&self, d: usize, k: usize) -> bool {
        self.consumes[d].iter().any(|(ck, _)| *ck == k)
    }
}

/// A quantity as a number; an unreadable one takes nothing.
fn amount(text: &str) -> f64 {
    Quantity::parse(text).map(|q| q.as_float()).unwrap_or(0.0)
}
