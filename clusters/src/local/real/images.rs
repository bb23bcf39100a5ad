//! The images of real nodes, made on this machine because the nodes have no registry to pull
//! from (and there is no Docker to build with): the sandbox image from a few lines of C
//! (`assets/pause.c`, compiled static), and the workload image from Debian's busybox-static.
//! Both are docker-archive tarballs ([`oci::Format::Docker`]), which `ctr images import` names
//! from `RepoTags`, written by [`crate::oci`]: same inputs, same bytes. Built once into the
//! cache dir, keyed by the C source, the busybox binary and [`FORMAT`].

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{ClusterError, Result};
use crate::gobuild::{FileLock, fmt_elapsed};
use crate::local::Progress;
use crate::oci::{self, Format, Layer, Node, PATH_ENV, is_static_elf, sha256_hex, tarball};
use crate::tools::output_tail;

/// The sandbox image; containerd's `pinned_images.sandbox`.
pub const PAUSE_IMAGE: &str = "dracheck.io/pause:3.10";

/// The image the suite's pods run.
pub const WORKLOAD_IMAGE: &str = "dracheck.io/workload:host";

const PAUSE_SOURCE: &str = include_str!("assets/pause.c");

/// Where Debian's busybox-static puts its binary.
const BUSYBOX: &str = "/bin/busybox";

/// Part of the cache key: change it whenever the archives change for the same inputs.
const FORMAT: &str = "dracheck node images, docker-archive, v1";

/// How long one `ctr images import` may take (measured: 0.2 s).
const IMPORT_TIMEOUT: Duration = Duration::from_secs(120);

/// The image archives, ready for [`import`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeImages {
    /// [`PAUSE_IMAGE`].
    pub pause: PathBuf,
    /// [`WORKLOAD_IMAGE`].
    pub workload: PathBuf,
}

/// The archives of both images, from the cache or built into it (about a second: gcc, then
/// the tarballs). Blocks: from async code, call it where blocking is fine (`spawn_blocking`).
pub fn ensure(progress: &Progress) -> Result<NodeImages> {
    ensure_in(&crate::gobuild::cache_root().join("node-images"), Path::new(BUSYBOX), progress)
}

fn ensure_in(root: &Path, busybox: &Path, progress: &Progress) -> Result<NodeImages> {
    let busybox_bin = read_static_busybox(busybox)?;
    let dir = root.join(cache_key(&busybox_bin));
    let images = NodeImages { pause: dir.join("pause.tar"), workload: dir.join("workload.tar") };
    let built = || images.pause.is_file() && images.workload.is_file();
    if built() {
        return Ok(images);
    }
    std::fs::create_dir_all(&dir).map_err(ClusterError::io(format!("creating {}", dir.display())))?;
    let _lock = FileLock::acquire_blocking(&dir.join("lock"), progress)?;
    if built() {
        return Ok(images);
    }
    let started = Instant::now();
    progress.line(format!("building the node images {PAUSE_IMAGE} and {WORKLOAD_IMAGE} into {}", dir.display()));
    let work = tempfile::Builder::new()
        .prefix(".build")
        .tempdir_in(&dir)
        .map_err(ClusterError::io(format!("creating a build dir in {}", dir.display())))?;
    let pause = compile_pause(work.path())?;
    let applets = applets(busybox)?;
    write_replacing(&images.workload, &workload_archive(&busybox_bin, &applets)?)?;
    write_replacing(&images.pause, &pause_archive(&pause)?)?;
    progress.line(format!("node images built in {}", fmt_elapsed(started.elapsed())));
    Ok(images)
}

/// An image of one static program, `tag`, as a vendor's minimal image has it: the program in
/// `/usr/bin` (on `PATH`, since charts run it by name), the dirs a container expects, no shell.
/// Written beside the program, as `<program>.image.tar`, and made anew when the program is
/// newer. Dynamic programs are refused: the image has no C library.
pub fn program_image(tag: &str, program: &Path) -> Result<PathBuf> {
    let archive = program.with_extension("image.tar");
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if archive.is_file() && modified(&archive) >= modified(program) && archive_tag(&archive).as_deref() == Some(tag) {
        return Ok(archive);
    }
    let bin = std::fs::read(program).map_err(ClusterError::io(format!("reading {}", program.display())))?;
    if !is_static_elf(&bin) {
        return Err(ClusterError::Io {
            context: format!("packing {} into the image {tag}", program.display()),
            source: std::io::Error::other("it is not a static executable (build it with CGO_ENABLED=0)"),
        });
    }
    let name = program.file_name().and_then(|n| n.to_str()).unwrap_or("program");
    let mut entries = vec![
        (format!("usr/bin/{name}"), Node::File { mode: 0o755, data: &bin }),
        ("tmp".to_string(), Node::Dir { mode: 0o1777 }),
    ];
    for dir in ["dev", "etc", "proc", "sys", "usr", "usr/bin", "var", "var/run"] {
        entries.push((dir.to_string(), Node::Dir { mode: 0o755 }));
    }
    let config = serde_json::json!({ "Env": [PATH_ENV], "Entrypoint": [format!("/usr/bin/{name}")] });
    write_replacing(&archive, &image_archive(tag, tarball(entries)?, config)?)?;
    Ok(archive)
}

