//! Build script of the torch layer: libtorch linked as `indolm_build::link_torch` links it, and the
//! C++ shims compiled against the wheel's headers:
//! - the c10d shim (`src/distributed/c10d_shim.cpp`, and `reducer_shim.cpp`: the gradient
//!   buckets all-reduced during backward), compiled with the flags torch-sys uses (C++17, the
//!   C++11 ABI) and the vendored gloo headers;
//! - the optimizer shim (`src/optim/optim_shim.cpp`: setting a parameter's `.grad`, fused AdamW)
//!   and the device shim (`src/device/torch_shim.cpp`: operation counts, the attention backend,
//!   determinism) with the same flags. `src/shim.h` is what they share.
//!
//! What the build was made against is handed to the crate as environment variables
//! (`device::build_info` reads them): the torch wheel's version and CUDA version
//! (`INDOLM_BUILT_TORCH`, `INDOLM_BUILT_CUDA`) and the version of the `nccl.h` the c10d shim was
//! compiled with (`INDOLM_BUILT_NCCL`, `none` without NCCL).
use std::path::{Path, PathBuf};

fn main() {
    let Some(lib) = indolm_build::link_torch() else {
        return;
    };
    println!("cargo:rerun-if-changed=src/shim.h");
    let nccl = compile_c10d_shim(&lib);
    compile_torch_shim(&lib, "src/optim/optim_shim.cpp", "indolm_optim");
    compile_torch_shim(&lib, "src/device/torch_shim.cpp", "indolm_device");
    record_versions(&lib, nccl.as_deref());
}

/// Hands the crate the torch version and CUDA version of the wheel at `lib` (its `version.py`)
/// and the NCCL version of the `nccl.h` in `nccl` (none when the shim was built without NCCL).
fn record_versions(lib: &Path, nccl: Option<&Path>) {
    let version_py = lib.parent().expect("torch/lib has a parent").join("version.py");
    println!("cargo:rerun-if-changed={}", version_py.display());
    let text = std::fs::read_to_string(&version_py).unwrap_or_default();
    // `__version__ = '2.11.0+cu130'` and `cuda: Optional[str] = '13.0'` (or `= None`).
    let value = |name: &str| {
        text.lines()
            .find(|l| l.split([' ', ':', '=']).next() == Some(name))
            .and_then(|l| l.split('\'').nth(1))
            .map_or("none".to_string(), str::to_string)
    };
    println!("cargo:rustc-env=INDOLM_BUILT_TORCH={}", value("__version__"));
    println!("cargo:rustc-env=INDOLM_BUILT_CUDA={}", value("cuda"));
    let header = nccl.map(|dir| std::fs::read_to_string(dir.join("nccl.h")).unwrap_or_default());
    let define = |header: &str, name: &str| {
        header.lines().find_map(|l| l.strip_prefix(&format!("#define {name} ")).map(|v| v.trim().to_string()))
    };
    let version = header.and_then(|h| {
        Some(format!("{}.{}.{}", define(&h, "NCCL_MAJOR")?, define(&h, "NCCL_MINOR")?, define(&h, "NCCL_PATCH")?))
    });
    println!("cargo:rustc-env=INDOLM_BUILT_NCCL={}", version.as_deref().unwrap_or("none"));
}

/// Compiles one shim over libtorch's ATen (no c10d) into the static library `name`.
fn compile_torch_shim(lib: &std::path::Path, file: &str, name: &str) {
    println!("cargo:rerun-if-changed={file}");
    let include = lib.parent().expect("torch/lib has a parent").join("include");
    cc::Build::new()
        .cpp(true)
        .file(file)
        .std("c++17")
        .define("_GLIBCXX_USE_CXX11_ABI", "1")
        // As libtorch itself is built: its headers' debug-only checks read state that only a
        // debug libtorch keeps (RecordFunction's `inputs_valid_`).
        .define("NDEBUG", None)
        .include(&include)
        .include(include.join("torch/csrc/api/include"))
        .warnings(false)
        .compile(name);
}

/// Compiles `src/distributed/c10d_shim.cpp` (the process group) and `reducer_shim.cpp` (the
/// gradient all-reduce overlapped with backward) into a static library linked before libtorch.
/// Returns the folder of the `nccl.h` it was compiled with, if NCCL was built in.
fn compile_c10d_shim(lib: &std::path::Path) -> Option<PathBuf> {
    println!("cargo:rerun-if-changed=src/distributed/c10d_shim.cpp");
    println!("cargo:rerun-if-changed=src/distributed/c10d_shim.h");
    println!("cargo:rerun-if-changed=src/distributed/reducer_shim.cpp");
    println!("cargo:rerun-if-changed=third_party/gloo");
    let include = lib.parent().expect("torch/lib has a parent").join("include");
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .file("src/distributed/c10d_shim.cpp")
        .file("src/distributed/reducer_shim.cpp")
        .std("c++17")
        .define("_GLIBCXX_USE_CXX11_ABI", "1")
        .define("USE_C10D_GLOO", None)
        .include("third_party/gloo")
        .include(&include)
        .include(include.join("torch/csrc/api/include"))
        .flag_if_supported("-Wno-unused-parameter")
        .flag_if_supported("-Wno-deprecated-declarations")
        .warnings(false);
    let nccl = nccl_includes(lib);
    if let Some(dirs) = &nccl {
        build.define("USE_C10D_NCCL", None);
        for dir in dirs {
            build.include(dir);
        }
    } else {
        println!("cargo:warning=CUDA's headers (nvidia-cuda-crt, nvidia-cuda-cccl) were not found beside torch: building without NCCL (data-parallel training on GPUs is refused; `make setup` installs them)");
    }
    build.compile("indolm_c10d");
    println!("cargo:rustc-link-search=native={}", lib.display());
    println!("cargo:rustc-link-lib=dylib=torch_cpu");
    println!("cargo:rustc-link-lib=dylib=c10");
    if nccl.is_some() {
        println!("cargo:rustc-link-lib=dylib=c10_cuda");
    }
    nccl.and_then(|dirs| dirs.into_iter().find(|d| d.join("nccl.h").exists()))
}

/// The include folders ProcessGroupNCCL.hpp needs, when this torch has CUDA and the CUDA headers
/// are installed beside it (the wheel's `nvidia-*` packages: the runtime, plus `nvidia-cuda-crt`
/// for `crt/host_config.h` and `nvidia-cuda-cccl` for `nv/target`, and NCCL's own folder).
fn nccl_includes(lib: &std::path::Path) -> Option<Vec<PathBuf>> {
    if !lib.join("libtorch_cuda.so").exists() || !lib.join("libc10_cuda.so").exists() {
        return None;
    }
    let nvidia = lib.parent()?.parent()?.join("nvidia");
    // Installing the headers later (`make setup`) makes this script run again.
    let headers = nvidia.join("cu13/include");
    if headers.exists() {
        println!("cargo:rerun-if-changed={}", headers.display());
    }
    let cuda = ["cu13", "cuda_runtime"].iter().map(|d| nvidia.join(d).join("include")).find(|d| {
        d.join("cuda_runtime_api.h").exists() && d.join("crt/host_config.h").exists() && d.join("nv/target").exists()
    })?;
    let nccl = [nvidia.join("nccl/include"), cuda.clone()].into_iter().find(|d| d.join("nccl.h").exists())?;
    Some(vec![cuda, nccl])
}
