//! `cargo xtask dist --image`: dracheck as a container image, [`REPOSITORY`]`:<version>`,
//! written without Docker by the clusters' image writer ([`dracheck_clusters::oci`]) as an OCI
//! image layout that also carries docker's `manifest.json`, so that `ctr -n k8s.io images
//! import`, `docker load` and `podman load` all read it and name it, with no flags.
//!
//! One layer and no distribution under it: `/usr/bin/dracheck`, `/usr/bin/dracheck-mock-driver`
//! beside it (where `--driver mock` looks for it), the ELF interpreter and the shared libraries
//! the two programs load, each where the image's loader looks for it, `/etc/passwd` and
//! `/etc/group` (root and nobody), an `/etc/nsswitch.conf` (files, then DNS), `/tmp` (1777) and
//! an empty `/root`, the home. Entrypoint `/usr/bin/dracheck`, `PATH` and `HOME` set, working
//! dir `/`.
//!
//! It runs as root (user 0): the suite's plugin tier serves the kubelet's plugin sockets and
//! makes its temp dirs where a driver's kubelet plugin would, under root-owned dirs of a node;
//! another user would fail there instead of judging the driver. A pod that runs only other
//! tiers can still set `runAsUser`.
//!
//! Same inputs, same bytes, as every image written there. The release layer is gzipped; the
//! `--debug` one is not (its binaries are ~215 MB, which gzip would take tens of seconds over),
//! and its media type says so.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use dracheck_clusters::oci::{self, Format, Layer, Linking, Node, PATH_ENV};

/// The image's name, less the tag: the version.
pub const REPOSITORY: &str = "dracheck.io/dracheck";

/// The program the image runs.
const ENTRYPOINT: &str = "/usr/bin/dracheck";

const PASSWD: &str = "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n";
const GROUP: &str = "root:x:0:\nnobody:x:65534:\n";
const NSSWITCH: &str = "passwd: files\ngroup: files\nhosts: files dns\n";

/// The name the image is loaded as.
pub fn image_name(version: &str) -> String {
    format!("{REPOSITORY}:{version}")
}

/// The image archive of `programs` (each its name in `/usr/bin` and the built file), gzipped
/// unless `fast`.
pub fn archive(programs: &[(&str, PathBuf)], version: &str, fast: bool) -> Result<Vec<u8>, String> {
    archive_with(Path::new("ldd"), programs, version, fast)
}

