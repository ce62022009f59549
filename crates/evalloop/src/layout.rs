//! Where a forge keeps its evidence, as the seed lays it out: `<home>/eval/runs/<brief>/s<n>/`
//! holds each arm's work dir (`with/`, `without/`), its meta dir (`with.meta/`: `run.json`,
//! `final.txt`, `transcript.jsonl`, `verify.json`), `mapping.private.json` and `verdict.json`;
//! `<brief>/aggregate.json` and `<brief>/forge.json`; `<home>/eval/ledger.jsonl`. [`read_json`] and
//! [`write_json`] read and write its JSON files (errors: [`FileError`]).

use std::path::{Path, PathBuf};

use super::arm::ArmSide;

/// The eval loop's directory in a home.
pub fn eval_root(home: &Path) -> PathBuf {
    home.join("eval")
}

/// The ledger.
pub fn ledger_path(home: &Path) -> PathBuf {
    eval_root(home).join("ledger.jsonl")
}

/// A brief's run directory.
pub fn brief_dir(home: &Path, brief_id: &str) -> PathBuf {
    eval_root(home).join("runs").join(brief_id)
}

/// Sample `n`'s directory under `brief_dir`.
pub fn sample_dir(brief_dir: &Path, n: u32) -> PathBuf {
    brief_dir.join(format!("s{n}"))
}

/// The arm's work dir.
pub fn arm_dir(sample_dir: &Path, side: ArmSide) -> PathBuf {
    sample_dir.join(side.as_str())
}

/// The arm's meta dir (`<arm>.meta`).
pub fn meta_dir(sample_dir: &Path, side: ArmSide) -> PathBuf {
    sample_dir.join(format!("{}.meta", side.as_str()))
}

/// Why an evidence file could not be read or written; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The file exists but cannot be read.
    #[error("read `{}`: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is over the parser limits (`contract::limits`).
    #[error("read `{}`: the file {source}", path.display())]
    Limits {
        /// The file.
        path: PathBuf,
        /// The limit crossed.
        #[source]
        source: skillforge_contract::limits::LimitError,
    },
    /// The file is not JSON of the expected shape.
    #[error("read `{}`: {source}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// The value does not serialize (a map with non-string keys).
    #[error("{source}")]
    Encode {
        /// The file it was meant for.
        path: PathBuf,
        /// The serializer's error.
        #[source]
        source: serde_json::Error,
    },
    /// The atomic write failed (`write `<path>`: <step>: <io error>`).
    #[error(transparent)]
    Write(#[from] skillforge_stage::fs::WriteError),
}

/// Reads and parses a JSON file; `Ok(None)` when it does not exist.
///
/// # Errors
/// [`FileError`] naming the file: unreadable, over the parser limits (`contract::limits`), or not
/// JSON of the shape.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, FileError> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            skillforge_contract::limits::check_json(&text).map_err(|source| FileError::Limits {
                path: path.to_owned(),
                source,
            })?;
            serde_json::from_str(&text)
                .map(Some)
                .map_err(|source| FileError::Parse {
                    path: path.to_owned(),
                    source,
                })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(FileError::Read {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Writes `value` as pretty JSON atomically ([`skillforge_stage::fs::write_atomic`]).
///
/// # Errors
/// [`FileError::Encode`] or [`FileError::Write`], naming the file.
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<(), FileError> {
    let text = serde_json::to_vec_pretty(value).map_err(|source| FileError::Encode {
        path: path.to_owned(),
        source,
    })?;
    Ok(skillforge_stage::fs::write_atomic(path, &text)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Issue 12 item 7: an evidence file over the parser limits is refused, naming it.
    #[test]
    fn deeply_nested_evidence_file_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("verdict.json");
        std::fs::write(&path, "[".repeat(100_000)).unwrap();
        let e = read_json::<serde_json::Value>(&path)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&path.display().to_string()) && e.contains("64 levels"),
            "{e}"
        );
        assert!(matches!(
            read_json::<serde_json::Value>(&dir.path().join("none.json")),
            Ok(None)
        ));
    }
}
