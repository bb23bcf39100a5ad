//! From the file as written to the model: the profile, its class and its guarantees.

use super::*;

pub(super) struct Validator<'a> {
    pub(super) path: &'a Path,
    /// The CEL environment of `explain`, the scheduler's DRA library.
    pub(super) cel: dracheck_explain::cel::Environment,
}

impl Validator<'_> {
    pub(super) fn err(&self, at: Location, field: impl Into<String>, message: impl Into<String>) -> ProfileError {
        ProfileError::Invalid {
            path: self.path.to_path_buf(),
            line: at.line(),
            column: at.column(),
            field: field.into(),
            message: message.into(),
        }
    }

    pub(super) fn profile(&self, file: ProfileFile) -> Result<Profile, ProfileError> {
        if file.api_version.value != API_VERSION {
            return Err(self.err(
                file.api_version.referenced,
                "apiVersion",
                format!(
                    "unsupported apiVersion {:?}; the supported apiVersion is {API_VERSION}",
                    file.api_version.value
                ),
            ));
        }
        if file.kind.value != KIND {
            return Err(self.err(
                file.kind.referenced,
                "kind",
                format!("unsupported kind {:?}; the supported kind is {KIND}", file.kind.value),
            ));
        }
        self.dns_name(&file.metadata.name, "metadata.name", "a profile name")?;
        self.dns_name(&file.driver, "driver", "a DRA driver name (e.g. gpu.mock.dracheck.io)")?;
        let device_class = self.device_class(file.device_class)?;
        let class = match &device_class {
            ClassSource::Inline { name, .. } | ClassSource::Existing { name } => name.clone(),
        };
        let claim = self.claim(file.claim, &class, &file.driver.value)?;
        let guarantees = self.guarantees(file.guarantees, &claim)?;
        Ok(Profile {
            path: self.path.to_path_buf(),
            metadata: Metadata { name: file.metadata.name.value, description: file.metadata.description },
            driver: file.driver.value,
            device_class,
            claim,
            guarantees,
        })
    }

    /// Lowercase DNS subdomain, as Kubernetes requires of object and driver names.
    fn dns_name(&self, name: &Spanned<String>, field: &str, what: &str) -> Result<(), ProfileError> {
        let s = &name.value;
        // Kubernetes' subdomain rule, and labels of at most 63 as DNS itself has them.
        let ok = names::is_dns_subdomain(s) && s.split('.').all(|l| l.len() <= 63);
        if ok {
            Ok(())
        } else {
            Err(self.err(
                name.referenced,
                field,
                format!("{s:?} is not valid as {what}: use lowercase letters, digits, '-' and '.'"),
            ))
        }
    }

    fn device_class(&self, class: Spanned<DeviceClassFile>) -> Result<ClassSource, ProfileError> {
        let at = class.referenced;
        let DeviceClassFile { name, spec, existing } = class.value;
        match (spec, existing) {
            (None, None) => Err(self.err(
                at,
                "deviceClass",
                "names no class: give either `name` and `spec` (an inline class the suite creates) or `existing: \
                 <name>` (a class installed with the driver)",
            )),
            (Some(_), Some(existing)) => Err(self.err(
                existing.referenced,
                "deviceClass.existing",
                "`spec` and `existing` exclude each other: keep `spec` (with `name`) for an inline class, or only \
                 `existing` for a class that is already installed",
            )),
            (None, Some(existing)) => {
                if let Some(name) = name {
                    return Err(self.err(
                        name.referenced,
                        "deviceClass.name",
                        "`name` belongs to an inline class (with `spec`); an existing class is named by `existing`",
                    ));
                }
                self.dns_name(&existing, "deviceClass.existing", "a DeviceClass name")?;
                Ok(ClassSource::Existing { name: existing.value })
            }
            (Some(spec), None) => {
                let Some(name) = name else {
                    return Err(self.err(
                        at,
                        "deviceClass.name",
                        "an inline class needs a `name` (the DeviceClass the suite creates)",
                    ));
                };
                self.dns_name(&name, "deviceClass.name", "a DeviceClass name")?;
                let spec = self.inline_spec(&spec)?;
                Ok(ClassSource::Inline { name: name.value, spec })
            }
        }
    }

    /// The inline spec, typed as the API's DeviceClassSpec, with unknown fields refused and
    /// its CEL compiled.
    fn inline_spec(&self, raw: &Spanned<Node>) -> Result<DeviceClassSpec, ProfileError> {
        const PREFIX: &str = "deviceClass.spec";
        let spec: DeviceClassSpec = self.typed(raw, PREFIX, "the DeviceClass spec")?;
        for (i, selector) in spec.selectors.iter().flatten().enumerate() {
            if let Some(cel) = &selector.cel {
                self.compiles(raw, PREFIX, &format!("selectors[{i}].cel.expression"), &cel.expression)?;
            }
        }
        Ok(spec)
    }

    /// `raw` as the API type `T` (`what`, for messages), with type errors and unknown fields
    /// refused at their line: k8s-openapi's types ignore unknown fields themselves.
    pub(super) fn typed<T: serde::de::DeserializeOwned + serde::Serialize>(
        &self,
        raw: &Spanned<Node>,
        prefix: &str,
        what: &str,
    ) -> Result<T, ProfileError> {
        let json = raw.value.to_json();
        let value: T = serde_path_to_error::deserialize(&json).map_err(|e| {
            let at = located::locate(raw, e.path());
            let inner = e.path().to_string();
            let field = if inner == "." { prefix.to_string() } else { format!("{prefix}.{inner}") };
            self.err(at, field, e.into_inner().to_string())
        })?;
        let typed = serde_json::to_value(&value).unwrap_or_default();
        if let Some((field, at, key)) = located::first_unknown_key(raw, &typed, prefix) {
            return Err(self.err(
                at,
                field,
                format!("unknown field `{key}`: not a field of {what} (resource.k8s.io/v1)"),
            ));
        }
        Ok(value)
    }

    /// Compiles a CEL selector in the environment `explain` evaluates selectors in (the
    /// scheduler's DRA library); `path` is below `prefix` inside `raw`, for the location.
    pub(super) fn compiles(
        &self,
        raw: &Spanned<Node>,
        prefix: &str,
        path: &str,
        expression: &str,
    ) -> Result<(), ProfileError> {
        let field = format!("{prefix}.{path}");
        let at = located::locate_dotted(raw, path);
        if expression.trim().is_empty() {
            return Err(self.err(
                at,
                field,
                "an empty CEL expression; write one such as device.attributes[\"gpu.example.com\"].model == \"x\"",
            ));
        }
        match self.cel.compile(expression) {
            Ok(_) => Ok(()),
            Err(e) => Err(self.err(at, field, format!("the CEL expression does not compile: {e}"))),
        }
    }

    fn guarantees(&self, g: Spanned<GuaranteesFile>, claim: &ResourceClaimSpec) -> Result<Guarantees, ProfileError> {
        let at = g.referenced;
        let g = g.value;
        let limits = match g.limits {
            None => None,
            Some(l) => {
                let max = &l.max_devices_per_claim;
                // A request for all matching devices has no size of its own to compare.
                let total = crate::profile::model::devices_wanted(claim).unwrap_or(0);
                if max.value.0 < 1 {
                    return Err(self.err(
                        max.referenced,
                        "guarantees.limits.maxDevicesPerClaim",
                        format!("must be at least 1, got {}", max.value.0),
                    ));
                }
                if max.value.0 < total {
                    return Err(self.err(
                        max.referenced,
                        "guarantees.limits.maxDevicesPerClaim",
                        format!(
                            "{} is smaller than the profile's own claim, which asks for {total} device(s) ({}); \
                             raise the limit or make the claim smaller",
                            max.value.0,
                            request_sizes(claim)
                        ),
                    ));
                }
                Some(Limits { max_devices_per_claim: max.value.0 })
            }
        };
        let versions = match g.versions {
            Some(v) if v.value.kubernetes.is_none() && v.value.driver.is_none() => {
                return Err(self.err(
                    v.referenced,
                    "guarantees.versions",
                    "names no version: give `kubernetes` and/or `driver` requirements (e.g. \">=1.34\"), or leave out \
                     `versions`",
                ));
            }
            v => v.map(|v| v.value),
        };
        let partitionable = match g.partitionable {
            None => None,
            Some(p) => {
                let field = "guarantees.partitionable.whole";
                if p.whole.value.trim().is_empty() {
                    return Err(self.err(
                        p.whole.referenced,
                        field,
                        "an empty CEL expression; write one that selects the partitions taking a whole device, such \
                         as device.attributes[\"gpu.example.com\"].partition == \"whole\"",
                    ));
                }
                if let Err(e) = self.cel.compile(&p.whole.value) {
                    return Err(self.err(
                        p.whole.referenced,
                        field,
                        format!("the CEL expression does not compile: {e}"),
                    ));
                }
                Some(Partitionable { whole: p.whole.value })
            }
        };
        let out = Guarantees {
            allocation: g.allocation,
            impossible: g.impossible.map(|i| Impossible { variants: i.variants }),
            isolation: g.isolation,
            limits,
            capacity_recovery: g.capacity_recovery,
            retention: g.retention,
            config: g.config,
            coexistence: g.coexistence,
            prioritized_list: g.prioritized_list,
            admin_access: g.admin_access,
            partitionable,
            device_status: g.device_status,
            device_taints: g.device_taints,
            extended_resource: g.extended_resource,
            consumable_capacity: g.consumable_capacity,
            binding_conditions: g.binding_conditions,
            resource_health: g.resource_health,
            driver_restart: g.driver_restart,
            driver_outage: g.driver_outage,
            node_restart: g.node_restart,
            node_reboot: g.node_reboot,
            node_removal: g.node_removal,
            versions,
        };
        if out == Guarantees::default() {
            return Err(self.err(
                at,
                "guarantees",
                format!("the profile publishes no guarantee: add at least one of {}", family::keys()),
            ));
        }
        Ok(out)
    }
}
