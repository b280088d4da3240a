//! What this build of indolm was made against, as `crates/torch/build.rs` recorded it: the torch
//! wheel (libtorch's version and the CUDA version it was built for) and the `nccl.h` the c10d
//! shim was compiled with. The GPU check compares them with the machine it runs on
//! (`indolm info --build`).

/// The versions a build was made against (`unknown` where the build script found no torch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildInfo {
    /// torch's `__version__` (`2.11.0+cu130`).
    pub torch: &'static str,
    /// torch's `version.cuda` (`13.0`), or `none` for a CPU-only torch.
    pub cuda: &'static str,
    /// `NCCL_MAJOR.NCCL_MINOR.NCCL_PATCH` of the shim's `nccl.h`, or `none` when it was built
    /// without NCCL.
    pub nccl: &'static str,
}

/// This build's versions.
pub fn build_info() -> BuildInfo {
    BuildInfo {
        torch: option_env!("INDOLM_BUILT_TORCH").unwrap_or("unknown"),
        cuda: option_env!("INDOLM_BUILT_CUDA").unwrap_or("unknown"),
        nccl: option_env!("INDOLM_BUILT_NCCL").unwrap_or("unknown"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_build_records_the_wheel_it_was_made_against() {
        let info = build_info();
        // The tests run against the .venv's torch 2.11 (tch 0.24), which the build found.
        assert!(info.torch.starts_with("2.11"), "{info:?}");
        let dotted = |v: &str| v.split('.').all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()));
        assert!(info.cuda == "none" || dotted(info.cuda), "{info:?}");
        assert!(info.nccl == "none" || (dotted(info.nccl) && info.nccl.split('.').count() == 3), "{info:?}");
        // NCCL is built in exactly where the shim says it is.
        assert_eq!(info.nccl != "none", crate::distributed::ProcessGroup::has_nccl(), "{info:?}");
    }
}
