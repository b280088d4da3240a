//! The one TOML reader of every recipe kind: a syntax error, a wrong type or an unknown key is
//! reported with the file, line and column.
use crate::error::{Error, Result};
use crate::files::read_to_string;
use std::path::Path;

/// Reads a TOML file into `T`; a syntax error or an unknown key is reported with its line and
/// column. Every recipe kind (pretraining, fine-tuning) is read through this.
pub fn parse_toml<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text = read_to_string(path)?;
    toml::from_str(&text).map_err(|e| {
        let (line, col) = e.span().map(|s| line_col(&text, s.start)).unwrap_or((0, 0));
        Error::invalid(path, format!("line {line}, column {col}: {}", e.message()))
    })
}

/// Checks that a recipe value used as a file or folder name (a run's `name`, a corpus, a source)
/// is one safe path component: letters, digits, `-`, `_` and `.`, and not empty, `.` or `..`.
/// Such names are joined to output folders that `--overwrite` deletes, so `name = ".."` must
/// never reach a path.
pub fn check_name(recipe_path: &Path, field: &str, value: &str) -> Result<()> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    let shown = crate::files::quoted(value);
    if value.is_empty() || value == "." || value == ".." || !value.chars().all(allowed) {
        return Err(Error::field(
            recipe_path,
            field,
            format!("{shown} is not a usable name: use letters, digits, `-`, `_` and `.` (not `.` or `..`)"),
        ));
    }
    if value.len() > MAX_NAME_LEN {
        return Err(Error::field(
            recipe_path,
            field,
            format!(
                "{shown} is too long: at most {MAX_NAME_LEN} characters (it names folders, lock and temporary files)"
            ),
        ));
    }
    Ok(())
}

/// The longest run, corpus or source name: its lock file (`.<name>.lock`) and temporaries
/// (`.<name>.<pid>-<n>-<host>.tmp`) must stay within a file name's 255 bytes.
pub(crate) const MAX_NAME_LEN: usize = 100;

/// The 1-based line and column of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map(|i| i + 1).unwrap_or(0) + 1;
    (line, col)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_single_safe_path_components() {
        let recipe = Path::new("r.toml");
        for good in ["tiny-sample", "indobert_base.v2", "ud-id", "a"] {
            assert!(check_name(recipe, "name", good).is_ok(), "{good}");
        }
        for bad in ["", ".", "..", "a/b", "../x", "/abs", "with space", "a\\b", "ümlaut"] {
            let err = check_name(recipe, "name", bad).unwrap_err().to_string();
            assert!(err.contains("r.toml") && err.contains("name") && err.contains("not a usable name"), "{err}");
        }
    }

    #[test]
    fn line_and_column_are_one_based() {
        let text = "a = 1\nbb = 2\n";
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, 4), (1, 5));
        assert_eq!(line_col(text, 6), (2, 1));
        assert_eq!(line_col(text, 8), (2, 3));
        assert_eq!(line_col(text, 1000), (3, 1), "an offset past the end is the end");
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Small {
        name: String,
        #[serde(default)]
        steps: u64,
    }

    fn error_of(text: &str) -> String {
        let dir = std::env::temp_dir().join(format!("indolm-reader-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{:x}.toml", text.len() * 31 + text.bytes().map(u64::from).sum::<u64>() as usize));
        std::fs::write(&path, text).unwrap();
        let message = parse_toml::<Small>(&path).unwrap_err().to_string();
        std::fs::remove_file(&path).unwrap();
        message
    }

    #[test]
    fn unknown_keys_and_bad_values_name_their_line_and_column() {
        let err = error_of("name = \"x\"\n\nstpes = 3\n");
        assert!(err.contains("line 3, column 1") && err.contains("unknown field `stpes`"), "{err}");
        let err = error_of("name = \"x\"\nsteps = \"many\"\n");
        assert!(err.contains("line 2, column 9"), "{err}");
        let err = error_of("name = \"x\"\nsteps = [\n");
        assert!(err.contains("line 2") || err.contains("line 3"), "{err}");
    }
}
