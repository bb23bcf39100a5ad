//! `cargo xtask dist`: the release archive. `dracheck` and `dracheck-mock-driver` built from
//! this checkout (release, or the dev profile with `--debug`), shell completions and man pages
//! generated from the same clap command the binary parses with, the README and the licence, in
//! `dracheck-<version>-<target>.tar.gz`, with a `SHA256SUMS` beside it. The binaries need
//! nothing of the checkout: profiles and the mock's inventories are embedded. With `--image`,
//! also the container image of both binaries, `dracheck-<version>-<target>-oci.tar` ([`image`]).

pub mod image;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use dracheck_clusters::oci::sha256_hex;

use crate::exit;

/// The programs the archive ships: (package, binary).
const BINARIES: [(&str, &str); 2] = [("xtask", "dracheck"), ("dracheck-mock-driver", "dracheck-mock-driver")];

#[derive(Debug, Args)]
pub struct DistArgs {
    /// Where the archive and its SHA256SUMS are written (default: `target/dist` of the checkout).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Package the dev-profile binaries (quick to build, large, slow) instead of a release
    /// build; for checking the archive, not for shipping it.
    #[arg(long)]
    pub debug: bool,
    /// Also write the container image `dracheck.io/dracheck:<version>` of both binaries, as
    /// `dracheck-<version>-<target>-oci.tar` (an OCI layout with docker's manifest.json too):
    /// `ctr -n k8s.io images import`, `docker load` and `podman load` read and name it.
    #[arg(long)]
    pub image: bool,
}

/// A file of the archive: its path under `dracheck-<version>/`, its content, its mode.
struct Entry {
    path: String,
    bytes: Vec<u8>,
    mode: u32,
}

pub async fn run(args: DistArgs) -> u8 {
    exit::report(dist(args).await.map(|()| exit::OK), "dracheck")
}

type Early = (u8, String);

async fn dist(args: DistArgs) -> Result<(), Early> {
    let root = crate::checkout("dist").map_err(|msg| (exit::BAD_INPUT, msg))?;
    let out = args.out.clone().unwrap_or_else(|| root.join("target/dist"));
    std::fs::create_dir_all(&out).map_err(|e| (exit::BAD_INPUT, format!("cannot create {}: {e}", out.display())))?;

    let started = Instant::now();
    let binaries = build(&root, args.debug).await?;
    eprintln!("dist: built in {:.0} s", started.elapsed().as_secs_f64());

    let version = env!("CARGO_PKG_VERSION");
    let target = target_triple();
    let top = format!("dracheck-{version}");
    let mut entries = Vec::new();
    for (bin, path) in &binaries {
        let bytes = std::fs::read(path).map_err(|e| (exit::FAILED, format!("reading {}: {e}", path.display())))?;
        entries.push(Entry { path: format!("bin/{bin}"), bytes, mode: 0o755 });
    }
    entries.extend(completions());
    entries.extend(man_pages().map_err(|e| (exit::FAILED, format!("generating the man pages: {e}")))?);
    // The licence travels with the binaries it covers: an archive without it is not made.
    for doc in ["README.md", "LICENSE"] {
        let path = root.join(doc);
        let bytes = std::fs::read(&path).map_err(|e| (exit::FAILED, format!("reading {}: {e}", path.display())))?;
        entries.push(Entry { path: doc.into(), bytes, mode: 0o644 });
    }

    let name = format!("{top}-{target}.tar.gz");
    let archive = out.join(&name);
    eprintln!("dist: writing {} ({} files)", archive.display(), entries.len());
    // The dev-profile binaries are large and only checked: fast compression.
    let level = if args.debug { flate2::Compression::fast() } else { flate2::Compression::default() };
    write_archive(&archive, &top, &entries, level)
        .map_err(|e| (exit::FAILED, format!("writing {}: {e}", archive.display())))?;
    let bytes = std::fs::read(&archive).map_err(|e| (exit::FAILED, format!("reading {}: {e}", archive.display())))?;
    let mut sums_text = format!("{}  {name}\n", sha256_hex(&bytes));
    let mut printed = vec![archive.clone()];
    if args.image {
        let image_started = Instant::now();
        let file = format!("{top}-{target}-oci.tar");
        let path = out.join(&file);
        let bytes = image::archive(&binaries, version, args.debug).map_err(|msg| (exit::FAILED, msg))?;
        std::fs::write(&path, &bytes).map_err(|e| (exit::FAILED, format!("writing {}: {e}", path.display())))?;
        eprintln!(
            "dist: wrote the image {} as {} ({} MB, {}) in {:.1} s",
            image::image_name(version),
            path.display(),
            bytes.len() / 1_000_000,
            if args.debug { "layer not compressed" } else { "layer gzipped" },
            image_started.elapsed().as_secs_f64()
        );
        sums_text.push_str(&format!("{}  {file}\n", sha256_hex(&bytes)));
        printed.push(path);
    }
    let sums = out.join("SHA256SUMS");
    std::fs::write(&sums, sums_text).map_err(|e| (exit::FAILED, format!("writing {}: {e}", sums.display())))?;
    for e in &entries {
        eprintln!("  {top}/{}", e.path);
    }
    eprintln!("dist: done in {:.0} s", started.elapsed().as_secs_f64());
    // The paths last, one a line, for scripts.
    for path in printed.iter().chain([&sums]) {
        println!("{}", path.display());
    }
    Ok(())
}

