//! `cargo xtask dist` as a release is made and used: the archive built (dev profile, to keep
//! the test short), its checksum right, and the binaries unpacked outside the checkout running
//! there, in an environment without cargo's variables: `--version`, `list`, `profile validate`,
//! a dry run, a short real conformance run on the mock beside it, and `cluster up --nodes`
//! (whose node agent is `dracheck cluster agent`). That the binaries read nothing of the
//! source tree is held by the architecture test (`env!("CARGO_MANIFEST_DIR")`). The same build
//! writes the container image (`--image`): its OCI layout and docker manifest are read back,
//! and its layer holds the same binaries.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use dracheck_clusters::oci::{self, Linking, sha256_hex};

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// `program args` in `dir`, with this process's environment less cargo's and Rust's variables,
/// the dynamic-library path cargo sets for tests, and what would point a run elsewhere
/// (a kubeconfig, CI output dirs, a mock program to use instead of the one beside).
fn outside(program: &Path, args: &[&str], dir: &Path) -> Output {
    const DROPPED: [&str; 6] = [
        "KUBECONFIG",
        "ARTIFACTS",
        "GITHUB_STEP_SUMMARY",
        "DRACHECK_MOCK_DRIVER",
        "DRACHECK_NODE_KIND",
        "LD_LIBRARY_PATH",
    ];
    let mut cmd = Command::new(program);
    cmd.args(args).current_dir(dir).env_clear();
    for (key, value) in std::env::vars_os() {
        let name = key.to_string_lossy();
        if name.starts_with("CARGO") || name.starts_with("RUST") || DROPPED.contains(&name.as_ref()) {
            continue;
        }
        cmd.env(key, value);
    }
    cmd.output().unwrap_or_else(|e| panic!("{} runs: {e}", program.display()))
}

#[test]
fn the_archive_runs_without_a_checkout() {
    let out_dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let dist = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["dist", "--debug", "--image", "--out", out_dir.path().to_str().unwrap()])
        .output()
        .expect("xtask runs");
    assert!(dist.status.success(), "{}", text(&dist));
    eprintln!("dist --debug: {:.1} s", started.elapsed().as_secs_f64());

    // The archive and its checksum, as `sha256sum -c` reads them.
    let version = env!("CARGO_PKG_VERSION");
    let name = format!("dracheck-{version}-{}-unknown-linux-gnu.tar.gz", std::env::consts::ARCH);
    let image_name = format!("dracheck-{version}-{}-unknown-linux-gnu-oci.tar", std::env::consts::ARCH);
    let archive = out_dir.path().join(&name);
    let image_archive = out_dir.path().join(&image_name);
    let printed: Vec<&str> = std::str::from_utf8(&dist.stdout).unwrap().lines().collect();
    assert_eq!(
        printed,
        [
            archive.to_str().unwrap(),
            image_archive.to_str().unwrap(),
            out_dir.path().join("SHA256SUMS").to_str().unwrap()
        ],
        "{}",
        text(&dist)
    );
    let sums = std::fs::read_to_string(out_dir.path().join("SHA256SUMS")).unwrap();
    let bytes = std::fs::read(&archive).unwrap();
    let image_bytes = std::fs::read(&image_archive).unwrap();
    assert_eq!(sums, format!("{}  {name}\n{}  {image_name}\n", sha256_hex(&bytes), sha256_hex(&image_bytes)));

    // Unpacked elsewhere: the checkout is not where the binaries look.
    let unpacked = tempfile::tempdir().unwrap();
    tar::Archive::new(flate2::read::GzDecoder::new(bytes.as_slice())).unpack(unpacked.path()).unwrap();
    let top = unpacked.path().join(format!("dracheck-{version}"));
    for file in [
        "bin/dracheck",
        "bin/dracheck-mock-driver",
        "completions/dracheck.bash",
        "completions/_dracheck",
        "completions/dracheck.fish",
        "man/man1/dracheck.1",
        "man/man1/dracheck-conformance.1",
        "README.md",
        "LICENSE",
    ] {
        assert!(top.join(file).is_file(), "the archive has {file}");
    }
    let dracheck: PathBuf = top.join("bin/dracheck");
    image_holds(&image_bytes, &top, version);
    drop(image_bytes);
    let work = tempfile::tempdir().unwrap();
    let here = work.path();

    let out = outside(&dracheck, &["--version"], here);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("dracheck {version}"), "{}", text(&out));
    let out = outside(&dracheck, &["list"], here);
    assert!(out.status.success() && text(&out).contains("plugin.registration.info"), "{}", text(&out));

    std::fs::write(here.join("good.yaml"), include_str!("../../profiles/mock/standard-inference.yaml")).unwrap();
    std::fs::write(here.join("bad.yaml"), "apiVersion: dracheck.io/v1alpha1\nkind: DeviceProfile\n").unwrap();
    let out = outside(&dracheck, &["profile", "validate", "good.yaml"], here);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = outside(&dracheck, &["profile", "validate", "bad.yaml"], here);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("bad.yaml"), "the error names the file: {}", text(&out));

    // The shipped profiles come out of the binary; nothing starts.
    let out = outside(&dracheck, &["conformance", "--driver", "mock", "--dry-run"], here);
    assert!(out.status.success(), "{}", text(&out));
    for profile in ["standard-inference", "training-intensive", "partitioned-inference", "shared-by-memory"] {
        assert!(text(&out).contains(&format!("profile {profile} (")), "{profile}: {}", text(&out));
    }
    assert!(!text(&out).contains(env!("CARGO_MANIFEST_DIR")), "nothing from the checkout: {}", text(&out));

    // A short real run: the mock program beside dracheck, on the embedded inventory.
    let started = Instant::now();
    let args = [
        "conformance",
        "--driver",
        "mock",
        "--node-kind",
        "emulated",
        "--nodes",
        "1",
        "--only",
        "plugin.registration.*",
        "--only",
        "plugin.slices.match-inventory",
        "--out",
        "reports",
    ];
    let out = outside(&dracheck, &args, here);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("4 passed, 0 failed"), "{}", text(&out));
    assert!(std::fs::read_dir(here.join("reports")).unwrap().count() >= 4, "the result and its reports");
    eprintln!("conformance run: {:.1} s", started.elapsed().as_secs_f64());

    // `cluster up --nodes` starts its node agent as `<this program> cluster agent`, and the
    // commands it suggests name the program that runs.
    let state = here.join("state");
    let state_s = state.to_str().unwrap();
    let up = outside(
        &dracheck,
        &["cluster", "up", "--state-dir", state_s, "--nodes", "1", "--driver", "mock", "--node-kind", "emulated"],
        here,
    );
    let down = outside(&dracheck, &["cluster", "down", "--state-dir", state_s], here);
    assert!(up.status.success(), "{}", text(&up));
    assert!(
        text(&up).contains(&format!("stop it with `dracheck cluster down --state-dir {state_s}`")),
        "{}",
        text(&up)
    );
    assert!(down.status.success() && text(&down).contains("node-agent"), "{}", text(&down));
}

