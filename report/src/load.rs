//! Reading results back: one file, or every result in a folder. A file that is not a result, or
//! one written by a newer dracheck, is refused with what to do about it.

use std::path::{Path, PathBuf};

use dracheck_results::{RunResult, SCHEMA_VERSION};

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {path}: {source}. Pass the JSON file a conformance run wrote (under reports/ by default).")]
    Read { path: PathBuf, source: std::io::Error },
    #[error(
        "{path} is not a dracheck result: {detail}. Pass the JSON file a conformance run wrote (it starts with \"schema_version\")."
    )]
    NotAResult { path: PathBuf, detail: String },
    #[error(
        "{path} has result schema version {found}, newer than this dracheck reads ({SCHEMA_VERSION}). Render it with the dracheck version that wrote it ({writer}), or update dracheck."
    )]
    NewerSchema { path: PathBuf, found: u64, writer: String },
    #[error(
        "{path} holds no dracheck results (*.json). Point it at the folder conformance runs write to (`--out`, default reports/)."
    )]
    EmptyDir { path: PathBuf },
}

/// One result file.
pub fn load(path: &Path) -> Result<RunResult, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read { path: path.into(), source })?;
    parse(path, &text)
}

/// A result from its JSON text; `path` names it in errors.
pub fn parse(path: &Path, text: &str) -> Result<RunResult, LoadError> {
    let not_a_result = |detail: String| LoadError::NotAResult { path: path.into(), detail };
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| not_a_result(format!("not JSON ({e})")))?;
    let Some(version) = value.get("schema_version") else {
        return Err(not_a_result("it has no \"schema_version\" field".into()));
    };
    let Some(found) = version.as_u64() else {
        return Err(not_a_result(format!("\"schema_version\" is {version}, not a number")));
    };
    if found > u64::from(SCHEMA_VERSION) {
        let writer = value.get("dracheck_version").and_then(|v| v.as_str()).unwrap_or("unknown").to_string();
        return Err(LoadError::NewerSchema { path: path.into(), found, writer });
    }
    serde_path_to_error::deserialize(value).map_err(|e| not_a_result(format!("field `{}`: {}", e.path(), e.inner())))
}

/// Every result in `dir` (not recursive), ordered by file name. Files that are not results are
/// an error too: a matrix that silently drops a run would misreport the record.
pub fn load_dir(dir: &Path) -> Result<Vec<(PathBuf, RunResult)>, LoadError> {
    let entries = std::fs::read_dir(dir).map_err(|source| LoadError::Read { path: dir.into(), source })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(LoadError::EmptyDir { path: dir.into() });
    }
    files.into_iter().map(|p| load(&p).map(|r| (p, r))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse(Path::new("r.json"), text).unwrap_err().to_string()
    }

    #[test]
    fn refuses_what_is_not_a_result_with_the_reason() {
        assert!(err("<html>").contains("not JSON"), "{}", err("<html>"));
        assert!(err(r#"{"a": 1}"#).contains("no \"schema_version\""));
        assert!(err(r#"{"schema_version": "one"}"#).contains("not a number"));
        let missing = err(r#"{"schema_version": 1}"#);
        assert!(missing.contains("is not a dracheck result") && missing.contains("field"), "{missing}");
    }

    #[test]
    fn refuses_a_newer_schema_naming_the_writer() {
        let e = err(r#"{"schema_version": 99, "dracheck_version": "9.0.0"}"#);
        assert!(e.contains("schema version 99") && e.contains("9.0.0"), "{e}");
    }

    #[test]
    fn an_empty_folder_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
        assert!(matches!(load_dir(dir.path()), Err(LoadError::EmptyDir { .. })));
    }
}