/// The tag an archive made by [`image_archive`] names.
fn archive_tag(archive: &Path) -> Option<String> {
    let file = std::fs::File::open(archive).ok()?;
    let mut tar = tar::Archive::new(file);
    for entry in tar.entries().ok()? {
        let mut entry = entry.ok()?;
        if entry.path().ok()?.as_os_str() == "manifest.json" {
            let manifest: serde_json::Value = serde_json::from_reader(&mut entry).ok()?;
            return manifest[0]["RepoTags"][0].as_str().map(str::to_string);
        }
    }
    None
}

/// Imports an archive into the `k8s.io` namespace of the containerd at `address`, where its
/// CRI looks for images, unpacked into `overlayfs`, the CRI's snapshotter (containerd 2.x
/// imports through its transfer service, which unpacks unless `--no-unpack`).
pub async fn import(ctr: &Path, address: &Path, archive: &Path) -> Result<()> {
    let failed = |status: String, tail: String| ClusterError::ImageImportFailed {
        archive: archive.to_path_buf(),
        address: address.to_path_buf(),
        status,
        tail,
    };
    let mut cmd = tokio::process::Command::new(ctr);
    cmd.arg("--address")
        .arg(address)
        .args(["--namespace", "k8s.io", "images", "import", "--snapshotter", "overlayfs"])
        .arg(archive)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let out = match tokio::time::timeout(IMPORT_TIMEOUT, cmd.output()).await {
        Err(_) => {
            return Err(failed(format!("no answer in {}s, stopped", IMPORT_TIMEOUT.as_secs()), "  | (none)".into()));
        }
        Ok(Err(e)) => return Err(failed(format!("{} did not run: {e}", ctr.display()), "  | (none)".into())),
        Ok(Ok(out)) => out,
    };
    if out.status.success() {
        return Ok(());
    }
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    Err(failed(out.status.to_string(), output_tail(&said, 12)))
}

/// Why the workload image cannot be made here: no static busybox.
pub fn check_busybox() -> Result<()> {
    read_static_busybox(Path::new(BUSYBOX)).map(drop)
}

/// The busybox binary, refused unless it is static: the workload image has no C library.
fn read_static_busybox(path: &Path) -> Result<Vec<u8>> {
    let bin = match std::fs::read(path) {
        Ok(bin) => bin,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ClusterError::MissingTool {
                tool: "busybox-static".into(),
                detail: format!("{} does not exist, and real nodes' workload image is made of it", path.display()),
                fix: "apt-get install busybox-static".into(),
            });
        }
        Err(e) => return Err(ClusterError::Io { context: format!("reading {}", path.display()), source: e }),
    };
    if !is_static_elf(&bin) {
        return Err(ClusterError::MissingTool {
            tool: "a static busybox".into(),
            detail: format!(
                "{} is not a statically linked executable (Debian's `busybox` package is dynamic), and the \
                 workload image has no C library for it",
                path.display()
            ),
            fix: "apt-get install busybox-static (it replaces busybox)".into(),
        });
    }
    Ok(bin)
}

fn cache_key(busybox: &[u8]) -> String {
    let mut key = Vec::new();
    for part in [FORMAT.as_bytes(), PAUSE_SOURCE.as_bytes(), busybox] {
        key.extend_from_slice(&(part.len() as u64).to_le_bytes());
        key.extend_from_slice(part);
    }
    sha256_hex(&key)[..16].to_string()
}

