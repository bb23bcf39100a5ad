//! `cargo xtask explain` on bad input and an unreachable cluster: one-paragraph errors that
//! name the fix, and their exit codes. (Unknown names and pods without claims need a cluster:
//! explain/tests/local.rs.)

mod common;

use common::{text, xtask};

/// A kubeconfig for a cluster at a loopback port where nothing listens.
fn dead_cluster(dir: &std::path::Path) -> std::path::PathBuf {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{port}\n    \
             insecure-skip-tls-verify: true\nusers:\n- name: u\n  user:\n    token: x\ncontexts:\n- name: ctx\n  context:\n    \
             cluster: c\n    user: u\ncurrent-context: ctx\n"
        ),
    )
    .unwrap();
    path
}

#[test]
fn explain_has_help() {
    let out = xtask(&["explain", "--help"]);
    assert!(out.status.success(), "{}", text(&out));
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in ["NAMESPACE/NAME", "--kubeconfig", "--context", "--output"] {
        assert!(help.contains(flag), "help names {flag}: {help}");
    }
}

#[test]
fn bad_input_and_a_dead_cluster_get_their_exit_codes() {
    let tmp = tempfile::tempdir().unwrap();
    let dead = dead_cluster(tmp.path());
    let dead = dead.to_str().unwrap();
    let cases: Vec<(Vec<&str>, i32, &str)> = vec![
        (vec!["explain", "just-a-name", "--kubeconfig", dead], 2, "is not NAMESPACE/NAME"),
        (vec!["explain", "default/", "--kubeconfig", dead], 2, "is not NAMESPACE/NAME"),
        (vec!["explain", "default/x", "--kubeconfig", "/nonexistent/kubeconfig"], 2, "cannot read the kubeconfig"),
        (vec!["explain", "default/x", "--kubeconfig", dead, "--context", "nope"], 2, "the contexts there: "),
        (vec!["explain", "default/x", "--kubeconfig", dead], 3, "the cluster cannot be reached"),
        (vec!["explain", "default/x", "--kubeconfig", dead, "--output", "yaml"], 2, "invalid value 'yaml'"),
    ];
    for (args, code, needle) in cases {
        let out = xtask(&args);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", text(&out));
        assert!(text(&out).contains(needle), "{args:?}: {}", text(&out));
        assert!(out.stdout.is_empty(), "{args:?}: errors go to stderr only: {}", text(&out));
    }
}
