//! The Kubernetes and driver versions of the run satisfy the profile's requirements.

use crate::engine::{Ctx, Role, Scenario, ScenarioError, Tier};
use crate::profile::ids;

pub static SCENARIO: Scenario = Scenario {
    name: "versions",
    tier: Tier::Cluster,
    role: Role::General,
    guarantees: &[ids::VERSIONS_KUBERNETES, ids::VERSIONS_DRIVER],
    disrupts: crate::engine::Disruption::None,
    run: crate::scenario_fn!(run),
};

async fn run(ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
    let Some(versions) = ctx.profile().guarantees.versions.as_ref() else { return Ok(()) };
    let checks = [
        (
            ids::VERSIONS_KUBERNETES,
            "Kubernetes",
            versions.kubernetes.as_ref(),
            ctx.target.cluster.kubernetes_version.as_str(),
        ),
        (ids::VERSIONS_DRIVER, "driver", versions.driver.as_ref(), ctx.target.driver.version.as_str()),
    ];
    for (id, what, req, actual) in checks {
        match req {
            None => ctx.skip(id, format!("the profile names no {what} version")),
            Some(_) if actual == crate::adapters::UNKNOWN_VERSION => {
                ctx.skip(id, format!("the {what}'s version is unknown: pass --driver-version"))
            }
            Some(req) => ctx.check(
                id,
                req.matches(actual),
                format!("{what} {actual} satisfies {req}"),
                format!("{what} {actual} does not satisfy the profile's {req}"),
                Vec::new(),
            ),
        }
    }
    Ok(())
}
