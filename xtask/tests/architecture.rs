//! The architecture invariants of ARCHITECTURE.md ("Architecture invariants"), read from the
//! workspace's own dependency graph (`cargo metadata`), so that a dependency that breaks one
//! fails here and not in a later review; and two read from the source text: only `xtask`
//! chooses exit codes, and no program looks in its source tree at run time.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What a crate may depend on among the workspace's crates (normal or build dependencies).
enum Rule {
    /// These and no other.
    Only(&'static [&'static str]),
    /// Anything but these.
    Not(&'static [&'static str]),
}

/// A crate, the rule its workspace dependencies keep, and why.
struct Invariant {
    krate: &'static str,
    rule: Rule,
    why: &'static str,
}

const DRIVERS: [&str; 3] = ["dracheck-mock-driver", "dracheck-example-driver", "dracheck-nvidia"];

const INVARIANTS: &[Invariant] = &[
    Invariant {
        krate: "dracheck-objects",
        rule: Rule::Only(&[]),
        why: "the objects every layer builds on depend on no other layer",
    },
    Invariant {
        krate: "dracheck-kubelet-api",
        rule: Rule::Only(&[]),
        why: "the kubelet plugin protocol is the protocol only: kubelet side and driver side both build on it",
    },
    Invariant {
        krate: "dracheck-results",
        rule: Rule::Only(&[]),
        why: "the result schema is read by reports and other tools without the suite: serde only",
    },
    Invariant {
        krate: "dracheck-adapter",
        rule: Rule::Only(&[]),
        why: "what a driver states of itself for the suite is an interface both sides build on, below the clusters",
    },
    Invariant {
        krate: "dracheck-gobuild",
        rule: Rule::Only(&[]),
        why: "building Go programs is a tool the clusters and Go-written drivers share; it knows neither",
    },
    Invariant {
        krate: "dracheck-clusters",
        rule: Rule::Only(&["dracheck-objects", "dracheck-kubelet-api", "dracheck-adapter", "dracheck-gobuild"]),
        why: "clusters knows nothing of suites or of any driver: it runs whatever driver program it is given",
    },
    Invariant {
        krate: "dracheck-explain",
        rule: Rule::Only(&["dracheck-objects"]),
        why: "explain judges objects read from any cluster; it starts none and runs no suite",
    },
    Invariant {
        krate: "dracheck-mock-driver",
        rule: Rule::Only(&["dracheck-objects", "dracheck-kubelet-api", "dracheck-adapter"]),
        why: "a driver is what the suite checks; it cannot know the checker, and states itself in an adapter",
    },
    Invariant {
        krate: "dracheck-example-driver",
        rule: Rule::Only(&["dracheck-objects", "dracheck-adapter", "dracheck-gobuild"]),
        why: "a driver is what the suite checks; it cannot know the checker, and states itself in an adapter",
    },
    Invariant {
        krate: "dracheck-nvidia",
        rule: Rule::Only(&["dracheck-objects", "dracheck-adapter"]),
        why: "a driver is what the suite checks; it cannot know the checker, and states itself in an adapter",
    },
    Invariant {
        krate: "dracheck-suites",
        rule: Rule::Not(&["dracheck-report", "xtask"]),
        why: "reports render results; the suite that makes them does not render",
    },
    Invariant {
        krate: "dracheck-report",
        rule: Rule::Only(&["dracheck-results"]),
        why: "reports render a result file alone: they read it through dracheck-results, not the suite",
    },
];

/// Workspace crate → the workspace crates it depends on (normal and build dependencies:
/// dev-dependencies are for tests, which may drive anything).
type Graph = BTreeMap<String, BTreeSet<String>>;

fn workspace_graph() -> Graph {
    graph_of(&metadata())
}

fn metadata() -> serde_json::Value {
    let out = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn graph_of(meta: &serde_json::Value) -> Graph {
    let packages = meta["packages"].as_array().expect("packages");
    let members: BTreeSet<String> = packages.iter().filter_map(|p| p["name"].as_str().map(str::to_string)).collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|d| d["kind"].as_str() != Some("dev"))
                .filter_map(|d| d["name"].as_str())
                .filter(|name| members.contains(*name))
                .map(str::to_string)
                .collect();
            (p["name"].as_str().unwrap_or_default().to_string(), deps)
        })
        .collect()
}

