//! What the build scripts of the crates that link libtorch share (the torch layer's, the
//! evaluations', the tasks' and the binary's): where the torch wheel's `torch/lib` is, and the
//! link arguments without which their test binaries and the `indolm` binary would not find it.
//!
//! torch-sys locates libtorch through the Python torch install (`LIBTORCH_USE_PYTORCH=1`); we
//! ask the same Python for its `torch/lib` folder. Cargo applies a build script's link arguments
//! to its own package's binaries and tests only, so each such package's `crates/torch/build.rs` calls
//! [`link_torch`].
use std::path::{Path, PathBuf};
use std::process::Command;

/// The Python whose torch the build uses: `$VIRTUAL_ENV`'s, else the workspace's `.venv` (found
/// by walking up from the package's folder), else `python3`.
pub fn python() -> String {
    if let Ok(venv) = std::env::var("VIRTUAL_ENV") {
        return format!("{venv}/bin/python");
    }
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    for dir in manifest.ancestors() {
        let local = dir.join(".venv/bin/python");
        if local.exists() {
            return local.display().to_string();
        }
    }
    "python3".to_string()
}

/// The torch wheel's `torch/lib` (or `$LIBTORCH/lib`), if there is one.
pub fn torch_lib_dir() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("LIBTORCH") {
        return Some(PathBuf::from(dir).join("lib"));
    }
    let out = Command::new(python())
        .args(["-c", "import os, torch; print(os.path.join(os.path.dirname(torch.__file__), 'lib'))"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    Some(PathBuf::from(String::from_utf8(out.stdout).ok()?.trim()))
}

/// Makes this package's binaries and tests find libtorch without `LD_LIBRARY_PATH`, and returns
/// `torch/lib`:
/// - an rpath to it;
/// - `libtorch_cuda.so` forced into the NEEDED list (`--no-as-needed`), because nothing
///   references it directly and the linker would drop it, leaving CUDA silently unavailable on
///   GPU nodes.
pub fn link_torch() -> Option<PathBuf> {
    println!("cargo:rerun-if-env-changed=VIRTUAL_ENV");
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    println!("cargo:rerun-if-changed=build.rs");
    let Some(lib) = torch_lib_dir() else {
        println!("cargo:warning=could not locate torch/lib; run `make setup` (the binary will need LD_LIBRARY_PATH)");
        return None;
    };
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    if has_cuda(&lib) {
        println!("cargo:rustc-link-arg=-Wl,--no-as-needed,-ltorch_cuda,--as-needed");
        println!("cargo:rustc-link-search=native={}", lib.display());
    }
    Some(lib)
}

/// Whether this torch has CUDA.
pub fn has_cuda(lib: &Path) -> bool {
    lib.join("libtorch_cuda.so").exists()
}
