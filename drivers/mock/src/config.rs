//! Opaque device configuration as the mock takes it, the way upstream's test driver does:
//! `parameters` is a JSON object of string values, the settings a device is prepared with. A
//! container sees each as `DRACHECK_MOCK_CONFIG_<n>_<name>=<value>` (`n` the device's index, as
//! in `DRACHECK_MOCK_DEVICE_<n>`). The class's configs apply first and the claim's after, so
//! the claim's value wins where both set one, whatever order the allocation lists them in; a
//! config that names requests applies only to their devices (`gpu` also to `gpu/small`, an
//! alternative of a `firstAvailable` request).

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::DeviceAllocationConfiguration;

/// Settings by name.
pub type Settings = BTreeMap<String, String>;

/// `source` of a config that the claim's DeviceClass gave.
const FROM_CLASS: &str = "FromClass";

/// How configs are applied; the faults get them wrong on purpose.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Applying {
    /// No config at all (`ignore-config`).
    pub ignore: bool,
    /// Every config to every device, whichever requests it names (`config-to-every-request`).
    pub to_every_request: bool,
    /// The class's configs after the claim's (`class-config-wins`).
    pub class_last: bool,
    /// A config reaches only results of the requests it names exactly, not the alternatives
    /// of a request it names (`config-by-exact-request`).
    pub exact: bool,
}

/// The settings a device allocated for `request` is prepared with, from the allocation's
/// `configs` of `driver` (other drivers' configs are theirs to read). A config of this driver
/// that is not a JSON object of string values is an error, which fails the prepare: a driver
/// must not run a workload with settings it could not read.
pub fn settings_for(
    configs: &[DeviceAllocationConfiguration],
    driver: &str,
    request: &str,
    how: Applying,
) -> Result<Settings, String> {
    if how.ignore {
        return Ok(Settings::new());
    }
    let applies = |c: &&DeviceAllocationConfiguration| {
        c.opaque.as_ref().is_some_and(|o| o.driver == driver)
            && (how.to_every_request
                || c.requests.as_ref().is_none_or(|r| r.is_empty() || names(r, request, how.exact)))
    };
    let (class, claim): (Vec<_>, Vec<_>) = configs.iter().filter(applies).partition(|c| c.source == FROM_CLASS);
    let ordered = if how.class_last { [claim, class] } else { [class, claim] };
    let mut out = Settings::new();
    for config in ordered.into_iter().flatten() {
        let parameters = config.opaque.as_ref().map(|o| &o.parameters.0);
        out.extend(parse(parameters).map_err(|e| format!("the {} configuration: {e}", source_name(&config.source)))?);
    }
    Ok(out)
}

/// Whether a config's `requests` names `request` or, for `request/alternative`, its request
/// (unless `exact`).
fn names(requests: &[String], request: &str, exact: bool) -> bool {
    let parent = request.split_once('/').map_or(request, |(p, _)| p);
    requests.iter().any(|r| r == request || (!exact && r == parent))
}

fn source_name(source: &str) -> &'static str {
    if source == FROM_CLASS { "class's" } else { "claim's" }
}

fn parse(parameters: Option<&serde_json::Value>) -> Result<Settings, String> {
    let Some(serde_json::Value::Object(map)) = parameters else {
        return Err("parameters must be a JSON object of string values".into());
    };
    map.iter()
        .map(|(name, value)| {
            if !env_name(name) {
                return Err(format!("setting {name:?} is not a valid name ([A-Za-z_][A-Za-z0-9_]*)"));
            }
            match value {
                serde_json::Value::String(v) => Ok((name.clone(), v.clone())),
                other => Err(format!("setting {name:?} must be a string, not {other}")),
            }
        })
        .collect()
}

/// A setting's name goes into an environment variable's name.
fn env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::resource::v1::OpaqueDeviceConfiguration;
    use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
    use serde_json::json;

    use super::*;

    const DRIVER: &str = "gpu.mock.dracheck.io";

    fn config(source: &str, requests: &[&str], parameters: serde_json::Value) -> DeviceAllocationConfiguration {
        DeviceAllocationConfiguration {
            source: source.into(),
            requests: (!requests.is_empty()).then(|| requests.iter().map(|r| r.to_string()).collect()),
            opaque: Some(OpaqueDeviceConfiguration { driver: DRIVER.into(), parameters: RawExtension(parameters) }),
        }
    }

    fn settings(pairs: &[(&str, &str)]) -> Settings {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn the_claims_value_wins_over_the_class_in_any_order() {
        let configs = [
            config("FromClaim", &[], json!({"mode": "claim", "only_claim": "x"})),
            config(FROM_CLASS, &[], json!({"mode": "class", "only_class": "y"})),
        ];
        let got = settings_for(&configs, DRIVER, "gpu", Applying::default()).unwrap();
        assert_eq!(got, settings(&[("mode", "claim"), ("only_claim", "x"), ("only_class", "y")]));
        let wrong = settings_for(&configs, DRIVER, "gpu", Applying { class_last: true, ..Applying::default() });
        assert_eq!(wrong.unwrap()["mode"], "class");
    }

    #[test]
    fn a_config_for_requests_reaches_only_their_devices() {
        let configs = [
            config("FromClaim", &["first"], json!({"r": "first"})),
            config("FromClaim", &["second"], json!({"r": "second"})),
        ];
        let of = |request: &str, how| settings_for(&configs, DRIVER, request, how).unwrap();
        assert_eq!(of("first", Applying::default()), settings(&[("r", "first")]));
        assert_eq!(of("second/small", Applying::default()), settings(&[("r", "second")]));
        assert_eq!(of("third", Applying::default()), Settings::new());
        let exact = Applying { exact: true, ..Applying::default() };
        assert_eq!(of("second/small", exact), Settings::new(), "the whole request's config misses its alternative");
        assert_eq!(of("second", exact), settings(&[("r", "second")]));
        let every = Applying { to_every_request: true, ..Applying::default() };
        assert_eq!(of("first", every), settings(&[("r", "second")]), "the last config applied wins");
        assert_eq!(of("first", Applying { ignore: true, ..Applying::default() }), Settings::new());
    }

    #[test]
    fn other_drivers_configs_are_theirs_and_a_bad_one_of_ours_is_refused() {
        let mut other = config("FromClaim", &[], json!({"anything": {"nested": true}}));
        other.opaque.as_mut().unwrap().driver = "other.example.com".into();
        assert_eq!(settings_for(&[other], DRIVER, "gpu", Applying::default()).unwrap(), Settings::new());
        for bad in [json!({"mode": 3}), json!(["a"]), json!({"bad-name": "x"})] {
            let e = settings_for(&[config(FROM_CLASS, &[], bad.clone())], DRIVER, "gpu", Applying::default());
            assert!(e.is_err(), "{bad} was taken");
        }
    }
}
