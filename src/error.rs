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

    /// A command-line flag whose value cannot be used (`--device`, `--out`, `--text`).
    #[error("{flag}: {message}")]
    Argument { flag: String, message: String },

    /// Text or a data source that cannot be used as it is (no text, too few tokens, too long).
    #[error("{context}: {message}")]
    Data { context: String, message: String },

    /// A download that failed: the network, an HTTP status, a size or checksum.
    #[error("{context}: {message}")]
    Download { context: String, message: String },

    /// Training that cannot go on (consecutive non-finite losses).
    #[error("{context}: {message}")]
    Training { context: String, message: String },

    /// Something the operating system or a missing system file refused (signal handlers, fonts).
    #[error("{context}: {message}")]
    System { context: String, message: String },

    /// A request indolm does not support (a tensor kind it cannot write).
    #[error("{context}: {message}")]
    Unsupported { context: String, message: String },

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
    /// [`Error::Argument`].
    pub fn argument(flag: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Argument { flag: flag.into(), message: message.into() }
    }
    /// [`Error::Data`].
    pub fn data(context: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Data { context: context.into(), message: message.into() }
    }
    /// [`Error::Download`].
    pub fn download(context: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Download { context: context.into(), message: message.into() }
    }
    /// [`Error::Training`].
    pub fn training(context: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Training { context: context.into(), message: message.into() }
    }
    /// [`Error::System`].
    pub fn system(context: impl Into<String>, message: impl Into<String>) -> Self {
        Error::System { context: context.into(), message: message.into() }
    }
    /// [`Error::Unsupported`].
    pub fn unsupported(context: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Unsupported { context: context.into(), message: message.into() }
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

/// Adds the path to I/O errors: `std::fs::create_dir_all(dir).with_path(dir)?`.
pub trait IoContext<T> {
    /// The error as [`Error::io`] of `path` (a missing file becomes [`Error::MissingFile`]).
    fn with_path(self, path: impl AsRef<Path>) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn with_path(self, path: impl AsRef<Path>) -> Result<T> {
        self.map_err(|e| Error::io(path, e))
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