/// The image archive: named `dracheck.io/dracheck:<version>` by its index (containerd, podman)
/// and by `manifest.json` (docker), its blobs where the digests say, and a layer of the
/// unpacked binaries, uncompressed (`--debug`), with their loader, `/tmp` and root's home.
fn image_holds(archive: &[u8], unpacked: &Path, version: &str) {
    let name = format!("dracheck.io/dracheck:{version}");
    let image = oci::open(archive).unwrap_or_else(|e| panic!("the image archive: {e}"));
    assert_eq!(image.tag, name, "manifest.json's RepoTags");
    let (index, manifest) = image.oci.expect("an OCI layout: oci-layout and index.json");
    let annotations = &index["manifests"][0]["annotations"];
    assert_eq!(
        (&annotations["io.containerd.image.name"], &annotations["org.opencontainers.image.ref.name"]),
        (&name.as_str().into(), &version.into())
    );
    assert_eq!(manifest["layers"][0]["mediaType"], oci::MEDIA_LAYER);
    assert_eq!(image.config["config"]["Entrypoint"], serde_json::json!(["/usr/bin/dracheck"]));
    let layer: BTreeMap<String, oci::Item> =
        oci::items(&image.layer).unwrap().into_iter().map(|i| (i.path.clone(), i)).collect();
    for bin in ["dracheck", "dracheck-mock-driver"] {
        let item = &layer[&format!("usr/bin/{bin}")];
        assert_eq!(item.mode, 0o755, "{bin}");
        assert!(
            item.data == std::fs::read(unpacked.join("bin").join(bin)).unwrap(),
            "the image's {bin} is the archive's"
        );
    }
    let Some(Linking::Dynamic { interpreter }) = oci::elf_linking(&layer["usr/bin/dracheck"].data) else {
        panic!("dracheck is linked dynamically, against glibc")
    };
    assert_eq!(layer[interpreter.trim_start_matches('/')].kind, tar::EntryType::Regular, "{interpreter}");
    for lib in ["libc.so.6", "libm.so.6", "libgcc_s.so.1"] {
        assert!(layer.keys().any(|p| p.ends_with(&format!("/{lib}"))), "{lib}: {:?}", layer.keys());
    }
    assert_eq!(layer["tmp/"].mode, 0o1777);
    assert_eq!(layer["root/"].kind, tar::EntryType::Directory);
}