/// Compiles the pause program in `work`; its bytes.
fn compile_pause(work: &Path) -> Result<Vec<u8>> {
    std::fs::write(work.join("pause.c"), PAUSE_SOURCE).map_err(ClusterError::io("writing pause.c"))?;
    let out = Command::new("gcc")
        .args(["-static", "-Os", "-s", "-o", "pause", "pause.c"])
        .current_dir(work)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| ClusterError::MissingTool {
            tool: "gcc".into(),
            detail: format!(
                "it did not run ({e}); real nodes' pause image is compiled here, as there is no registry to pull it from"
            ),
            fix: "apt-get install gcc libc6-dev".into(),
        })?;
    if !out.status.success() {
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        return Err(ClusterError::MissingTool {
            tool: "gcc -static".into(),
            detail: format!("it could not build the pause program of real nodes:\n{}\n", output_tail(&said, 10)),
            fix: "apt-get install gcc libc6-dev (libc6-dev has the static C library, libc.a)".into(),
        });
    }
    let path = work.join("pause");
    let bin = std::fs::read(&path).map_err(ClusterError::io(format!("reading {}", path.display())))?;
    if !is_static_elf(&bin) {
        return Err(ClusterError::MissingTool {
            tool: "gcc -static".into(),
            detail: "it built a pause program that needs a dynamic loader, which the pause image does not have".into(),
            fix: "make `gcc -static` produce static executables (Debian's gcc and libc6-dev do)".into(),
        });
    }
    Ok(bin)
}

/// The applet names busybox answers to, sorted; each becomes a link in the image's /bin.
fn applets(busybox: &Path) -> Result<Vec<String>> {
    let out = Command::new(busybox)
        .arg("--list")
        .stdin(Stdio::null())
        .output()
        .map_err(ClusterError::io(format!("running {} --list", busybox.display())))?;
    let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|n| !n.is_empty() && !n.contains('/') && *n != "." && *n != ".." && *n != "busybox")
        .map(str::to_string)
        .collect();
    names.sort();
    names.dedup();
    if !out.status.success() || !names.iter().any(|n| n == "sh") {
        return Err(ClusterError::Io {
            context: format!("`{} --list` did not list the applets, sh among them", busybox.display()),
            source: std::io::Error::other(output_tail(&String::from_utf8_lossy(&out.stderr), 5)),
        });
    }
    Ok(names)
}

/// The image's root: busybox with a link per applet in /bin, /usr/bin and the sbin dirs
/// pointing there, and the dirs and files a container expects to find.
fn workload_layer(busybox: &[u8], applets: &[String]) -> Result<Vec<u8>> {
    const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n";
    const GROUP: &str = "root:x:0:\nnogroup:x:65534:\n";
    let mut entries = vec![
        ("bin/busybox".to_string(), Node::File { mode: 0o755, data: busybox }),
        ("etc/passwd".to_string(), Node::File { mode: 0o644, data: PASSWD.as_bytes() }),
        ("etc/group".to_string(), Node::File { mode: 0o644, data: GROUP.as_bytes() }),
        ("sbin".to_string(), Node::Symlink { target: "bin" }),
        ("usr/bin".to_string(), Node::Symlink { target: "../bin" }),
        ("usr/sbin".to_string(), Node::Symlink { target: "../bin" }),
        ("tmp".to_string(), Node::Dir { mode: 0o1777 }),
        ("root".to_string(), Node::Dir { mode: 0o700 }),
    ];
    for dir in ["bin", "dev", "etc", "proc", "sys", "usr", "var"] {
        entries.push((dir.to_string(), Node::Dir { mode: 0o755 }));
    }
    for applet in applets {
        entries.push((format!("bin/{applet}"), Node::Symlink { target: "busybox" }));
    }
    tarball(entries)
}

fn workload_archive(busybox: &[u8], applets: &[String]) -> Result<Vec<u8>> {
    let config = serde_json::json!({ "Env": [PATH_ENV], "Cmd": ["sh"] });
    image_archive(WORKLOAD_IMAGE, workload_layer(busybox, applets)?, config)
}

fn pause_archive(pause: &[u8]) -> Result<Vec<u8>> {
    let layer = tarball(vec![("pause".to_string(), Node::File { mode: 0o755, data: pause })])?;
    image_archive(PAUSE_IMAGE, layer, serde_json::json!({ "Env": [PATH_ENV], "Entrypoint": ["/pause"] }))
}

/// A docker-archive of one image with one uncompressed layer, whose diff ID is its own digest.
fn image_archive(tag: &str, layer: Vec<u8>, container_config: serde_json::Value) -> Result<Vec<u8>> {
    oci::image_archive(Format::Docker, tag, &Layer::uncompressed(layer), container_config)
}

