//! The architecture invariants of ARCHITECTURE.md ("Architecture invariants"), read from the
//! workspace's own dependency graph (`cargo metadata`), so that a dependency that breaks one
//! fails here and not in a later review.

use std::collections::{BTreeMap, BTreeSet};

/// A crate, the workspace crates it must not depend on (normal or build dependencies), and why.
struct Invariant {
    krate: &'static str,
    forbidden: &'static [&'static str],
    why: &'static str,
}

const DRIVERS: [&str; 3] = ["dracheck-mock-driver", "dracheck-example-driver", "dracheck-nvidia"];

const INVARIANTS: &[Invariant] = &[
    Invariant {
        krate: "dracheck-objects",
        forbidden: &[
            "dracheck-clusters",
            "dracheck-suites",
            "dracheck-report",
            "dracheck-explain",
            "dracheck-kubelet-api",
            "dracheck-mock-driver",
            "dracheck-example-driver",
            "dracheck-nvidia",
            "xtask",
        ],
        why: "the objects every layer builds on depend on no other layer",
    },
    Invariant {
        krate: "dracheck-kubelet-api",
        forbidden: &[
            "dracheck-objects",
            "dracheck-clusters",
            "dracheck-suites",
            "dracheck-report",
            "dracheck-explain",
            "dracheck-mock-driver",
            "dracheck-example-driver",
            "dracheck-nvidia",
            "xtask",
        ],
        why: "the kubelet plugin protocol is the protocol only: kubelet side and driver side both build on it",
    },
    Invariant {
        krate: "dracheck-clusters",
        forbidden: &[
            "dracheck-suites",
            "dracheck-report",
            "dracheck-explain",
            "dracheck-mock-driver",
            "dracheck-example-driver",
            "dracheck-nvidia",
            "xtask",
        ],
        why: "clusters knows nothing of suites or of any driver: it runs whatever driver program it is given",
    },
    Invariant {
        krate: "dracheck-explain",
        forbidden: &[
            "dracheck-clusters",
            "dracheck-suites",
            "dracheck-report",
            "dracheck-mock-driver",
            "dracheck-example-driver",
            "dracheck-nvidia",
            "xtask",
        ],
        why: "explain judges objects read from any cluster; it starts none and runs no suite",
    },
    Invariant {
        krate: "dracheck-mock-driver",
        forbidden: &["dracheck-clusters", "dracheck-suites", "dracheck-report", "dracheck-explain", "xtask"],
        why: "a driver is what the suite checks; it cannot know the checker",
    },
    Invariant {
        krate: "dracheck-example-driver",
        forbidden: &["dracheck-suites", "dracheck-report", "dracheck-explain", "xtask"],
        why: "a driver is what the suite checks; it cannot know the checker",
    },
    Invariant {
        krate: "dracheck-nvidia",
        forbidden: &["dracheck-clusters", "dracheck-suites", "dracheck-report", "dracheck-explain", "xtask"],
        why: "a driver is what the suite checks; it cannot know the checker",
    },
    Invariant {
        krate: "dracheck-suites",
        forbidden: &["dracheck-report", "xtask"],
        why: "reports render results; the suite that makes them does not render",
    },
    Invariant { krate: "dracheck-report", forbidden: &["xtask"], why: "only the command line sits on top" },
];

/// Workspace crate → the workspace crates it depends on (normal and build dependencies:
/// dev-dependencies are for tests, which may drive anything).
type Graph = BTreeMap<String, BTreeSet<String>>;

fn workspace_graph() -> Graph {
    let out = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    graph_of(&meta)
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
        for dep in inv.forbidden.iter().filter(|d| deps.contains(**d)) {
            found.push(format!("{} depends on {dep}: {}", inv.krate, inv.why));
        }
    }
    // Nothing depends on a driver except the layers that run it (suites, xtask) and tests.
    for (krate, deps) in graph {
        if matches!(krate.as_str(), "dracheck-suites" | "xtask") {
            continue;
        }
        for driver in DRIVERS.iter().filter(|d| deps.contains(**d)) {
            found.push(format!("{krate} depends on {driver}: only suites and xtask know specific drivers"));
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
    graph.get_mut("dracheck-report").unwrap().insert("dracheck-mock-driver".into());
    let found = violations(&graph);
    assert_eq!(
        found,
        [
            "dracheck-clusters depends on dracheck-suites: clusters knows nothing of suites or of any driver: it runs \
             whatever driver program it is given",
            "dracheck-report depends on dracheck-mock-driver: only suites and xtask know specific drivers",
        ]
    );
}