/// Every broken invariant, as "crate depends on dep: why".
fn violations(graph: &Graph) -> Vec<String> {
    let mut found = Vec::new();
    for inv in INVARIANTS {
        let Some(deps) = graph.get(inv.krate) else {
            found.push(format!("{} is not in the workspace any more: update INVARIANTS", inv.krate));
            continue;
        };
        let broken = |dep: &&String| match inv.rule {
            Rule::Only(allowed) => !allowed.contains(&dep.as_str()),
            Rule::Not(forbidden) => forbidden.contains(&dep.as_str()),
        };
        for dep in deps.iter().filter(broken) {
            found.push(format!("{} depends on {dep}: {}", inv.krate, inv.why));
        }
    }
    // Nothing depends on a driver but the command line, which picks one for `--driver`, and
    // tests: the suite and the clusters know a driver only by the adapter it states itself in.
    for (krate, deps) in graph {
        if krate == "xtask" {
            continue;
        }
        for driver in DRIVERS.iter().filter(|d| deps.contains(**d)) {
            found.push(format!("{krate} depends on {driver}: only xtask knows specific drivers"));
        }
    }
    found
}

#[test]
fn the_workspace_keeps_its_architecture_invariants() {
    let graph = workspace_graph();
    assert!(graph.len() >= 10, "the workspace's crates are all read: {:?}", graph.keys());
    assert_eq!(violations(&graph), Vec::<String>::new());
}

/// The check can fail: a graph with a forbidden edge added is caught, naming the edge and why.
#[test]
fn a_forbidden_dependency_is_named_with_the_invariant_it_breaks() {
    let mut graph = workspace_graph();
    graph.get_mut("dracheck-clusters").unwrap().insert("dracheck-suites".into());
    graph.get_mut("dracheck-suites").unwrap().insert("dracheck-mock-driver".into());
    let found = violations(&graph);
    assert_eq!(
        found,
        [
            "dracheck-clusters depends on dracheck-suites: clusters knows nothing of suites or of any driver: it runs \
             whatever driver program it is given",
            "dracheck-suites depends on dracheck-mock-driver: only xtask knows specific drivers",
        ]
    );
}

/// The `src/**/*.rs` files of every workspace member but `xtask`.
fn library_sources() -> Vec<PathBuf> {
    sources(false)
}

/// The `src/**/*.rs` files of every workspace member, `xtask` too where `with_xtask`.
fn sources(with_xtask: bool) -> Vec<PathBuf> {
    fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, found);
            } else if path.extension().is_some_and(|x| x == "rs") {
                found.push(path);
            }
        }
    }
    let meta = metadata();
    let mut found = Vec::new();
    for p in meta["packages"].as_array().expect("packages") {
        if p["name"].as_str() == Some("xtask") && !with_xtask {
            continue;
        }
        let manifest = Path::new(p["manifest_path"].as_str().expect("a manifest path"));
        let src = manifest.parent().unwrap().join("src");
        if src.is_dir() {
            walk(&src, &mut found);
        }
    }
    found.sort();
    found
}

/// Every line of `text` (the file `path`) that chooses an exit code, as "path:line: text": an
/// `EXIT_` constant, or a function named `exit_code`. Outside `xtask` an error says what kind
/// of failure it is (a `Failure`), and the command line chooses the number.
fn exit_code_choices(path: &str, text: &str) -> Vec<String> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let starts_word = |line: &str, at: usize| !line[..at].ends_with(ident);
    let ends_word = |line: &str, end: usize| !line[end..].starts_with(ident);
    text.lines()
        .enumerate()
        .filter(|(_, line)| {
            line.match_indices("EXIT_").any(|(at, _)| starts_word(line, at))
                || line.match_indices("fn exit_code").any(|(at, m)| ends_word(line, at + m.len()))
        })
        .map(|(i, line)| format!("{path}:{}: {}", i + 1, line.trim()))
        .collect()
}

#[test]
fn only_xtask_chooses_exit_codes() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let root = root.canonicalize().unwrap();
    let sources = library_sources();
    assert!(sources.len() >= 50, "the members' sources are all read: {}", sources.len());
    let found: Vec<String> = sources
        .iter()
        .flat_map(|path| {
            let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let shown = path.strip_prefix(&root).unwrap_or(path).display().to_string();
            exit_code_choices(&shown, &text)
        })
        .collect();
    assert!(
        found.is_empty(),
        "only xtask chooses exit codes (xtask/src/exit.rs); a library returns a `Failure` kind instead:\n{}",
        found.join("\n")
    );
}

