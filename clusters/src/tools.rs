//! Command-line tools dracheck drives on the user's behalf (helm, kind): the one a flag names,
//! else one on `PATH`, else built from the tool's Go recipe into dracheck's cache, so that a
//! machine with only Go and Rust can run every provider.

use std::path::{Path, PathBuf};

use crate::error::{ClusterError, Result};
use crate::gobuild::{self, GoRecipe};
use crate::local::Progress;

/// Where a tool was found, for the progress line and for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Flag,
    Path,
    Built,
}

/// A tool ready to run.
#[derive(Debug, Clone)]
pub struct Located {
    pub program: PathBuf,
    pub origin: Origin,
}

/// `name` from `explicit` (its flag, e.g. `--helm`), else from `PATH`, else built from
/// `recipe`. A flag that names no executable is bad input: it is not silently replaced.
pub async fn locate(
    name: &str,
    flag: &str,
    explicit: Option<&Path>,
    recipe: &GoRecipe,
    progress: &Progress,
) -> Result<Located> {
    if let Some(path) = explicit {
        if !is_executable(path) {
            return Err(ClusterError::MissingTool {
                tool: name.into(),
                detail: format!("{flag} {} is not an executable file", path.display()),
                fix: format!("pass {flag} with the path of a {name} binary, or drop it to use one on PATH or build it"),
            });
        }
        return Ok(Located { program: path.to_path_buf(), origin: Origin::Flag });
    }
    if let Some(program) = on_path(name) {
        return Ok(Located { program, origin: Origin::Path });
    }
    let bin = gobuild::cached_or_build(recipe, progress).await?;
    Ok(Located { program: bin.join(name), origin: Origin::Built })
}

/// The first executable `name` in `PATH`.
pub fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

/// A regular file with an execute bit.
pub fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The last `n` non-empty lines of a command's output, indented like [`crate::error::log_tail`].
pub fn output_tail(output: &str, n: usize) -> String {
    let lines: Vec<&str> = output.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return "  | (no output)".into();
    }
    crate::error::quoted_tail(&lines, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_naming_no_executable_is_refused_with_the_fix() {
        let recipe = crate::helm::recipe();
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let err = rt
            .block_on(locate("helm", "--helm", Some(Path::new("/nonexistent/helm")), &recipe, &Progress::quiet()))
            .unwrap_err();
        assert_eq!(err.failure(), crate::Failure::BadInput);
        let msg = err.to_string();
        assert!(msg.contains("--helm /nonexistent/helm") && msg.contains("PATH"), "{msg}");
    }

    #[test]
    fn the_output_tail_keeps_the_last_lines() {
        assert_eq!(output_tail("a\n\nb\nc\n", 2), "  | b\n  | c");
        assert_eq!(output_tail("", 2), "  | (no output)");
    }
}
