//! Embeds the shipped profiles (`profiles/` at the workspace root: `<driver>/*.yaml`, the
//! format's README and its JSON Schema, which the profiles' modelines name) into the suite, so that a dracheck binary needs no checkout: the folder is
//! listed here, and cargo runs this again when anything in it changes.

use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let dir = manifest.parent().expect("the suite sits in the workspace").join("profiles");
    println!("cargo::rerun-if-changed={}", dir.display());
    let mut files = Vec::new();
    collect(&dir, &dir, &mut files);
    files.sort();
    let mut out = String::from(
        "/// The shipped profiles: (path under `profiles/`, content).\npub const SHIPPED: &[(&str, &[u8])] = &[\n",
    );
    for (rel, path) in &files {
        out.push_str(&format!("    ({rel:?}, include_bytes!({:?})),\n", path.display().to_string()));
    }
    out.push_str("];\n");
    let target = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("shipped_profiles.rs");
    std::fs::write(&target, out).unwrap_or_else(|e| panic!("writing {}: {e}", target.display()));
}

/// Every `*.yaml` one level down (`<driver>/<name>.yaml`), and `README.md` and
/// `profile.schema.json` at the top.
fn collect(root: &Path, dir: &Path, found: &mut Vec<(String, PathBuf)>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.unwrap_or_else(|e| panic!("reading {}: {e}", dir.display())).path();
        let rel = path.strip_prefix(root).expect("under the root").to_string_lossy().replace('\\', "/");
        if path.is_dir() && dir == root {
            collect(root, &path, found);
        } else if path.is_file()
            && ((dir != root && path.extension().is_some_and(|e| e == "yaml"))
                || (dir == root && (rel == "README.md" || rel == "profile.schema.json")))
        {
            found.push((rel, path));
        }
    }
}
