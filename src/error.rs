//! The crate's error type: every failure is a value that names what went wrong and where
//! (file, field, tensor, expected vs found), printed once by `main` with a non-zero exit.
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },

    #[error("{path}: file not found{}", hint_suffix(.hint))]
    MissingFile { path: PathBuf, hint: String },

    #[error("{path}:{line}:{column}: invalid JSON: {message}")]
    Json { path: PathBuf, line: usize, column: usize, message: String },

    #[error("{path}: field `{field}`: {message}")]
    Field { path: PathBuf, field: String, message: String },

    #[error("{path}: tensor `{tensor}` has shape {found:?}, expected {expected:?}")]
    Shape { path: PathBuf, tensor: String, expected: Vec<i64>, found: Vec<i64> },

    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },

    #[error("{context}: {message}")]
    Usage { context: String, message: String },

    #[error("tokenizer {path}: {message}")]
    Tokenizer { path: PathBuf, message: String },

    #[error("libtorch: {context}: {source}")]
    Torch { context: String, source: tch::TchError },
}

fn hint_suffix(hint: &str) -> String {
    if hint.is_empty() {
        String::new()
    } else {
        format!(" ({hint})")
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn io(path: impl AsRef<Path>, source: std::io::Error) -> Self {
        if source.kind() == std::io::ErrorKind::NotFound {
            return Error::MissingFile { path: path.as_ref().to_path_buf(), hint: String::new() };
        }
        Error::Io { path: path.as_ref().to_path_buf(), source }
    }
    pub fn invalid(path: impl AsRef<Path>, message: impl Into<String>) -> Self {
        Error::Invalid { path: path.as_ref().to_path_buf(), message: message.into() }
    }
    pub fn field(path: impl AsRef<Path>, field: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Field { path: path.as_ref().to_path_buf(), field: field.into(), message: message.into() }
    }
    pub fn usage(context: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Usage { context: context.into(), message: message.into() }
    }
    pub fn torch(context: impl Into<String>, source: tch::TchError) -> Self {
        Error::Torch { context: context.into(), source }
    }
    pub fn json(path: impl AsRef<Path>, err: &serde_json::Error) -> Self {
        // serde_json appends " at line L column C" to its message; we report those separately.
        let message = err.to_string();
        let message = match message.rfind(" at line ") {
            Some(i) => message[..i].to_string(),
            None => message,
        };
        Error::Json { path: path.as_ref().to_path_buf(), line: err.line(), column: err.column(), message }
    }
}

/// Adds a context string to libtorch errors: `tensor.f_op(..).torch_ctx("attention")?`.
pub trait TorchContext<T> {
    fn torch_ctx(self, context: &str) -> Result<T>;
}

impl<T> TorchContext<T> for std::result::Result<T, tch::TchError> {
    fn torch_ctx(self, context: &str) -> Result<T> {
        self.map_err(|e| Error::torch(context, e))
    }
}

/// Reads a whole file, mapping a missing file to a clear message.
pub fn read_to_string(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| Error::io(path, e))
}

/// Writes `bytes` to `path` through a temporary file in the same folder, fsynced and renamed,
/// so a crash never leaves a half-written file under the final name.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let tmp = tmp_path(path);
    let mut f = std::fs::File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
    f.write_all(bytes).map_err(|e| Error::io(&tmp, e))?;
    f.sync_all().map_err(|e| Error::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
}

/// `dir/.name.tmp` beside `path`.
pub fn tmp_path(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp"))
}