fn archive_with(ldd: &Path, programs: &[(&str, PathBuf)], version: &str, fast: bool) -> Result<Vec<u8>, String> {
    let mut bins = Vec::new();
    let mut needed = BTreeSet::new();
    for (name, path) in programs {
        let bin = std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        needed.extend(needs(ldd, path, &bin)?);
        bins.push((format!("usr/bin/{name}"), bin));
    }
    let mut files = Vec::new();
    for path in needed {
        // The file itself where the host has a link (`/lib64/ld-linux-x86-64.so.2`): the image
        // has none of what the link points to.
        let bytes = std::fs::read(&path).map_err(|e| format!("reading {path}, which the binaries need: {e}"))?;
        files.push((path.trim_start_matches('/').to_string(), bytes));
    }

    let mut entries: Vec<(String, Node<'_>)> = bins
        .iter()
        .chain(&files)
        .map(|(path, bytes)| (path.clone(), Node::File { mode: 0o755, data: bytes }))
        .collect();
    for (path, text) in [("etc/passwd", PASSWD), ("etc/group", GROUP), ("etc/nsswitch.conf", NSSWITCH)] {
        entries.push((path.to_string(), Node::File { mode: 0o644, data: text.as_bytes() }));
    }
    entries.push(("tmp".to_string(), Node::Dir { mode: 0o1777 }));
    entries.push(("root".to_string(), Node::Dir { mode: 0o700 }));
    let tar = oci::tarball(entries).map_err(|e| e.to_string())?;
    drop((bins, files));
    let layer = if fast { Layer::uncompressed(tar) } else { Layer::gzip(&tar).map_err(|e| e.to_string())? };
    let config = serde_json::json!({
        "User": "0",
        "Entrypoint": [ENTRYPOINT],
        "Env": [PATH_ENV, "HOME=/root"],
        "WorkingDir": "/",
        "Labels": {
            "org.opencontainers.image.title": "dracheck",
            "org.opencontainers.image.version": version,
            "org.opencontainers.image.description": "Kubernetes DRA conformance suite",
        },
    });
    oci::image_archive(Format::Oci, &image_name(version), &layer, config).map_err(|e| e.to_string())
}

/// The files `program` needs to start, as absolute paths: its ELF interpreter and the shared
/// libraries it loads, where this machine's loader finds them. The image has no
/// `ld.so.cache`, so its loader looks in its built-in dirs, where glibc's own libraries lie.
///
/// The libraries come from `ldd` (glibc's, which runs the loader in trace mode), not from
/// reading `DT_NEEDED` and redoing the loader's search; the interpreter from the ELF header.
fn needs(ldd: &Path, program: &Path, bin: &[u8]) -> Result<Vec<String>, String> {
    let interpreter = match oci::elf_linking(bin) {
        None => return Err(format!("{} is not a 64-bit ELF executable", program.display())),
        Some(Linking::Static) => return Ok(Vec::new()),
        Some(Linking::Dynamic { interpreter }) if interpreter.starts_with('/') => interpreter,
        Some(Linking::Dynamic { interpreter }) => {
            return Err(format!("{} names the interpreter {interpreter:?}, not an absolute path", program.display()));
        }
    };
    let out = Command::new(ldd)
        .arg(program)
        // Those of this process (cargo sets LD_LIBRARY_PATH) are not the image's.
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("LD_PRELOAD")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            format!(
                "`{}` did not run ({e}); the image needs the shared libraries of {}, which it lists \
                 (Debian: apt-get install libc-bin)",
                ldd.display(),
                program.display()
            )
        })?;
    if !out.status.success() {
        return Err(format!(
            "`{} {}` failed ({}): {}",
            ldd.display(),
            program.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let mut needed = libraries(program, &String::from_utf8_lossy(&out.stdout))?;
    needed.push(interpreter);
    Ok(needed)
}

/// The absolute paths in `ldd`'s output: `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6
/// (0x…)` and the interpreter, `/lib64/ld-linux-x86-64.so.2 (0x…)`; the kernel's
/// `linux-vdso.so.1` is no file. A library it does not find is an error.
fn libraries(program: &Path, ldd: &str) -> Result<Vec<String>, String> {
    let mut found = Vec::new();
    for line in ldd.lines().map(str::trim) {
        let (name, path) = line.split_once("=>").map_or((line, line), |(name, path)| (name.trim(), path.trim()));
        let path = path.split(" (0x").next().unwrap_or_default().trim();
        if path == "not found" {
            return Err(format!("{} needs {name}, which the loader does not find on this machine", program.display()));
        }
        if path.starts_with('/') {
            found.push(path.to_string());
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// Two small glibc programs of this machine, as the image's two.
    fn programs() -> Option<Vec<(&'static str, PathBuf)>> {
        let programs =
            vec![("dracheck", PathBuf::from("/bin/true")), ("dracheck-mock-driver", PathBuf::from("/bin/false"))];
        let dynamic = programs.iter().all(|(_, p)| {
            std::fs::read(p).is_ok_and(|bin| matches!(oci::elf_linking(&bin), Some(Linking::Dynamic { .. })))
        });
        (dynamic && Command::new("ldd").arg("--version").output().is_ok()).then_some(programs)
    }

    #[test]
    fn the_image_holds_both_programs_their_loader_and_libraries_and_runs_dracheck_as_root() {
        let Some(programs) = programs() else {
            eprintln!("skipped: needs dynamic /bin/true and /bin/false and ldd");
            return;
        };
        let archive = archive(&programs, "1.2.3", true).unwrap();
        assert_eq!(archive, super::archive(&programs, "1.2.3", true).unwrap(), "the same bytes");
        let image = oci::open(&archive).unwrap();
        assert_eq!(image.tag, "dracheck.io/dracheck:1.2.3");
        let (index, manifest) = image.oci.expect("an OCI layout");
        assert_eq!(index["manifests"][0]["annotations"]["io.containerd.image.name"], "dracheck.io/dracheck:1.2.3");
        assert_eq!(index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"], "1.2.3");
        assert_eq!(manifest["layers"][0]["mediaType"], oci::MEDIA_LAYER, "--debug: not compressed");

        let config = &image.config["config"];
        assert_eq!(config["Entrypoint"], serde_json::json!(["/usr/bin/dracheck"]));
        assert_eq!(config["Env"], serde_json::json!([PATH_ENV, "HOME=/root"]));
        assert_eq!((&config["User"], &config["WorkingDir"]), (&"0".into(), &"/".into()));
        assert_eq!(config["Labels"]["org.opencontainers.image.version"], "1.2.3");
        assert_eq!(config["Labels"]["org.opencontainers.image.title"], "dracheck");
        assert_eq!(image.config["architecture"], oci::oci_architecture());

        let items: BTreeMap<String, oci::Item> =
            oci::items(&image.layer).unwrap().into_iter().map(|i| (i.path.clone(), i)).collect();
        assert_eq!(items["usr/bin/dracheck"].data, std::fs::read("/bin/true").unwrap());
        assert_eq!(items["usr/bin/dracheck-mock-driver"].data, std::fs::read("/bin/false").unwrap());
        let Some(Linking::Dynamic { interpreter }) = oci::elf_linking(&items["usr/bin/dracheck"].data) else {
            panic!("dynamic")
        };
        let loader = &items[interpreter.trim_start_matches('/')];
        assert_eq!((loader.kind, loader.mode), (tar::EntryType::Regular, 0o755), "the loader itself, not a link");
        assert_eq!(loader.data, std::fs::read(&interpreter).unwrap());
        assert!(items.keys().any(|p| p.ends_with("/libc.so.6")), "{:?}", items.keys());
        assert_eq!((items["tmp/"].kind, items["tmp/"].mode), (tar::EntryType::Directory, 0o1777));
        assert_eq!((items["root/"].kind, items["root/"].mode), (tar::EntryType::Directory, 0o700));
        assert!(items["etc/passwd"].data.starts_with(b"root:x:0:0:root:/root:"));
        assert!(String::from_utf8_lossy(&items["etc/group"].data).contains("nobody:x:65534:"));
        for item in items.values() {
            assert_eq!((item.mtime, item.uid, item.gid), (0, 0, 0), "{}", item.path);
        }

        let released = super::archive(&programs, "1.2.3", false).unwrap();
        let image = oci::open(&released).unwrap();
        assert_eq!(image.oci.unwrap().1["layers"][0]["mediaType"], oci::MEDIA_LAYER_GZIP);
        assert_eq!(released, super::archive(&programs, "1.2.3", false).unwrap(), "the same bytes, gzipped");
    }

    #[test]
    fn ldd_missing_or_a_library_not_found_is_said() {
        let Some(programs) = programs() else {
            eprintln!("skipped: needs dynamic /bin/true and /bin/false and ldd");
            return;
        };
        let msg = archive_with(Path::new("/nonexistent/ldd"), &programs, "1", true).unwrap_err();
        assert!(msg.contains("/nonexistent/ldd") && msg.contains("libc-bin") && msg.contains("/bin/true"), "{msg}");

        let out = "\tlinux-vdso.so.1 (0x00007ffc)\n\tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f)\n\
                   \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n";
        assert_eq!(
            libraries(Path::new("p"), out).unwrap(),
            ["/lib/x86_64-linux-gnu/libgcc_s.so.1", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"]
        );
        let msg = libraries(Path::new("/x/dracheck"), "\tlibfoo.so.1 => not found\n").unwrap_err();
        assert!(msg.contains("/x/dracheck") && msg.contains("libfoo.so.1"), "{msg}");
        assert_eq!(libraries(Path::new("p"), "\tstatically linked\n").unwrap(), Vec::<String>::new());
    }
}
