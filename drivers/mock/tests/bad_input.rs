//! Bad input stops the driver before it creates anything: one paragraph on stderr that says
//! what is wrong and where, exit code 2 (bad input) or 3 (cluster unreachable), and no
//! sockets or checkpoint left behind.

use std::path::Path;
use std::process::{Command, Output};

fn run(dir: &Path, inventory: &Path, kubeconfig: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dracheck-mock-driver"))
        .args(["--node-name", "node-a", "--inventory"])
        .arg(inventory)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--registrar-dir")
        .arg(dir.join("reg"))
        .arg("--plugin-dir")
        .arg(dir.join("plugin"))
        .arg("--cdi-dir")
        .arg(dir.join("cdi"))
        .output()
        .unwrap()
}

fn assert_nothing_created(dir: &Path) {
    for sub in ["reg", "plugin", "cdi"] {
        assert!(!dir.join(sub).exists(), "{sub} was created by a failed start");
    }
}

/// A kubeconfig for an apiserver on a 127.0.0.1 port nothing listens on.
fn closed_port_kubeconfig(dir: &Path) -> std::path::PathBuf {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{port}\n    \
             insecure-skip-tls-verify: true\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n\
             current-context: c\nusers:\n- name: u\n  user:\n    token: t\n"
        ),
    )
    .unwrap();
    path
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn an_invalid_inventory_names_file_line_and_field() {
    let dir = tempfile::Builder::new().prefix("mk").tempdir_in("/tmp").unwrap();
    let inventory = dir.path().join("broken.yaml");
    std::fs::write(
        &inventory,
        "apiVersion: dracheck.io/v1alpha1\nkind: MockInventory\ngroups:\n  - nodes: [\"*\"]\n    devices:\n      \
         - name: gpu-0\n        capacity:\n          memory: plenty\n",
    )
    .unwrap();
    let output = run(dir.path(), &inventory, &closed_port_kubeconfig(dir.path()));
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{message}");
    assert!(message.contains(&inventory.display().to_string()), "names the file: {message}");
    assert!(message.contains("line 8"), "names the line: {message}");
    assert!(message.contains("groups[0].devices[0].capacity.memory"), "names the field: {message}");
    assert!(message.contains("not a quantity"), "{message}");
    assert_nothing_created(dir.path());
}

#[test]
fn duplicate_device_names_are_bad_input() {
    let dir = tempfile::Builder::new().prefix("mk").tempdir_in("/tmp").unwrap();
    let inventory = dir.path().join("dup.yaml");
    std::fs::write(
        &inventory,
        "apiVersion: dracheck.io/v1alpha1\nkind: MockInventory\ngroups:\n  - nodes: [node-a]\n    devices:\n      \
         - name: gpu-0\n      - name: gpu-1\n      - name: gpu-0\n",
    )
    .unwrap();
    let output = run(dir.path(), &inventory, &closed_port_kubeconfig(dir.path()));
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{message}");
    assert!(message.contains("\"gpu-0\" is used twice") && message.contains("line 8"), "{message}");
    assert_nothing_created(dir.path());
}

#[test]
fn a_missing_inventory_file_is_bad_input() {
    let dir = tempfile::Builder::new().prefix("mk").tempdir_in("/tmp").unwrap();
    let output = run(dir.path(), &dir.path().join("nope.yaml"), &closed_port_kubeconfig(dir.path()));
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("nope.yaml"), "{}", stderr(&output));
}

#[test]
fn an_unreachable_apiserver_exits_3_and_leaves_nothing() {
    let dir = tempfile::Builder::new().prefix("mk").tempdir_in("/tmp").unwrap();
    let kubeconfig = closed_port_kubeconfig(dir.path());
    let inventory = Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory/default.yaml");
    let started = std::time::Instant::now();
    let output = run(dir.path(), &inventory, &kubeconfig);
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(3), "{message}");
    assert!(message.contains("cannot reach the Kubernetes apiserver at https://127.0.0.1:"), "{message}");
    assert!(message.contains("--kubeconfig"), "says what to check: {message}");
    assert!(started.elapsed().as_secs() < 20, "gives up in bounded time");
    assert_nothing_created(dir.path());
}

#[test]
fn an_unknown_fault_is_a_usage_error() {
    let output = Command::new(env!("CARGO_BIN_EXE_dracheck-mock-driver"))
        .args(["--node-name", "n", "--inventory", "x.yaml", "--fault", "explode"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("unknown fault"), "{}", stderr(&output));
}
