//! Build script of the `indolm` binary: an rpath to libtorch and CUDA kept linked
//! (`indolm_build::link_torch`), so the binary runs without `LD_LIBRARY_PATH` and sees the GPUs.
fn main() {
    indolm_build::link_torch();
}
