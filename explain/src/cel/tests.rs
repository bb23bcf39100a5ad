use std::collections::BTreeMap;

use dracheck_objects::device;
use k8s_openapi::api::resource::v1::Device;

use super::{CelError, DeviceInput, Environment};

const DRIVER: &str = "gpu.example.com";

fn gpu() -> Device {
    let mut d = device("gpu-0")
        .string("model", "a100")
        .int("index", 3)
        .bool("mig", false)
        .version("driverVersion", "550.54.15")
        .capacity("memory", "80Gi")
        .build();
    let attrs = d.attributes.get_or_insert_default();
    attrs.insert(
        "other.example.com/zone".into(),
        k8s_openapi::api::resource::v1::DeviceAttribute { string: Some("z1".into()), ..Default::default() },
    );
    attrs.insert(
        "links".into(),
        k8s_openapi::api::resource::v1::DeviceAttribute { ints: Some(vec![1, 2, 3]), ..Default::default() },
    );
    d
}

/// The typed result, for the tests that tell kinds of failure apart.
fn eval_typed(expr: &str) -> Result<bool, CelError> {
    let env = Environment::new();
    let d = gpu();
    let sel = env.compile(expr)?;
    env.matches(&sel, &DeviceInput::of(DRIVER, &d))
}

fn eval(expr: &str) -> Result<bool, String> {
    let env = Environment::new();
    let d = gpu();
    let sel = env.compile(expr).map_err(|e| e.to_string())?;
    env.matches(&sel, &DeviceInput::of(DRIVER, &d)).map_err(|e| e.to_string())
}

