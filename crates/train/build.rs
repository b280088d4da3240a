//! Build script: this crate's test binaries find libtorch without `LD_LIBRARY_PATH`
//! (`indolm_build::link_torch`).
fn main() {
    indolm_build::link_torch();
}
