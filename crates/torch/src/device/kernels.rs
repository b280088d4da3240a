//! Which kernels libtorch runs: the scaled-dot-product-attention backend it picks for given
//! shapes, and its deterministic-algorithms switch (through `torch_shim.cpp`; tch binds neither).
use super::op_counts::take_message;
use crate::error::{Error, Result};
use std::ffi::{c_char, c_int, c_void};
use tch::{Device, Kind, Tensor};

extern "C" {
    fn indolm_sdp_choice(
        q: *mut c_void,
        k: *mut c_void,
        v: *mut c_void,
        mask: *mut c_void,
        dropout: f64,
        error: *mut *mut c_char,
    ) -> i64;
    fn indolm_set_deterministic(on: c_int, error: *mut *mut c_char) -> c_int;
}

/// The backend `scaled_dot_product_attention` picks for queries, keys and values of shape
/// [batch, heads, seq, head_dim] in `kind` on `device`, without a mask (no padding, as in
/// pretraining), with `dropout`: libtorch's own choice (`_fused_sdp_choice`), by name.
pub fn attention_backend(shape: [i64; 4], kind: Kind, device: Device, dropout: f64) -> Result<&'static str> {
    let q = Tensor::empty(shape, (kind, device));
    let mut error = std::ptr::null_mut();
    let p = q.as_ptr() as *mut c_void;
    // SAFETY: `q` lives through the call; the shim catches every exception.
    let choice = unsafe { indolm_sdp_choice(p, p, p, std::ptr::null_mut(), dropout, &mut error) };
    Ok(match choice {
        -2 => return Err(Error::system("choosing the attention kernel", take_message(error))),
        0 => "math (plain matrix products; no fused kernel fits)",
        1 => "flash attention",
        2 => "memory-efficient attention",
        3 => "cuDNN attention",
        4 => "an overriding backend",
        _ => "none (libtorch found no backend)",
    })
}

/// Whether [`set_deterministic`] asked for deterministic algorithms.
static DETERMINISTIC: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Asks libtorch for deterministic algorithms: every operation then takes its deterministic path
/// (flash attention's backward among them) or raises where it has none.
pub(crate) fn set_deterministic(on: bool) -> Result<()> {
    let mut error = std::ptr::null_mut();
    // SAFETY: sets a process-wide flag; `error` is set only on failure.
    if unsafe { indolm_set_deterministic(on as c_int, &mut error) } == 0 {
        return Err(Error::system("asking libtorch for deterministic algorithms", take_message(error)));
    }
    DETERMINISTIC.store(on, std::sync::atomic::Ordering::SeqCst);
    Ok(())
}

/// Whether deterministic algorithms were asked for.
pub fn deterministic() -> bool {
    DETERMINISTIC.load(std::sync::atomic::Ordering::SeqCst)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libtorch_names_its_attention_backend_on_the_cpu() {
        let name = attention_backend([2, 4, 16, 8], Kind::Float, Device::Cpu, 0.0).unwrap();
        // The CPU has the flash kernel and the math fallback.
        assert!(name.starts_with("flash") || name.starts_with("math"), "{name}");
    }
}