#[test]
fn the_dra_environment_evaluates_what_selectors_use() {
    let truths = [
        r#"device.driver == "gpu.example.com""#,
        r#"device.attributes["gpu.example.com"].model == "a100""#,
        r#"device.attributes["gpu.example.com"].index > 2"#,
        r#"!device.attributes["gpu.example.com"].mig"#,
        r#"device.attributes["other.example.com"].zone == "z1""#,
        r#"device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) > 0"#,
        r#"device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("79Gi"))"#,
        r#"device.capacity["gpu.example.com"].memory == quantity("80Gi")"#,
        r#"device.capacity["gpu.example.com"].memory.asInteger() == 85899345920"#,
        r#"quantity("1.5Gi").isLessThan(quantity("2Gi")) && quantity("100m").sign() == 1"#,
        r#"device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("550.9.0"))"#,
        r#"device.attributes["gpu.example.com"].driverVersion.major() == 550"#,
        r#"device.attributes["gpu.example.com"].driverVersion.compareTo(semver("550.54.15")) == 0"#,
        r#"isSemver("1.0.0") && !isSemver("1.0") && isQuantity("24Gi")"#,
        r#"isQuantity("1e99") && quantity("1e99").isGreaterThan(quantity("9Ei")) && !quantity("1e99").isInteger()"#,
        r#"quantity("9Ei") == quantity("9223372036854775807Ki") && quantity("0.1n").sign() == 1"#,
        r#"quantity("1e99").add(1).compareTo(quantity("1e99")) == 1 && [quantity("1"), quantity("2k")].sum() == quantity("2001")"#,
        r#"!isQuantity("Gi") && !isQuantity(".") && !isQuantity("1.2.3") && !isQuantity("12XB")"#,
        r#"device.attributes["gpu.example.com"].model.startsWith("a1")"#,
        r#"device.attributes["gpu.example.com"].model.upperAscii() == "A100""#,
        r#"device.attributes["gpu.example.com"].model.matches("^a[0-9]+$")"#,
        r#"device.attributes["gpu.example.com"].links.isSorted() && device.attributes["gpu.example.com"].links.sum() == 6"#,
        r#"device.attributes["gpu.example.com"].links.max() == 3 && [3, 1].min() == 1"#,
        r#"device.attributes["gpu.example.com"].links.indexOf(2) == 1 && "abcb".lastIndexOf("b") == 3"#,
        r#"cel.bind(g, device.attributes["gpu.example.com"], g.model == "a100" && g.index == 3)"#,
        r#"has(device.attributes["gpu.example.com"].model) && !has(device.attributes["gpu.example.com"].colour)"#,
        r#"!has(device.attributes["nowhere.example.com"].model)"#,
        r#"device.attributes["gpu.example.com"].exists(k, k == "mig")"#,
        r#"!device.allowMultipleAllocations"#,
        r#"sets.contains(device.attributes["gpu.example.com"].links, [1, 3]) && !sets.contains([1], [1, 2])"#,
        r#"sets.equivalent([1, 2, 2], [2, 1]) && !sets.equivalent([1], [1, 2]) && sets.contains([1, 2], [1.0])"#,
        r#"sets.intersects(device.attributes["gpu.example.com"].links, [0, 3]) && !sets.intersects([1], [])"#,
        r#"device.attributes["gpu.example.com"].model.find("[0-9]+") == "100" && "l4".find("x") == """#,
        r#""a1b22c333".findAll("[0-9]+") == ["1", "22", "333"] && "a1b22c333".findAll("[0-9]+", 2) == ["1", "22"]"#,
    ];
    for t in truths {
        assert_eq!(eval(t), Ok(true), "{t}");
    }
    assert_eq!(eval(r#"device.attributes["gpu.example.com"].model == "l4""#), Ok(false));
}

/// Kubernetes' IP and CIDR libraries, with upstream's examples (`library/ip.go`, `cidr.go`).
#[test]
fn the_ip_and_cidr_libraries_evaluate_as_upstreams() {
    let truths = [
        r#"isIP("127.0.0.1") && isIP("::1") && !isIP("1.2.3.4.5") && !isIP("fe80::1%eth0") && !isIP("::ffff:1.2.3.4")"#,
        r#"ip("127.0.0.1").family() == 4 && ip("::1").family() == 6"#,
        r#"ip("127.0.0.1").isLoopback() && !ip("10.0.0.1").isLoopback() && ip("::").isUnspecified()"#,
        r#"ip("224.0.0.1").isLinkLocalMulticast() && ip("ff02::1").isLinkLocalMulticast() && !ip("224.0.1.1").isLinkLocalMulticast()"#,
        r#"ip("169.254.169.254").isLinkLocalUnicast() && ip("fe80::1").isLinkLocalUnicast() && !ip("192.168.0.1").isLinkLocalUnicast()"#,
        r#"ip("192.168.0.1").isGlobalUnicast() && ip("2001:db8::1").isGlobalUnicast() && !ip("255.255.255.255").isGlobalUnicast() && !ip("ff00::1").isGlobalUnicast()"#,
        r#"ip.isCanonical("2001:db8::abcd") && !ip.isCanonical("2001:DB8::ABCD") && !ip.isCanonical("2001:db8::0:0:0:abcd")"#,
        r#"ip("127.0.0.1") == ip("127.0.0.1") && ip("2001:db8::abcd") == ip("2001:DB8::ABCD") && ip("127.0.0.1") != ip("10.0.0.1")"#,
        r#"isCIDR("192.168.0.0/24") && !isCIDR("192.168.0.0/33") && !isCIDR("192.168.0.0") && !isCIDR("::ffff:1.2.3.4/96")"#,
        r#"cidr("192.168.0.0/24").containsIP(ip("192.168.0.1")) && !cidr("192.168.0.0/24").containsIP("192.168.1.1")"#,
        r#"cidr("192.168.0.0/24").containsCIDR("192.168.0.0/25") && !cidr("192.168.0.0/24").containsCIDR(cidr("192.168.0.0/23"))"#,
        r#"!cidr("0.0.0.0/0").containsIP("::1") && cidr("::/0").containsIP("2001:db8::1") && cidr("10.0.0.0/8").containsIP("10.255.255.255")"#,
        r#"cidr("192.168.0.1/24").ip() == ip("192.168.0.1") && cidr("192.168.0.1/24").masked() == cidr("192.168.0.0/24")"#,
        r#"cidr("2001:db8::1/32").masked() == cidr("2001:db8::/32") && cidr("192.168.0.0/24").prefixLength() == 24"#,
        r#"cidr("10.0.0.1/0").masked() == cidr("0.0.0.0/0") && cidr("10.0.0.1/32").masked() == cidr("10.0.0.1/32")"#,
        r#"string(ip("2001:DB8::0:0:0:ABCD")) == "2001:db8::abcd" && string(cidr("10.0.0.1/8")) == "10.0.0.1/8""#,
        r#"string(cidr("10.0.0.0/8").ip()) == "10.0.0.0" && string(cidr("2001:db8::/32").masked()) == "2001:db8::/32""#,
        r#"string(1) == "1" && string("x") == "x""#,
    ];
    for t in truths {
        assert_eq!(eval(t), Ok(true), "{t}");
    }
    let zone = eval(r#"ip("fe80::1%eth0").family() == 6"#).unwrap_err();
    assert!(zone.contains("zone value is not allowed"), "{zone}");
    let mapped = eval(r#"cidr("::ffff:1.2.3.4/128").prefixLength() == 128"#).unwrap_err();
    assert!(mapped.contains("IPv4-mapped"), "{mapped}");
    assert!(eval(r#"ip.isCanonical("nope")"#).is_err());
}

#[test]
fn runtime_errors_are_errors_not_false() {
    let missing = eval(r#"device.attributes["gpu.example.com"].colour == "red""#).unwrap_err();
    assert!(missing.contains("no such key: colour"), "{missing}");
    let other_domain = eval(r#"device.attributes["nowhere.example.com"].model == "a100""#).unwrap_err();
    assert!(other_domain.contains("no such key: model"), "{other_domain}");
    assert!(eval(r#"device.capacity["gpu.example.com"].memory.compareTo(semver("1.0.0")) > 0"#).is_err());
    assert!(eval(r#"quantity("lots").sign() == 1"#).is_err());
    let bad_regex = eval(r#"device.attributes["gpu.example.com"].model.find("(") == """#).unwrap_err();
    assert!(bad_regex.contains("invalid regex"), "{bad_regex}");
    assert!(eval(r#"sets.contains(1, [1])"#).is_err());
    let not_bool = eval(r#"device.attributes["gpu.example.com"].index"#).unwrap_err();
    assert!(not_bool.contains("not a bool"), "{not_bool}");
}

#[test]
fn syntax_errors_are_compile_errors() {
    let env = Environment::new();
    assert!(env.compile(r#"device.driver == "#).is_err());
    assert!(env.compile(r#"device.driver == "x""#).is_ok());
    let _ = BTreeMap::<String, String>::new();
}

/// Kubernetes' URL library, with upstream's examples (`library/urls.go` and the CRD
/// validation tests in apiextensions-apiserver).
#[test]
fn the_url_library_evaluates_as_upstreams() {
    let truths = [
        r#"url('https://a.example:8443/p?q=1').getPort() == '8443'"#,
        r#"url('/path').getScheme() == '' && url('https://example.com/').getScheme() == 'https'"#,
        r#"url('HTTPS://example.com/').getScheme() == 'https'"#,
        r#"url('https://example.com:80/').getHost() == 'example.com:80' && url('https://example.com/').getHost() == 'example.com'"#,
        r#"url('https://[::1]:80/').getHost() == '[::1]:80' && url('https://[::1]/').getHost() == '[::1]' && url('/path').getHost() == ''"#,
        r#"url('https://example.com:80/').getHostname() == 'example.com' && url('https://127.0.0.1/').getHostname() == '127.0.0.1'"#,
        r#"url('https://[::1]/').getHostname() == '::1' && url('/path').getHostname() == ''"#,
        r#"url('https://example.com/').getPort() == '' && url('/path').getPort() == ''"#,
        r#"url('https://example.com/path').getEscapedPath() == '/path' && url('https://example.com').getEscapedPath() == ''"#,
        r#"url('https://example.com/with space/').getEscapedPath() == '/with%20space/'"#,
        r#"url('https://example.com/a%2Fb').getEscapedPath() == '/a%2Fb'"#,
        r#"url('https://example.com/path?k1=a&k2=b&k2=c').getQuery() == {'k1': ['a'], 'k2': ['b', 'c']}"#,
        r#"url('https://example.com/path?key with spaces=value with spaces').getQuery() == {'key with spaces': ['value with spaces']}"#,
        r#"url('https://example.com/path?').getQuery() == {} && url('https://example.com/path').getQuery() == {}"#,
        r#"url('https://example.com/p?a=%41+b&bad=%zz').getQuery() == {'a': ['A b']}"#,
        r#"url('https://user:pass@example.com:80/path?query=val#fragment').getQuery() == {'query': ['val']}"#,
        r#"url('https:://kubernetes.io/').getHostname() == '' && url('https://a.example/') == url('https://a.example/')"#,
        r#"isURL('https://user:pass@example.com:80/path?query=val#fragment') && isURL('/path')"#,
        r#"!isURL('https://a:b:c/') && !isURL('../relative-path') && !isURL('')"#,
    ];
    for t in truths {
        assert_eq!(eval(t), Ok(true), "{t}");
    }
    let bad = eval(r#"url('../relative-path').getScheme() == ''"#).unwrap_err();
    assert!(bad.contains("URL parse error during conversion from string"), "{bad}");
    assert!(eval(r#"url('https://a:b:c/').getPort() == 'c'"#).is_err());
}

/// The list library's `includes` (Kubernetes 1.37), with upstream's cases (the DRA
/// `compile_test.go`): a list holds the value, a scalar equals it.
#[test]
fn includes_reads_lists_and_scalars() {
    let truths = [
        r#"device.attributes["gpu.example.com"].links.includes(2) && !device.attributes["gpu.example.com"].links.includes(4)"#,
        r#"device.attributes["gpu.example.com"].model.includes("a100") && !device.attributes["gpu.example.com"].model.includes("l4")"#,
        r#"device.attributes["gpu.example.com"].mig.includes(false) && [true, false].includes(true) && ![true, true].includes(false)"#,
        r#"[1, 2].includes(2.0) && !"abc".includes("b")"#,
    ];
    for t in truths {
        assert_eq!(eval(t), Ok(true), "{t}");
    }
}

/// cel-go's lists (version 3) and strings (version 2) extensions and optional types, which
/// the DRA environment has since 1.34, 1.29 and 1.28.
#[test]
fn the_lists_strings_and_optional_libraries_are_there() {
    let truths = [
        r#"[3, 1, 2].sort() == [1, 2, 3] && [1, 1, 2].distinct() == [1, 2] && [1, [2, 3]].flatten() == [1, 2, 3]"#,
        r#"lists.range(3) == [0, 1, 2] && [1, 2, 3, 4].slice(1, 3) == [2, 3] && [1, 2].reverse() == [2, 1]"#,
        r#"[{'n': 2}, {'n': 1}].sortBy(e, e.n) == [{'n': 1}, {'n': 2}]"#,
        r#"device.attributes["gpu.example.com"].model.charAt(0) == "a" && "a,b".split(",") == ["a", "b"]"#,
        r#""A100".lowerAscii() == "a100" && " x ".trim() == "x" && "a-b".replace("-", "_") == "a_b""#,
        r#""abc".substring(1) == "bc" && ["a", "b"].join("-") == "a-b" && strings.quote('a"b') == '"a\\"b"'"#,
        r#""%s has %d GiB at %.1f%%".format(["gpu", 80, 99.5]) == "gpu has 80 GiB at 99.5%""#,
        r#"device.attributes["gpu.example.com"].?colour.orValue("none") == "none""#,
        r#"device.attributes["gpu.example.com"].?model.value() == "a100" && optional.of(1).hasValue() && !optional.none().hasValue()"#,
        r#"[1, 2, 3].first() == optional.of(1) && [1, 2, 3].last() == optional.of(3) && ![].first().hasValue() && ![].last().hasValue()"#,
        r#"device.attributes["gpu.example.com"].links.last().orValue(0) == 3"#,
        r#"optional.unwrap([optional.of(1), optional.none()]) == [1] && [optional.none(), optional.of("a")].unwrapOpt() == ["a"]"#,
    ];
    for t in truths {
        assert_eq!(eval(t), Ok(true), "{t}");
    }
}

/// Kubernetes' format library, with upstream's examples (`library/format.go`).
#[test]
fn the_format_library_evaluates_as_upstreams() {
    let truths = [
        r#"!format.dns1123Label().validate(device.attributes["gpu.example.com"].model).hasValue()"#,
        r#"format.dns1123Label().validate("a.b") == optional.of(["must not contain dots"])"#,
        r#"format.dns1123Label().validate("my-label-name") == optional.none()"#,
        r#"!format.dns1123Subdomain().validate("apiextensions.k8s.io").hasValue() && !format.dns1035Label().validate("my-label-name").hasValue()"#,
        r#"!format.qualifiedName().validate("apiextensions.k8s.io/v1beta1").hasValue() && format.qualifiedName().validate("/x").value() == ["prefix part must be non-empty"]"#,
        r#"!format.dns1123LabelPrefix().validate("my-label-prefix-").hasValue() && !format.dns1123SubdomainPrefix().validate("mysubdomain.prefix.-").hasValue()"#,
        r#"!format.dns1035LabelPrefix().validate("my-label-prefix-").hasValue() && !format.labelValue().validate("my_value").hasValue()"#,
        r#"!format.uri().validate("http://example.com").hasValue() && format.uri().validate("../x").hasValue()"#,
        r#"!format.uuid().validate("123e4567-e89b-12d3-a456-426614174000").hasValue() && format.uuid().validate("x").value() == ["does not match the UUID format"]"#,
        r#"!format.byte().validate("aGVsbG8=").hasValue() && format.byte().validate("aGVsbG8").value() == ["invalid base64"]"#,
        r#"!format.date().validate("2021-01-01").hasValue() && format.date().validate("2021-02-30").value() == ["invalid date"]"#,
        r#"!format.datetime().validate("2021-01-01T00:00:00Z").hasValue() && format.datetime().validate("2021-01-01").value() == ["invalid datetime"]"#,
        r#"format.named("dns1123Label").hasValue() && !format.named("nope").hasValue() && format.named("uuid").value() == format.uuid()"#,
        r#"format.named("labelValue").value().validate("a b").hasValue() && format.uuid() != format.byte()"#,
        r#""%s-%d".format(["a", 1]) == "a-1""#,
    ];
    for t in truths {
        assert_eq!(eval(t), Ok(true), "{t}");
    }
}

/// cel-go's two-variable comprehensions (Kubernetes 1.32 on), with upstream's examples
/// (`ext/comprehensions.go`).
#[test]
fn two_variable_comprehensions_evaluate_as_upstreams() {
    let truths = [
        r#"device.attributes["gpu.example.com"].exists(k, v, k == "model" && v == "a100")"#,
        r#"device.attributes["gpu.example.com"].links.all(i, v, v == i + 1) && ![1, 2].all(i, v, i > 0)"#,
        r#"{'a': 1, 'b': 2}.existsOne(k, v, v == 2) && ![1, 1].exists_one(i, v, v == 1)"#,
        r#"[1, 2, 3].transformList(indexVar, valueVar, (indexVar * valueVar) + valueVar) == [1, 4, 9]"#,
        r#"[1, 2, 3].transformList(indexVar, valueVar, indexVar % 2 == 0, (indexVar * valueVar) + valueVar) == [1, 9]"#,
        r#"{'greeting': 'hello'}.transformList(k, _, k) == ['greeting'] && {'greeting': 'hello'}.transformList(_, v, v) == ['hello']"#,
        r#"[1, 2, 3].transformMap(indexVar, valueVar, (indexVar * valueVar) + valueVar) == {0: 1, 1: 4, 2: 9}"#,
        r#"[1, 2, 3].transformMap(indexVar, valueVar, indexVar % 2 == 0, (indexVar * valueVar) + valueVar) == {0: 1, 2: 9}"#,
        r#"{'greeting': 'hello'}.transformMap(k, v, v + '!') == {'greeting': 'hello!'}"#,
        r#"{'greeting': 'hello'}.transformMapEntry(keyVar, valueVar, {valueVar: keyVar}) == {'hello': 'greeting'}"#,
        r#"[1, 2, 3].transformMapEntry(indexVar, valueVar, {valueVar: indexVar}) == {1: 0, 2: 1, 3: 2}"#,
        r#"[[1, 2], [3]].all(i, l, l.all(j, v, v > i + j - 1))"#,
    ];
    for t in truths {
        assert_eq!(eval(t), Ok(true), "{t}");
    }
    let duplicate = eval(r#"[1, 1].transformMapEntry(i, v, {v: i}) == {}"#).unwrap_err();
    assert!(duplicate.contains("insert failed: key 1 already exists"), "{duplicate}");
    assert!(Environment::new().compile("[1].all(x, x, true)").is_err());
    assert!(Environment::new().compile("[1].all(x.y, v, true)").is_err());
}

/// Kubernetes enables neither cel-go's math nor its encoders extension for DRA selectors:
/// the apiserver does not compile such a selector, so it is an error here too, not a gap.
#[test]
fn math_and_encoders_are_not_in_the_dra_environment() {
    for t in [r#"math.greatest(1, 2) == 2"#, r#"base64.encode(b"a") == "YQ==""#] {
        let e = eval_typed(t).unwrap_err();
        assert!(!matches!(e, CelError::Unsupported { .. }), "{t}: {e}");
    }
}

/// What Kubernetes has and dracheck lacks is no verdict, named, whether the call is seen
/// when compiling or only met when evaluating; wrong selectors stay wrong. (Every function of
/// the 1.37 environment is implemented: a function of a later release stands for one.)
#[test]
fn what_dracheck_lacks_is_unsupported_not_wrong() {
    let env = Environment::lacking(&[("futureFunction", "a later release's library"), ("format.named", "format")]);
    let d = gpu();
    let eval_in = |t: &str| env.compile(t).and_then(|s| env.matches(&s, &DeviceInput::of(DRIVER, &d)));
    let cases = [
        (r#"device.attributes["gpu.example.com"].model.futureFunction() == "a100""#, "`futureFunction`"),
        (r#"[1].exists(x, futureFunction(x))"#, "`futureFunction`"),
        (r#"format.named("uuid").hasValue()"#, "`format.named` (format)"),
    ];
    for (t, named) in cases {
        let e = eval_in(t).expect_err(t);
        assert!(matches!(&e, CelError::Unsupported { feature } if feature.contains(named)), "{t}: {e:?}");
        assert!(e.to_string().starts_with("dracheck cannot evaluate this selector: "), "{e}");
    }
    // In the real environment the function of a later release is unknown: a wrong selector
    // for this Kubernetes.
    assert!(matches!(
        eval_typed(r#"device.attributes["gpu.example.com"].model.futureFunction() == "a100""#),
        Err(CelError::Runtime(_))
    ));
    // Wrong selectors stay wrong: a missing attribute, a syntax error.
    assert!(matches!(eval_typed(r#"device.attributes["gpu.example.com"].colour == "red""#), Err(CelError::Runtime(_))));
    assert!(matches!(eval_typed(r#"device.driver == "#), Err(CelError::Compile(_))));
    assert!(matches!(eval_typed(r#"device.`driver` == "x""#), Err(CelError::Compile(_))));
}

/// `device.allowMultipleAllocations` (consumable capacity): the device's flag, false when unset.
#[test]
fn allow_multiple_allocations_is_the_devices_flag() {
    let env = Environment::new();
    let sel = env.compile("device.allowMultipleAllocations").unwrap();
    let mut d = gpu();
    assert_eq!(env.matches(&sel, &DeviceInput::of(DRIVER, &d)), Ok(false));
    d.allow_multiple_allocations = Some(true);
    assert_eq!(env.matches(&sel, &DeviceInput::of(DRIVER, &d)), Ok(true));
}