/// Builds the shipped binaries with cargo in `root` and returns each one's path, as cargo
/// reports it.
async fn build(root: &Path, debug: bool) -> Result<Vec<(&'static str, PathBuf)>, Early> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = crate::cargo_command(&cargo);
    cmd.arg("build").arg("--message-format=json-render-diagnostics");
    if !debug {
        cmd.arg("--release");
    }
    for (package, bin) in BINARIES {
        cmd.args(["--package", package, "--bin", bin]);
    }
    eprintln!(
        "dist: building {} ({}; {})",
        BINARIES.map(|(_, b)| b).join(" and "),
        if debug { "dev profile" } else { "release" },
        if debug { "a minute or so" } else { "several minutes on 2 cores when nothing is built yet" }
    );
    // Cargo's progress and errors go to the terminal; its stdout is the JSON read below (tokio's
    // `output()` would pipe stderr too, and swallow them).
    let child = cmd
        .current_dir(root)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .map_err(|e| (exit::FAILED, format!("could not run `{cargo} build`: {e}")))?;
    let out =
        child.wait_with_output().await.map_err(|e| (exit::FAILED, format!("could not run `{cargo} build`: {e}")))?;
    if !out.status.success() {
        return Err((exit::FAILED, format!("`{cargo} build` failed ({})", out.status)));
    }
    let mut found = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        if msg["reason"] != "compiler-artifact" {
            continue;
        }
        let (Some(name), Some(exe)) = (msg["target"]["name"].as_str(), msg["executable"].as_str()) else { continue };
        if let Some((_, bin)) = BINARIES.iter().find(|(_, b)| *b == name) {
            found.push((*bin, PathBuf::from(exe)));
        }
    }
    for (_, bin) in BINARIES {
        if !found.iter().any(|(b, _)| *b == bin) {
            return Err((exit::FAILED, format!("`{cargo} build` reported no {bin} binary")));
        }
    }
    Ok(found)
}

/// bash, zsh and fish completions of `dracheck`.
fn completions() -> Vec<Entry> {
    use clap_complete::Shell;
    [(Shell::Bash, "dracheck.bash"), (Shell::Zsh, "_dracheck"), (Shell::Fish, "dracheck.fish")]
        .into_iter()
        .map(|(shell, file)| {
            let mut cmd = crate::command(crate::Program::Dracheck);
            let mut bytes = Vec::new();
            clap_complete::generate(shell, &mut cmd, "dracheck", &mut bytes);
            Entry { path: format!("completions/{file}"), bytes, mode: 0o644 }
        })
        .collect()
}

/// `dracheck.1` and one page per subcommand (`dracheck-cluster-up.1`, …).
fn man_pages() -> std::io::Result<Vec<Entry>> {
    let dir = tempfile::tempdir()?;
    clap_mangen::generate_to(crate::command(crate::Program::Dracheck), dir.path())?;
    let mut pages = Vec::new();
    for entry in std::fs::read_dir(dir.path())? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        pages.push(Entry { path: format!("man/man1/{name}"), bytes: std::fs::read(entry.path())?, mode: 0o644 });
    }
    pages.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(pages)
}

