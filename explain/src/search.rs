//! The allocator's search on one node: claim by claim, request by request, device by device
//! in pool order, backtracking on constraints; a selector error on a device it reaches stops
//! the search, as it stops the scheduler's allocator (whose error then fails the pod's whole
//! scheduling attempt, not only this node: see `diagnose`).

use k8s_openapi::api::resource::v1::DeviceConstraint;

use crate::counters::Counters;
use crate::evaluate::{DeviceEval, Match, Request, Slot};
use crate::model::Reason;
use crate::pools::PoolDevice;
use crate::refs::attribute_text;

/// Enough for every realistic claim; beyond it the node is reported as undecided rather than
/// searched for minutes.
const STEP_LIMIT: usize = 200_000;

pub struct Search<'s, 'a> {
    pub requests: &'s [Request<'a>],
    pub slots: &'s [Slot],
    pub devices: &'s [PoolDevice<'a>],
    /// `evals[request][device]`.
    pub evals: &'s [Vec<DeviceEval>],
    /// Allocated to another claim, exclusively.
    pub in_use: &'s [bool],
    pub shareable: &'s [bool],
    /// What the devices take of shared counters, and what is left.
    pub counters: &'s Counters,
    /// Usable from this node: the pool is usable and the device reaches the node.
    pub usable: Vec<bool>,
    /// Constraints per claim.
    pub constraints: &'s [Vec<DeviceConstraint>],
    chosen: Vec<(usize, usize)>,
    steps: usize,
}

pub enum Outcome {
    Fit(Vec<(usize, usize)>),
    NoFit,
    /// The request, device and message of the error that stopped the search.
    Error(usize, usize, String),
    /// [`STEP_LIMIT`] reached: this node only is undecided. No selector failed, so nothing
    /// here fails the pod's whole scheduling attempt as an [`Outcome::Error`] does.
    Undecided,
}

/// Why the search stopped before an answer.
enum Stop {
    Error(usize, usize, String),
    Limit,
}

impl<'s, 'a> Search<'s, 'a> {
    /// `taken`: which devices other claims hold, which may be allocated more than once, and
    /// the shared counters.
    pub fn new(
        requests: &'s [Request<'a>],
        slots: &'s [Slot],
        devices: &'s [PoolDevice<'a>],
        evals: &'s [Vec<DeviceEval>],
        (in_use, shareable, counters): (&'s [bool], &'s [bool], &'s Counters),
        usable: Vec<bool>,
        constraints: &'s [Vec<DeviceConstraint>],
    ) -> Self {
        Search {
            requests,
            slots,
            devices,
            evals,
            in_use,
            shareable,
            counters,
            usable,
            constraints,
            chosen: Vec::new(),
            steps: 0,
        }
    }

    pub fn run(mut self) -> Outcome {
        match self.slot(0) {
            Ok(true) => Outcome::Fit(self.chosen),
            Ok(false) => Outcome::NoFit,
            Err(Stop::Error(r, d, e)) => Outcome::Error(r, d, e),
            Err(Stop::Limit) => Outcome::Undecided,
        }
    }

    fn slot(&mut self, si: usize) -> Result<bool, Stop> {
        let Some(slot) = self.slots.get(si) else { return Ok(true) };
        for &r in &slot.alternatives {
            if self.fill(si, r, 0, 0)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn busy(&self, r: usize, d: usize) -> bool {
        if self.requests[r].admin {
            return self.chosen.iter().any(|(cr, cd)| *cd == d && self.requests[*cr].claim == self.requests[r].claim);
        }
        if self.counters.short(d, self.chosen.iter().map(|(_, cd)| *cd)).is_some() {
            return true;
        }
        if self.shareable[d] {
            return false;
        }
        self.in_use[d] || self.chosen.iter().any(|(_, cd)| *cd == d)
    }

    fn selectable(&self, r: usize, d: usize) -> Result<bool, Stop> {
        match &self.evals[r][d].selectors {
            Match::Yes => Ok(true),
            // Unknown: counted out, and the explanation says the selector is not evaluated.
            Match::No(_) | Match::Unknown(_) => Ok(false),
            Match::Error(reason) => {
                let msg = match reason {
                    Reason::SelectorError { source, index, error, .. } => {
                        format!("{source} selector #{index}: {error}")
                    }
                    other => other.describe(),
                };
                Err(Stop::Error(r, d, msg))
            }
        }
    }

    fn usable_for(&self, r: usize, d: usize) -> bool {
        let e = &self.evals[r][d];
        e.taint.is_none() && e.capacity.is_none() && self.constraints_allow(r, d)
    }

    fn fill(&mut self, si: usize, r: usize, k: usize, start: usize) -> Result<bool, Stop> {
        self.steps += 1;
        if self.steps > STEP_LIMIT {
            return Err(Stop::Limit);
        }
        let req = &self.requests[r];
        if req.all {
            return self.fill_all(si, r);
        }
        if k == req.count {
            return self.slot(si + 1);
        }
        for d in start..self.devices.len() {
            if !self.usable[d] || self.busy(r, d) || !self.selectable(r, d)? || !self.usable_for(r, d) {
                continue;
            }
            self.chosen.push((r, d));
            if self.fill(si, r, k + 1, d + 1)? {
                return Ok(true);
            }
            self.chosen.pop();
        }
        Ok(false)
    }

    fn fill_all(&mut self, si: usize, r: usize) -> Result<bool, Stop> {
        let mut all = Vec::new();
        for d in 0..self.devices.len() {
            if self.usable[d] && self.selectable(r, d)? {
                all.push(d);
            }
        }
        if all.is_empty() {
            return Ok(false);
        }
        let mark = self.chosen.len();
        for d in all {
            if self.busy(r, d) || !self.usable_for(r, d) {
                self.chosen.truncate(mark);
                return Ok(false);
            }
            self.chosen.push((r, d));
        }
        if self.slot(si + 1)? {
            return Ok(true);
        }
        self.chosen.truncate(mark);
        Ok(false)
    }

    fn constraints_allow(&self, r: usize, d: usize) -> bool {
        let req = &self.requests[r];
        for c in &self.constraints[req.claim] {
            let scope = c.requests.as_deref().unwrap_or_default();
            let applies = |q: &Request<'_>| scope.is_empty() || scope.iter().any(|s| *s == q.base || *s == q.name);
            if !applies(req) {
                continue;
            }
            let others = self
                .chosen
                .iter()
                .filter(|(cr, _)| self.requests[*cr].claim == req.claim && applies(&self.requests[*cr]))
                .map(|(_, cd)| *cd);
            let value = |dev: usize| {
                attribute(
                    &self.devices[dev],
                    c.match_attribute.as_deref().or(c.distinct_attribute.as_deref()).unwrap_or_default(),
                )
            };
            let Some(mine) = value(d) else { return false };
            if c.match_attribute.is_some() {
                if others.clone().any(|o| value(o).as_deref() != Some(mine.as_str())) {
                    return false;
                }
            } else if c.distinct_attribute.is_some()
                && others.clone().any(|o| value(o).as_deref() == Some(mine.as_str()))
            {
                return false;
            }
        }
        true
    }
}

/// The value of a fully qualified attribute; names of the driver's own domain may be stored
/// without it.
pub fn attribute(pd: &PoolDevice<'_>, qualified: &str) -> Option<String> {
    let attrs = pd.device.attributes.as_ref()?;
    if let Some(a) = attrs.get(qualified) {
        return Some(attribute_text(a));
    }
    let (domain, name) = qualified.split_once('/')?;
    (domain == pd.slice.spec.driver).then(|| attrs.get(name).map(attribute_text)).flatten()
}
