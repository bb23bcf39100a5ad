//! Files dracheck ships inside its binaries (shipped profiles, the mock's inventories), written
//! out where a program needs a path: `<cache>/share/<hash>/…`, the hash over every file's name
//! and content, so that each build of dracheck has a folder of its own and nothing is ever
//! read from the source tree it was built from. Writing is idempotent and atomic per file
//! (written beside, then renamed), so concurrent runs agree.

use std::hash::Hasher as _;
use std::path::{Path, PathBuf};

/// An embedded file: its path under the folder, its content.
pub type Embedded = (&'static str, &'static [u8]);

/// The shipped files could not be written out.
#[derive(Debug, thiserror::Error)]
#[error("cannot write dracheck's shipped files to {}: {source}", path.display())]
pub struct ShareError {
    /// The folder they were to be written to.
    pub dir: PathBuf,
    /// The file that could not be written.
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// The folder holding `files` (a set named `name`: `profiles`, `mock`), written out now where
/// they are not yet: under `$DRACHECK_CACHE_DIR`, `$XDG_CACHE_HOME/dracheck` or
/// `~/.cache/dracheck` (as the Go builds' cache), else under the temp dir.
pub fn materialize(name: &str, files: &[Embedded]) -> Result<PathBuf, ShareError> {
    let leaf = Path::new("share").join(format!("{name}-{:016x}", digest(files)));
    let first = cache_root().join(&leaf);
    match write_all(&first, files) {
        Ok(()) => Ok(first),
        Err((path, source)) => {
            // A read-only home still runs: the temp dir, per user.
            let fallback = std::env::temp_dir().join(format!("dracheck-{}", uid())).join(&leaf);
            write_all(&fallback, files).map(|()| fallback).map_err(|_| ShareError { dir: first, path, source })
        }
    }
}

fn write_all(dir: &Path, files: &[Embedded]) -> Result<(), (PathBuf, std::io::Error)> {
    for (rel, bytes) in files {
        let path = dir.join(rel);
        if std::fs::read(&path).is_ok_and(|have| have == *bytes) {
            continue;
        }
        let err = |source| (path.clone(), source);
        let parent = path.parent().unwrap_or(dir);
        std::fs::create_dir_all(parent).map_err(err)?;
        let mut tmp = tempfile::NamedTempFile::new_in(parent).map_err(err)?;
        std::io::Write::write_all(&mut tmp, bytes).map_err(err)?;
        tmp.persist(&path).map_err(|e| err(e.error))?;
    }
    Ok(())
}

/// FNV-1a over names and contents: stable across builds and Rust versions (a content address,
/// not a security boundary: the folder is the user's own).
fn digest(files: &[Embedded]) -> u64 {
    let mut h = Fnv(FNV_OFFSET);
    for (rel, bytes) in files {
        h.write(rel.as_bytes());
        h.write(&[0]);
        h.write(&(bytes.len() as u64).to_le_bytes());
        h.write(bytes);
    }
    h.finish()
}

/// FNV-1a of `bytes`: the same value in every build and on every machine (std's hasher
/// promises neither), for names derived from content or paths.
pub fn stable_hash(bytes: &[u8]) -> u64 {
    let mut h = Fnv(FNV_OFFSET);
    h.write(bytes);
    h.finish()
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

struct Fnv(u64);

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// `$DRACHECK_CACHE_DIR`, else `$XDG_CACHE_HOME/dracheck`, else `~/.cache/dracheck`, else the
/// temp dir's `dracheck`: the same root as `dracheck_gobuild::cache_root`.
fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("DRACHECK_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("dracheck")
}

/// The user's ID from the owner of this process's `/proc/self` entry, for a per-user temp
/// folder; 0 where it cannot be read.
fn uid() -> u32 {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_written_once_under_a_folder_named_by_their_content() {
        let cache = tempfile::tempdir().unwrap();
        let files: &[Embedded] = &[("a/one.yaml", b"one\n"), ("two.yaml", b"two\n")];
        // SAFETY: this test alone in this crate sets the variable; the others do not read it.
        unsafe { std::env::set_var("DRACHECK_CACHE_DIR", cache.path()) };
        let dir = materialize("t", files).unwrap();
        assert!(dir.starts_with(cache.path().join("share")), "{}", dir.display());
        assert_eq!(std::fs::read_to_string(dir.join("a/one.yaml")).unwrap(), "one\n");
        // A file changed by hand is put back; the same set gives the same folder.
        std::fs::write(dir.join("two.yaml"), "edited").unwrap();
        assert_eq!(materialize("t", files).unwrap(), dir);
        assert_eq!(std::fs::read_to_string(dir.join("two.yaml")).unwrap(), "two\n");
        // Other content, another folder.
        let other = materialize("t", &[("a/one.yaml", b"changed\n"), ("two.yaml", b"two\n")]).unwrap();
        assert_ne!(other, dir);
    }
}
