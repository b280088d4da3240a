//! The crate's error type: every failure is a value that names what went wrong and where
//! (file, field, tensor, expected vs found), printed once by `main` with a non-zero exit.
use std::path::{Path, PathBuf};

/// Everything that can go wrong, each with the context its message needs.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An I/O error on a file other than "not found".
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },

    /// A file or folder that does not exist, with a hint about what was expected there.
    #[error("{path}: file not found{}", hint_suffix(.hint))]
    MissingFile {
        /// The missing path.
        path: PathBuf,
        /// What to do about it (may be empty).
        hint: String,
    },

    /// A JSON file that does not parse.
    #[error("{path}:{line}:{column}: invalid JSON: {message}")]
    Json {
        /// The file.
        path: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// serde_json's message without its position.
        message: String,
    },

    /// A field of a recipe or configuration with a value that cannot be used.
    #[error("{path}: field `{field}`: {message}")]
    Field {
        /// The file.
        path: PathBuf,
        /// The field, dotted (`optimizer.lr`).
        field: String,
        /// Expected vs found.
        message: String,
    },

    /// A tensor whose shape differs from the model's.
    #[error("{path}: tensor `{tensor}` has shape {found:?}, expected {expected:?}")]
    Shape {
        /// The weights file.
        path: PathBuf,
        /// The tensor's name.
        tensor: String,
        /// The shape the model needs.
        expected: Vec<i64>,
        /// The shape in the file.
        found: Vec<i64>,
    },

    /// A file whose content cannot be used (a corrupt checkpoint, a bad CSV row).
    #[error("{path}: {message}")]
    Invalid {
        /// The file or folder.
        path: PathBuf,
        /// What is wrong, with the row or line where known.
        message: String,
    },

    /// A command-line flag whose value cannot be used (`--device`, `--out`, `--text`).
    #[error("{flag}: {message}")]
    Argument {
        /// The flag.
        flag: String,
        /// Expected vs found.
        message: String,
    },

    /// Text or a data source that cannot be used as it is (no text, too few tokens, too long).
    #[error("{context}: {message}")]
    Data {
        /// The source or text, e.g. "source `cc100-id`".
        context: String,
        /// What is wrong and what would fix it.
        message: String,
    },

    /// A download that failed: the network, an HTTP status, a size or checksum.
    #[error("{context}: {message}")]
    Download {
        /// `download <url>`.
        context: String,
        /// What failed and whether running again resumes.
        message: String,
    },

    /// Training that cannot go on (consecutive non-finite losses).
    #[error("{context}: {message}")]
    Training {
        /// `run <name>`.
        context: String,
        /// What happened and how to continue.
        message: String,
    },

    /// Something the operating system or a missing system file refused (signal handlers, fonts).
    #[error("{context}: {message}")]
    System {
        /// What was being set up.
        context: String,
        /// What was refused and what to install or change.
        message: String,
    },

    /// A request indolm does not support (a tensor kind it cannot write).
    #[error("{context}: {message}")]
    Unsupported {
        /// What was being done.
        context: String,
        /// What is not supported.
        message: String,
    },

    /// A tokenizer that cannot be loaded or used.
    #[error("tokenizer {path}: {message}")]
    Tokenizer {
        /// The tokenizer file or folder.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },

    /// An error libtorch raised.
    #[error("libtorch: {context}: {source}")]
    Torch {
        /// What indolm was doing.
        context: String,
        /// libtorch's error (`tch::TchError`; this crate does not link libtorch).
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

fn hint_suffix(hint: &str) -> String {
    if hint.is_empty() {
        String::new()
    } else {
        format!(" ({hint})")
    }
}

/// indolm's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An I/O error on `path`; "not found" becomes [`Error::MissingFile`].
    pub fn io(path: impl AsRef<Path>, source: std::io::Error) -> Self {
        if source.kind() == std::io::ErrorKind::NotFound {
            return Error::MissingFile { path: path.as_ref().to_path_buf(), hint: String::new() };
        }
        Error::Io { path: path.as_ref().to_path_buf(), source }
    }
    /// [`Error::Invalid`].
    pub fn invalid(path: impl AsRef<Path>, message: impl Into<String>) -> Self {
        Error::Invalid { path: path.as_ref().to_path_buf(), message: message.into() }
    }
    /// [`Error::Field`].
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
    /// [`Error::Torch`].
    pub fn torch(context: impl Into<String>, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Error::Torch { context: context.into(), source: Box::new(source) }
    }
    /// [`Error::Json`] from serde_json's error, its position reported separately.
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