/// Writes beside `path` and renames over it, so that no reader (another process finding the
/// cache) sees half an archive.
fn write_replacing(path: &Path, data: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        ClusterError::Io { context: format!("writing {}", path.display()), source: e }
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::oci::Item;
    use crate::oci::tests::elf;

    /// The entries of a tarball, in archive order.
    fn list(tarball: &[u8]) -> Vec<Item> {
        oci::items(tarball).unwrap()
    }

    /// The parts of a docker-archive: the name it gives, config and layer, each checked
    /// against the digest it is stored under.
    fn open(archive: &[u8]) -> (String, serde_json::Value, Vec<u8>) {
        let image = oci::open(archive).unwrap();
        assert!(image.oci.is_none(), "a docker-archive");
        (image.tag, image.config, image.layer)
    }

    fn applet_names() -> Vec<String> {
        ["cat", "env", "sh", "sleep"].map(String::from).to_vec()
    }

    #[test]
    fn the_same_inputs_give_the_same_bytes() {
        let fake = b"\x7fELF pretend busybox".as_slice();
        let a = workload_archive(fake, &applet_names()).unwrap();
        assert_eq!(a, workload_archive(fake, &applet_names()).unwrap());
        assert_ne!(a, workload_archive(b"another busybox", &applet_names()).unwrap());
        assert_eq!(pause_archive(b"pause").unwrap(), pause_archive(b"pause").unwrap());
        for archive in [a, pause_archive(b"pause").unwrap()] {
            let (_, _, layer) = open(&archive);
            for tarball in [archive, layer] {
                let entries = list(&tarball);
                let paths: Vec<&str> = entries.iter().map(|e| e.path.trim_end_matches('/')).collect();
                let mut sorted = paths.clone();
                sorted.sort();
                assert_eq!(paths, sorted);
                for e in &entries {
                    assert_eq!((e.mtime, e.uid, e.gid), (0, 0, 0), "{}", e.path);
                }
            }
        }
    }

    #[test]
    fn manifests_name_the_image_and_blobs_are_stored_under_their_digests() {
        let (tag, config, _) = open(&workload_archive(b"bb", &applet_names()).unwrap());
        assert_eq!(tag, WORKLOAD_IMAGE);
        assert_eq!(config["os"], "linux");
        assert_eq!(config["architecture"], oci::oci_architecture());
        assert_eq!(config["config"]["Cmd"], serde_json::json!(["sh"]));
        assert!(config["config"]["Env"][0].as_str().unwrap().starts_with("PATH="));
        assert_eq!(config["rootfs"]["type"], "layers");

        let (tag, config, _) = open(&pause_archive(b"pause").unwrap());
        assert_eq!(tag, PAUSE_IMAGE);
        assert_eq!(config["config"]["Entrypoint"], serde_json::json!(["/pause"]));
    }

    #[test]
    fn the_workload_layer_links_sh_to_busybox_and_the_pause_layer_holds_pause() {
        let (_, _, layer) = open(&workload_archive(b"bb", &applet_names()).unwrap());
        let entries: BTreeMap<String, Item> = list(&layer).into_iter().map(|e| (e.path.clone(), e)).collect();
        let busybox = &entries["bin/busybox"];
        assert_eq!(
            (busybox.kind, busybox.mode, busybox.data.as_slice()),
            (tar::EntryType::Regular, 0o755, b"bb".as_slice())
        );
        for applet in applet_names() {
            let link = &entries[&format!("bin/{applet}")];
            assert_eq!((link.kind, link.link.as_deref()), (tar::EntryType::Symlink, Some("busybox")), "{applet}");
        }
        assert_eq!(entries["usr/bin"].link.as_deref(), Some("../bin"));
        assert_eq!(entries["sbin"].link.as_deref(), Some("bin"));
        assert_eq!((entries["tmp/"].kind, entries["tmp/"].mode), (tar::EntryType::Directory, 0o1777));
        assert!(entries["etc/passwd"].data.starts_with(b"root:x:0:0:"));

        let (_, _, layer) = open(&pause_archive(b"pause bytes").unwrap());
        let entries = list(&layer);
        assert_eq!(entries.len(), 1);
        let pause = &entries[0];
        assert_eq!(
            (pause.path.as_str(), pause.kind, pause.mode, pause.data.as_slice()),
            ("pause", tar::EntryType::Regular, 0o755, b"pause bytes".as_slice())
        );
    }

    #[test]
    fn a_missing_or_dynamic_busybox_is_named_with_its_package() {
        let dir = tempfile::tempdir().unwrap();
        let err = ensure_in(dir.path(), &dir.path().join("no-busybox"), &Progress::quiet()).unwrap_err();
        assert_eq!(err.failure(), crate::Failure::BadInput);
        let msg = err.to_string();
        assert!(msg.contains("no-busybox") && msg.contains("apt-get install busybox-static"), "{msg}");

        let dynamic = dir.path().join("dynamic");
        std::fs::write(&dynamic, elf(&[1, 3, 1])).unwrap();
        let msg = ensure_in(dir.path(), &dynamic, &Progress::quiet()).unwrap_err().to_string();
        assert!(msg.contains("not a statically linked") && msg.contains("busybox-static"), "{msg}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "nothing was built");
    }

    #[test]
    fn a_program_image_runs_the_static_program_from_usr_bin_and_is_remade_for_another_tag() {
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("acme-kubeletplugin");
        std::fs::write(&program, elf(&[1, 1])).unwrap();
        let archive = program_image("registry.example/acme/driver:v1", &program).unwrap();
        let (tag, config, layer) = open(&std::fs::read(&archive).unwrap());
        assert_eq!(tag, "registry.example/acme/driver:v1");
        assert_eq!(config["config"]["Entrypoint"], serde_json::json!(["/usr/bin/acme-kubeletplugin"]));
        assert!(config["config"]["Env"][0].as_str().unwrap().contains("/usr/bin"), "run by name from PATH");
        let items = list(&layer);
        let bin = items.iter().find(|i| i.path == "usr/bin/acme-kubeletplugin").expect("the program is in /usr/bin");
        assert_eq!((bin.mode, bin.data.as_slice()), (0o755, elf(&[1, 1]).as_slice()));
        assert!(items.iter().any(|i| i.path == "tmp/" && i.mode == 0o1777));
        let again = program_image("registry.example/acme/driver:v2", &program).unwrap();
        assert_eq!(archive_tag(&again).as_deref(), Some("registry.example/acme/driver:v2"));

        std::fs::write(&program, elf(&[1, 3, 1])).unwrap();
        let msg = program_image("x:y", &program).unwrap_err().to_string();
        assert!(msg.contains("not a static executable"), "{msg}");
    }

    #[test]
    fn ensure_builds_once_into_the_cache_and_pause_stops_on_term() {
        if !Path::new(BUSYBOX).exists() || crate::tools::on_path("gcc").is_none() {
            eprintln!("skipped: needs {BUSYBOX} (busybox-static) and gcc");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let images = ensure_in(dir.path(), Path::new(BUSYBOX), &Progress::quiet()).unwrap();
        let workload = std::fs::read(&images.workload).unwrap();
        let pause = std::fs::read(&images.pause).unwrap();
        assert_eq!(images, ensure_in(dir.path(), Path::new(BUSYBOX), &Progress::quiet()).unwrap());
        assert_eq!(std::fs::read(&images.workload).unwrap(), workload, "built once");
        assert_eq!(std::fs::read(&images.pause).unwrap(), pause, "built once");
        let key_dir = images.pause.parent().unwrap();
        let mut left: Vec<String> = std::fs::read_dir(key_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["lock", "pause.tar", "workload.tar"]);

        let (_, _, layer) = open(&workload);
        let entries: BTreeMap<String, Option<String>> = list(&layer).into_iter().map(|e| (e.path, e.link)).collect();
        for applet in ["sh", "env", "sort", "sleep", "cat", "ls", "grep", "wc", "date", "kill", "ps"] {
            assert_eq!(entries[&format!("bin/{applet}")].as_deref(), Some("busybox"), "{applet}");
        }

        let (_, _, layer) = open(&pause);
        let program = dir.path().join("pause");
        std::fs::write(&program, &list(&layer)[0].data).unwrap();
        std::fs::set_permissions(&program, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let mut child = Command::new(&program).spawn().unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert!(child.try_wait().unwrap().is_none(), "pause ended by itself");
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        assert!(child.wait().unwrap().success());
    }

    #[tokio::test]
    async fn import_runs_ctr_in_the_cri_namespace_and_quotes_it_on_failure() {
        let dir = tempfile::tempdir().unwrap();
        let args = dir.path().join("args");
        let ctr = dir.path().join("ctr");
        std::fs::write(
            &ctr,
            format!("#!/bin/sh\necho \"$@\" >{}\necho 'ctr: content digest mismatch' >&2\nexit 1\n", args.display()),
        )
        .unwrap();
        std::fs::set_permissions(&ctr, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let err = import(&ctr, Path::new("/run/n1/containerd.sock"), Path::new("/cache/pause.tar")).await.unwrap_err();
        assert_eq!(
            std::fs::read_to_string(&args).unwrap().trim(),
            "--address /run/n1/containerd.sock --namespace k8s.io images import --snapshotter overlayfs /cache/pause.tar"
        );
        let msg = err.to_string();
        assert!(msg.contains("/cache/pause.tar") && msg.contains("content digest mismatch"), "{msg}");

        std::fs::write(&ctr, "#!/bin/sh\nexit 0\n").unwrap();
        import(&ctr, Path::new("/s"), Path::new("/a.tar")).await.unwrap();
    }
}