/// The check can fail: an exit-code constant or an `exit_code` method is named with its line;
/// a name that only starts the same way is not.
#[test]
fn an_exit_code_outside_xtask_is_named_with_its_file_and_line() {
    let text = "pub const EXIT_BAD_INPUT: i32 = 2;\n\
                impl E {\n    \
                    pub fn exit_code(&self) -> i32 {\n\
                fn exit_code_of(status: ExitStatus) -> i32 {\n\
                const NO_EXIT_HERE: u8 = 0;\n\
                Err(e) => e.exit_code(),\n";
    assert_eq!(
        exit_code_choices("clusters/src/error.rs", text),
        [
            "clusters/src/error.rs:1: pub const EXIT_BAD_INPUT: i32 = 2;",
            "clusters/src/error.rs:3: pub fn exit_code(&self) -> i32 {"
        ]
    );
}

/// The places that may read `CARGO_MANIFEST_DIR` at run time, and why: each looks for the
/// checkout only to work on it, and does without it.
const SOURCE_TREE_READERS: &[(&str, &str)] = &[
    ("xtask/src/lib.rs", "`test` and `dist` work on the checkout, and say so outside one"),
    ("xtask/src/test_plan.rs", "`test` runs each test binary as cargo does, in its package's dir"),
    ("adapter/src/lib.rs", "`workspace_binary` builds a driver in the checkout the program runs from"),
];

/// Every line of `text` (the file `path`) outside its test code that names
/// `CARGO_MANIFEST_DIR` (`env!`, `option_env!`, `std::env::var`), as "path:line: text".
/// Test code is a `#[cfg(test)]` module; build scripts are not under `src/`.
fn source_tree_reads(path: &str, text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.trim() == "#[cfg(test)]"
            && let Some(next) = lines.get(i + 1)
            && next.trim_start().starts_with("mod ")
            && next.trim_end().ends_with('{')
        {
            // Skip the module: up to its closing brace at the same indentation.
            let indent = &next[..next.len() - next.trim_start().len()];
            let close = format!("{indent}}}");
            i += 2;
            while i < lines.len() && lines[i].trim_end() != close {
                i += 1;
            }
            i += 1;
            continue;
        }
        if line.contains("\"CARGO_MANIFEST_DIR\"") && !line.trim_start().starts_with("//") {
            found.push(format!("{path}:{}: {}", i + 1, line.trim()));
        }
        i += 1;
    }
    found
}

/// A dracheck binary, installed or unpacked from the release archive, needs no checkout: its
/// profiles and inventories are embedded (`include_bytes!`, `suites/build.rs`), and nothing
/// outside the places in [`SOURCE_TREE_READERS`] reads `CARGO_MANIFEST_DIR`, the source tree
/// it was built from, at run time.
#[test]
fn no_program_reads_its_source_tree_at_run_time() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).canonicalize().unwrap();
    let sources = sources(true);
    assert!(sources.iter().any(|p| p.ends_with("xtask/src/lib.rs")), "xtask's sources are read too");
    let found: Vec<String> = sources
        .iter()
        .flat_map(|path| {
            let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let shown = path.strip_prefix(&root).unwrap_or(path).display().to_string();
            if SOURCE_TREE_READERS.iter().any(|(allowed, _)| *allowed == shown) {
                return Vec::new();
            }
            source_tree_reads(&shown, &text)
        })
        .collect();
    assert!(
        found.is_empty(),
        "a program must not read its source tree at run time (embed the file: include_bytes!, or list a folder \
         in a build.rs); the allowed places are {SOURCE_TREE_READERS:?}:\n{}",
        found.join("\n")
    );
}

/// The check can fail: a run-time read is named with its line; one in a test module, or in a
/// comment, is not.
#[test]
fn a_source_tree_read_is_named_with_its_file_and_line() {
    let text = "fn dir() -> PathBuf {\n    \
                    Path::new(env!(\"CARGO_MANIFEST_DIR\")).join(\"profiles\")\n\
                }\n\
                // env!(\"CARGO_MANIFEST_DIR\") in a comment\n\
                #[cfg(test)]\n\
                mod tests {\n    \
                    fn f() { env!(\"CARGO_MANIFEST_DIR\"); }\n\
                }\n\
                fn later() { std::env::var(\"CARGO_MANIFEST_DIR\"); }\n";
    assert_eq!(
        source_tree_reads("suites/src/x.rs", text),
        [
            "suites/src/x.rs:2: Path::new(env!(\"CARGO_MANIFEST_DIR\")).join(\"profiles\")",
            "suites/src/x.rs:9: fn later() { std::env::var(\"CARGO_MANIFEST_DIR\"); }"
        ]
    );
}
