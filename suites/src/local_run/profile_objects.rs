//! The objects a profile makes, shown to the API server before the run: its inline
//! DeviceClass and its claim, each created as a server-side dry run. What the server refuses
//! as invalid (a CEL selector that does not type-check, such as `device.driver > 3`, which the
//! profile's own CEL check lets through since it types nothing) is the profile's error, named
//! with its file, line and field, and no run starts: run anyway, every scenario of the profile
//! failed with the server's refusal, each counted against the driver.

use std::path::Path;

use dracheck_clusters::Failure;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim};
use kube::api::{Api, ObjectMeta, PostParams};

use super::NotUp;
use crate::profile::Profile;

/// Where a claim is tried: every cluster has it, and a dry run leaves nothing there.
const NAMESPACE: &str = "default";

/// Dry-runs the creation of every profile's inline DeviceClass and claim; the first that the
/// API server finds invalid is bad input (exit 2). Any other answer (a refusal to dry-run,
/// a lost connection) is left to the run, whose scenarios meet it with their evidence.
pub async fn check(client: &kube::Client, profiles: &[(std::path::PathBuf, Profile)]) -> Result<(), NotUp> {
    let dry = PostParams { dry_run: true, ..PostParams::default() };
    for (path, profile) in profiles {
        if let Some(mut class) = profile.device_class() {
            // A name of its own: the profile's may exist already (a kept cluster, an installed
            // driver's class), which a dry run would report instead of the spec's validity.
            class.metadata =
                ObjectMeta { generate_name: Some("dracheck-profile-check-".into()), ..ObjectMeta::default() };
            let created = Api::<DeviceClass>::all(client.clone()).create(&dry, &class).await;
            refused(created.err(), path, "deviceClass", "its DeviceClass")?;
        }
        let claim = ResourceClaim {
            metadata: ObjectMeta { generate_name: Some("dracheck-profile-check-".into()), ..ObjectMeta::default() },
            spec: Some(profile.claim.clone()),
            status: None,
        };
        let created = Api::<ResourceClaim>::namespaced(client.clone(), NAMESPACE).create(&dry, &claim).await;
        refused(created.err(), path, "claim", "its claim")?;
    }
    Ok(())
}

/// `error` as the profile's bad input where the API server said the object is invalid; the
/// field is the server's below `section` of the profile (`spec.` of a claim is the profile's
/// `claim.` itself).
fn refused(error: Option<kube::Error>, path: &Path, section: &str, what: &str) -> Result<(), NotUp> {
    let Some(kube::Error::Api(status)) = error else { return Ok(()) };
    if status.code != 422 {
        return Ok(());
    }
    let cause = status.details.as_ref().and_then(|d| d.causes.first());
    let field = cause.map_or(String::new(), |c| c.field.clone());
    let field = match (section, field.strip_prefix("spec.")) {
        ("claim", Some(rest)) => format!("claim.{rest}"),
        _ if field.is_empty() => section.to_string(),
        _ => format!("{section}.{field}"),
    };
    let said = cause.map_or_else(|| status.message.clone(), |c| c.message.clone());
    let message = format!(
        "the API server refuses {what} as invalid: {said}. Fix the profile (a CEL selector must type-check as the \
         API server's DRA CEL environment types it: `device.driver` is a string, `device.attributes[...]` values \
         have their published types)"
    );
    Err(NotUp { failure: Failure::BadInput, message: crate::profile::invalid_field(path, &field, message).to_string() })
}
