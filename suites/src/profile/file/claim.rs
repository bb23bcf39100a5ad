//! The profile's claim: a `ResourceClaimSpec` as in the API, or the short form, validated and
//! defaulted as the API server does, its CEL compiled with `explain`'s environment.

use super::validate::Validator;
use super::*;

impl Validator<'_> {
    /// The claim, in the API's shape or in the short form, as a ResourceClaimSpec.
    pub(super) fn claim(
        &self,
        claim: Spanned<ClaimFile>,
        class: &str,
        driver: &str,
    ) -> Result<ResourceClaimSpec, ProfileError> {
        let at = claim.referenced;
        let ClaimFile { devices, requests, constraints, config } = claim.value;
        match (devices, requests) {
            (Some(devices), None) if constraints.is_empty() && config.is_none() => self.api_claim(&devices, class),
            (Some(devices), _) => Err(self.err(
                devices.referenced,
                "claim.devices",
                "`devices` (the claim in the API's shape) and the short form's `requests`, `constraints` and `config` \
                 exclude each other: write the claim one way",
            )),
            (None, Some(requests)) => self.short_claim(requests, constraints, config, class, driver),
            (None, None) => Err(self.err(
                at,
                "claim",
                "the claim requests nothing: give `devices` (a ResourceClaimSpec's, as in the API) or `requests` (the \
                 short form)",
            )),
        }
    }

    /// The claim in the API's shape: typed as the API's DeviceClaim, then checked as the
    /// apiserver would (names, one of `exactly`/`firstAvailable`, counts and allocation
    /// modes, references between requests, constraints and config) and defaulted as it would
    /// (`allocationMode: ExactCount`, `count: 1`). A request's `deviceClassName` may be left
    /// out: it is the profile's class, and naming another class is refused.
    fn api_claim(&self, raw: &Spanned<Node>, class: &str) -> Result<ResourceClaimSpec, ProfileError> {
        const PREFIX: &str = "claim.devices";
        let mut devices: DeviceClaim = self.typed(raw, PREFIX, "a ResourceClaimSpec's devices")?;
        let at = |path: &str, message: String| {
            self.err(located::locate_dotted(raw, path), format!("{PREFIX}.{path}"), message)
        };
        let requests = devices.requests.get_or_insert_default();
        if requests.is_empty() {
            return Err(at("requests", "the claim requests nothing: add at least one request".into()));
        }
        // Request names, and `request/alternative` names, that constraints and config may name.
        let mut known: Vec<String> = Vec::new();
        for (i, request) in requests.iter_mut().enumerate() {
            let here = format!("requests[{i}]");
            self.label(raw, &format!("{here}.name"), &request.name, "request name")?;
            if known.contains(&request.name) {
                return Err(at(&format!("{here}.name"), format!("request name {:?} is used twice", request.name)));
            }
            known.push(request.name.clone());
            match (request.exactly.as_mut(), request.first_available.as_mut()) {
                (Some(e), None) => {
                    let path = format!("{here}.exactly");
                    self.exact(raw, &path, &mut e.device_class_name, &mut e.allocation_mode, &mut e.count, class)?;
                    self.selectors_compile(raw, &path, e.selectors.as_deref())?;
                    self.capacity_quantities(raw, &path, e.capacity.as_ref())?;
                }
                (None, Some(alternatives)) if !alternatives.is_empty() => {
                    let mut names: Vec<String> = Vec::new();
                    for (j, a) in alternatives.iter_mut().enumerate() {
                        let path = format!("{here}.firstAvailable[{j}]");
                        self.label(raw, &format!("{path}.name"), &a.name, "alternative name")?;
                        if names.contains(&a.name) {
                            return Err(at(
                                &format!("{path}.name"),
                                format!("alternative name {:?} is used twice", a.name),
                            ));
                        }
                        names.push(a.name.clone());
                        known.push(format!("{}/{}", request.name, a.name));
                        self.exact(raw, &path, &mut a.device_class_name, &mut a.allocation_mode, &mut a.count, class)?;
                        self.selectors_compile(raw, &path, a.selectors.as_deref())?;
                        self.capacity_quantities(raw, &path, a.capacity.as_ref())?;
                    }
                }
                (None, Some(_)) => {
                    return Err(at(
                        &format!("{here}.firstAvailable"),
                        "lists no alternative: give at least one".into(),
                    ));
                }
                _ => {
                    return Err(at(
                        &here,
                        "a request has exactly one of `exactly` (one kind of device) and `firstAvailable` (alternatives \
                         in order of preference)"
                            .into(),
                    ));
                }
            }
        }
        let names_known = |path: &str, names: Option<&Vec<String>>| -> Result<(), ProfileError> {
            for (j, name) in names.into_iter().flatten().enumerate() {
                let bare = name.split('/').next().unwrap_or(name);
                if !known.contains(name) && !known.iter().any(|k| k == bare) {
                    return Err(at(
                        &format!("{path}.requests[{j}]"),
                        format!(
                            "names request {name:?}, which the claim does not have (its requests: {})",
                            known.join(", ")
                        ),
                    ));
                }
            }
            Ok(())
        };
        for (i, c) in devices.constraints.iter().flatten().enumerate() {
            let path = format!("constraints[{i}]");
            names_known(&path, c.requests.as_ref())?;
            let (field, attribute) = match (&c.match_attribute, &c.distinct_attribute) {
                (Some(a), None) => ("matchAttribute", a),
                (None, Some(a)) => ("distinctAttribute", a),
                _ => {
                    return Err(at(
                        &path,
                        "a constraint has exactly one of `matchAttribute` and `distinctAttribute`".into(),
                    ));
                }
            };
            if !qualified(attribute) {
                return Err(at(
                    &format!("{path}.{field}"),
                    format!(
                        "{attribute:?} is not a fully qualified attribute name: write domain/name, e.g. gpu.mock.dracheck.io/model"
                    ),
                ));
            }
        }
        for (i, c) in devices.config.iter().flatten().enumerate() {
            names_known(&format!("config[{i}]"), c.requests.as_ref())?;
        }
        Ok(ResourceClaimSpec { devices: Some(devices) })
    }

    /// A DNS label, as request names are.
    fn label(&self, raw: &Spanned<Node>, path: &str, name: &str, what: &str) -> Result<(), ProfileError> {
        let ok = names::is_dns_label(name);
        if ok {
            return Ok(());
        }
        Err(self.err(
            located::locate_dotted(raw, path),
            format!("claim.devices.{path}"),
            format!("{name:?} is not a valid {what} (a DNS label: a-z, 0-9 and '-')"),
        ))
    }

    /// The class, allocation mode and count of an exact request or alternative, defaulted
    /// as the apiserver defaults them.
    fn exact(
        &self,
        raw: &Spanned<Node>,
        path: &str,
        device_class_name: &mut String,
        allocation_mode: &mut Option<String>,
        count: &mut Option<i64>,
        class: &str,
    ) -> Result<(), ProfileError> {
        let at = |field: &str, message: String| {
            let path = if field.is_empty() { path.to_string() } else { format!("{path}.{field}") };
            self.err(located::locate_dotted(raw, &path), format!("claim.devices.{path}"), message)
        };
        if device_class_name.is_empty() {
            *device_class_name = class.to_string();
        } else if device_class_name != class {
            return Err(at(
                "deviceClassName",
                format!(
                    "names class {device_class_name:?}, but the profile's class is {class:?}: leave deviceClassName out \
                     or write {class}"
                ),
            ));
        }
        match allocation_mode.get_or_insert_with(|| EXACT_COUNT.into()).as_str() {
            EXACT_COUNT => match *count.get_or_insert(1) {
                n if n < 1 => Err(at("count", format!("count must be at least 1, got {n}"))),
                _ => Ok(()),
            },
            ALL if count.is_some() => {
                Err(at("count", "`allocationMode: All` takes every matching device: leave out `count`".into()))
            }
            ALL => Ok(()),
            other => Err(at("allocationMode", format!("{other:?} is no allocation mode: write ExactCount or All"))),
        }
    }

    fn selectors_compile(
        &self,
        raw: &Spanned<Node>,
        path: &str,
        selectors: Option<&[DeviceSelector]>,
    ) -> Result<(), ProfileError> {
        for (i, s) in selectors.into_iter().flatten().enumerate() {
            if let Some(cel) = &s.cel {
                self.compiles(raw, "claim.devices", &format!("{path}.selectors[{i}].cel.expression"), &cel.expression)?;
            }
        }
        Ok(())
    }

    fn capacity_quantities(
        &self,
        raw: &Spanned<Node>,
        path: &str,
        capacity: Option<&CapacityRequirements>,
    ) -> Result<(), ProfileError> {
        for (name, q) in capacity.and_then(|c| c.requests.as_ref()).into_iter().flatten() {
            if !is_quantity(&q.0) {
                let path = format!("{path}.capacity.requests.{name}");
                return Err(self.err(
                    located::locate_dotted(raw, &path),
                    format!("claim.devices.{path}"),
                    format!("{:?} is not a quantity (a number with an optional suffix such as Gi, M or m)", q.0),
                ));
            }
        }
        Ok(())
    }

    /// The short form: exact requests of the profile's class.
    fn short_claim(
        &self,
        requests_file: Spanned<Vec<RequestFile>>,
        constraints_file: Vec<ConstraintFile>,
        config: Option<serde_json::Value>,
        class: &str,
        driver: &str,
    ) -> Result<ResourceClaimSpec, ProfileError> {
        if requests_file.value.is_empty() {
            return Err(self.err(
                requests_file.referenced,
                "claim.requests",
                "the claim requests nothing: add at least one request (name and count)",
            ));
        }
        let mut requests = Vec::new();
        let mut seen: BTreeMap<String, u64> = BTreeMap::new();
        for (i, r) in requests_file.value.into_iter().enumerate() {
            let field = |f: &str| format!("claim.requests[{i}].{f}");
            let name = &r.name;
            let label_ok = names::is_dns_label(&name.value);
            if !label_ok {
                return Err(self.err(
                    name.referenced,
                    field("name"),
                    format!("{:?} is not a valid request name (a DNS label: a-z, 0-9 and '-')", name.value),
                ));
            }
            if let Some(first) = seen.insert(name.value.clone(), name.referenced.line()) {
                return Err(self.err(
                    name.referenced,
                    field("name"),
                    format!("request name {:?} is used twice (first on line {first}); rename one of them", name.value),
                ));
            }
            let count = match &r.count {
                Some(c) if c.value.0 < 1 => {
                    return Err(self.err(
                        c.referenced,
                        field("count"),
                        format!("count must be at least 1, got {}", c.value.0),
                    ));
                }
                Some(c) => c.value.0,
                None => 1,
            };
            let mut selectors = Vec::new();
            for (s, sel) in r.selectors.iter().enumerate() {
                let at = |message: String| self.err(sel.referenced, field(&format!("selectors[{s}]")), message);
                if sel.value.trim().is_empty() {
                    return Err(at(
                        "an empty CEL expression; write one such as device.attributes[\"gpu.example.com\"].model == \"x\""
                            .into(),
                    ));
                }
                if let Err(e) = self.cel.compile(&sel.value) {
                    return Err(at(format!("the CEL expression does not compile: {e}")));
                }
                selectors.push(DeviceSelector { cel: Some(CELDeviceSelector { expression: sel.value.clone() }) });
            }
            let capacity: BTreeMap<String, Quantity> =
                r.capacity.into_iter().map(|(k, v)| (k, Quantity(v.0))).collect();
            requests.push(DeviceRequest {
                name: r.name.value,
                exactly: Some(ExactDeviceRequest {
                    device_class_name: class.to_string(),
                    allocation_mode: Some(EXACT_COUNT.into()),
                    count: Some(count),
                    selectors: (!selectors.is_empty()).then_some(selectors),
                    capacity: (!capacity.is_empty()).then_some(CapacityRequirements { requests: Some(capacity) }),
                    ..ExactDeviceRequest::default()
                }),
                first_available: None,
            });
        }
        let mut constraints = Vec::new();
        for (i, c) in constraints_file.into_iter().enumerate() {
            for (j, req) in c.requests.iter().enumerate() {
                if !seen.contains_key(&req.value) {
                    return Err(self.err(
                        req.referenced,
                        format!("claim.constraints[{i}].requests[{j}]"),
                        format!(
                            "the constraint names request {:?}, which the claim does not have (its requests: {})",
                            req.value,
                            seen.keys().cloned().collect::<Vec<_>>().join(", ")
                        ),
                    ));
                }
            }
            let attr = &c.match_attribute;
            if !qualified(&attr.value) {
                return Err(self.err(
                    attr.referenced,
                    format!("claim.constraints[{i}].matchAttribute"),
                    format!(
                        "{:?} is not a fully qualified attribute name: write domain/name, e.g. gpu.mock.dracheck.io/model",
                        attr.value
                    ),
                ));
            }
            let requests: Vec<String> = c.requests.into_iter().map(|r| r.value).collect();
            constraints.push(DeviceConstraint {
                requests: (!requests.is_empty()).then_some(requests),
                match_attribute: Some(c.match_attribute.value),
                ..DeviceConstraint::default()
            });
        }
        let config = config.map(|parameters| {
            vec![DeviceClaimConfiguration {
                requests: None,
                opaque: Some(OpaqueDeviceConfiguration {
                    driver: driver.to_string(),
                    parameters: RawExtension(parameters),
                }),
            }]
        });
        Ok(ResourceClaimSpec {
            devices: Some(DeviceClaim {
                requests: Some(requests),
                constraints: (!constraints.is_empty()).then_some(constraints),
                config,
            }),
        })
    }
}