/// Writes the archive of `entries` under `top/`: the same entries give the same bytes in any
/// order (sorted by path, mtime `SOURCE_DATE_EPOCH` or 0, owner root, gzip header without a
/// time), so that a checksum names the content and two builds of one tree can be compared.
fn write_archive(path: &Path, top: &str, entries: &[Entry], level: flate2::Compression) -> std::io::Result<()> {
    let mut sorted: Vec<&Entry> = entries.iter().collect();
    sorted.sort_by(|a, b| a.path.cmp(&b.path));
    let file = std::fs::File::create(path)?;
    let gz = flate2::write::GzEncoder::new(file, level);
    let mut tar = tar::Builder::new(gz);
    let mtime = std::env::var("SOURCE_DATE_EPOCH").ok().and_then(|s| s.parse().ok()).unwrap_or(0);
    let mut dirs: Vec<String> = vec![String::new()];
    for e in &sorted {
        let mut at = String::new();
        for part in e.path.split('/').rev().skip(1).collect::<Vec<_>>().into_iter().rev() {
            at = if at.is_empty() { part.to_string() } else { format!("{at}/{part}") };
            if !dirs.contains(&at) {
                dirs.push(at.clone());
            }
        }
    }
    for dir in &dirs {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Directory);
        header.set_mode(0o755);
        header.set_mtime(mtime);
        header.set_size(0);
        let name = if dir.is_empty() { format!("{top}/") } else { format!("{top}/{dir}/") };
        tar.append_data(&mut header, name, std::io::empty())?;
    }
    dirs.sort();
    for e in sorted {
        let mut header = tar::Header::new_gnu();
        header.set_mode(e.mode);
        header.set_mtime(mtime);
        header.set_size(e.bytes.len() as u64);
        tar.append_data(&mut header, format!("{top}/{}", e.path), e.bytes.as_slice())?;
    }
    let mut gz = tar.into_inner()?;
    gz.flush()?;
    gz.finish()?.sync_all()
}

/// The target the binaries are built for: this program's, since cargo builds for the host.
fn target_triple() -> String {
    let arch = std::env::consts::ARCH;
    if cfg!(all(target_os = "linux", target_env = "gnu")) {
        format!("{arch}-unknown-linux-gnu")
    } else {
        format!("{arch}-{}", std::env::consts::OS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_entries_in_another_order_give_the_same_archive() {
        let dir = tempfile::tempdir().unwrap();
        let entry = |path: &str, bytes: &[u8]| Entry { path: path.into(), bytes: bytes.to_vec(), mode: 0o644 };
        let mut entries =
            vec![entry("bin/dracheck", b"one"), entry("LICENSE", b"two"), entry("share/man/man1/x.1", b"three")];
        let (a, b) = (dir.path().join("a.tar.gz"), dir.path().join("b.tar.gz"));
        write_archive(&a, "top", &entries, flate2::Compression::fast()).unwrap();
        entries.reverse();
        write_archive(&b, "top", &entries, flate2::Compression::fast()).unwrap();
        assert_eq!(sha256_hex(&std::fs::read(&a).unwrap()), sha256_hex(&std::fs::read(&b).unwrap()));
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(std::fs::File::open(&a).unwrap()));
        let names: Vec<String> =
            archive.entries().unwrap().map(|e| e.unwrap().path().unwrap().display().to_string()).collect();
        assert_eq!(
            names,
            [
                "top/",
                "top/bin/",
                "top/share/",
                "top/share/man/",
                "top/share/man/man1/",
                "top/LICENSE",
                "top/bin/dracheck",
                "top/share/man/man1/x.1"
            ]
        );
    }

    #[test]
    fn the_checksum_is_sha256_as_sha256sum_prints_it() {
        assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    #[test]
    fn completions_and_man_pages_come_from_the_command() {
        let files: Vec<String> = completions().into_iter().map(|e| e.path).collect();
        assert_eq!(files, ["completions/dracheck.bash", "completions/_dracheck", "completions/dracheck.fish"]);
        let pages: Vec<String> = man_pages().unwrap().into_iter().map(|e| e.path).collect();
        assert!(pages.contains(&"man/man1/dracheck.1".to_string()), "{pages:?}");
        assert!(pages.contains(&"man/man1/dracheck-conformance.1".to_string()), "{pages:?}");
        assert!(pages.contains(&"man/man1/dracheck-profile-validate.1".to_string()), "{pages:?}");
    }
}
