//! Which of a claim's constraints (`matchAttribute`, `distinctAttribute`) keeps a node from a
//! device set, and the values of its attribute there. The allocator only finds no
//! combination; the constraint and the values that differ per node say why.

use k8s_openapi::api::resource::v1::DeviceConstraint;

use crate::evaluate::{DeviceEval, Request};
use crate::pools::PoolDevice;
use crate::search::attribute;

/// Devices named per value before the rest are only counted.
const NAMED: usize = 4;

/// A constraint: the claim (index among the pending ones) and its index there.
pub type ConstraintId = (usize, usize);

/// The constraints that alone keep the search from a fit: `fits` answers whether the search
/// fits with the constraints given, and each constraint is left out in turn.
pub fn blocking(
    constraints: &[Vec<DeviceConstraint>],
    fits: impl Fn(&[Vec<DeviceConstraint>]) -> bool,
) -> Vec<ConstraintId> {
    let mut out = Vec::new();
    for (claim, list) in constraints.iter().enumerate() {
        for index in 0..list.len() {
            let mut without = constraints.to_vec();
            without[claim].remove(index);
            if fits(&without) {
                out.push((claim, index));
            }
        }
    }
    out
}

/// `matchAttribute` or `distinctAttribute`, and the attribute.
pub fn kind(c: &DeviceConstraint) -> (&'static str, String) {
    match (&c.match_attribute, &c.distinct_attribute) {
        (Some(a), _) => ("matchAttribute", a.clone()),
        (None, Some(a)) => ("distinctAttribute", a.clone()),
        (None, None) => ("constraint", String::new()),
    }
}

/// What a node offers a constraint: per value of its attribute (in device order), the free
/// devices on the node that suit a request it covers, e.g. `"a100" (gpu-0, gpu-1)`; devices
/// without the attribute meet no constraint and show as `missing (…)`.
pub struct Offer<'s, 'a> {
    pub requests: &'s [Request<'a>],
    pub devices: &'s [PoolDevice<'a>],
    pub evals: &'s [Vec<DeviceEval>],
    pub in_use: &'s [bool],
}

impl Offer<'_, '_> {
    pub fn values(&self, claim: usize, c: &DeviceConstraint, usable: &[bool]) -> Vec<String> {
        let scope = c.requests.as_deref().unwrap_or_default();
        let covered = |q: &Request<'_>| {
            q.claim == claim && (scope.is_empty() || scope.iter().any(|s| *s == q.base || *s == q.name))
        };
        let (_, name) = kind(c);
        let mut groups: Vec<(Option<String>, Vec<String>)> = Vec::new();
        for (d, pd) in self.devices.iter().enumerate() {
            let suits = (0..self.requests.len()).any(|r| covered(&self.requests[r]) && self.evals[r][d].compatible());
            if !usable[d] || self.in_use[d] || !suits {
                continue;
            }
            let value = attribute(pd, &name);
            let device = pd.device.name.clone();
            match groups.iter_mut().find(|(v, _)| *v == value) {
                Some((_, names)) => names.push(device),
                None => groups.push((value, vec![device])),
            }
        }
        groups
            .into_iter()
            .map(|(value, mut names)| {
                let more = names.len().saturating_sub(NAMED);
                names.truncate(NAMED);
                let more = if more > 0 { format!(", {more} more") } else { String::new() };
                format!("{} ({}{more})", value.as_deref().unwrap_or("missing"), names.join(", "))
            })
            .collect()
    }
}
