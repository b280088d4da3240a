//! Which kernels libtorch runs: the scaled-dot-product-attention backend it picks for given
//! tensors ([`sdp_choice`]: shapes, masks, grouped key/value heads), and its
//! deterministic-algorithms switch (through `torch_shim.cpp`; tch binds neither).
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
        is_causal: c_int,
        enable_gqa: c_int,
        error: *mut *mut c_char,
    ) -> i64;
    fn indolm_set_deterministic(on: c_int, error: *mut *mut c_char) -> c_int;
}

/// A kernel `scaled_dot_product_attention` can run (torch's `SDPBackend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SdpBackend {
    /// Plain matrix products: the scores [batch, heads, queries, keys] written out (and, for
    /// grouped heads, the key/value heads repeated first).
    Math,
    /// Flash attention (on CUDA: no mask; on the CPU: libtorch's own flash kernel, masks taken).
    Flash,
    /// The memory-efficient (CUTLASS) kernel: masks taken.
    MemoryEfficient,
    /// cuDNN's attention.
    CuDnn,
    /// A backend registered from outside libtorch.
    Overrideable,
    /// None fits and the math fallback is switched off.
    None,
}

impl SdpBackend {
    /// Its name, as the run's first lines and `indolm info --attention` print it.
    pub fn name(self) -> &'static str {
        match self {
            SdpBackend::Math => "math (plain matrix products; no fused kernel fits)",
            SdpBackend::Flash => "flash attention",
            SdpBackend::MemoryEfficient => "memory-efficient attention",
            SdpBackend::CuDnn => "cuDNN attention",
            SdpBackend::Overrideable => "an overriding backend",
            SdpBackend::None => "none (libtorch found no backend)",
        }
    }

    /// Whether it is a fused kernel: one that never writes the scores out.
    pub fn is_fused(self) -> bool {
        matches!(self, SdpBackend::Flash | SdpBackend::MemoryEfficient | SdpBackend::CuDnn)
    }
}

/// The kernel `scaled_dot_product_attention` picks for q [batch, heads, queries, head_dim] over
/// k and v [batch, kv_heads, keys, head_dim] with `mask` (bool or additive, broadcast to
/// [batch, heads, queries, keys]), `dropout`, `is_causal` and `enable_gqa` (kv_heads dividing
/// heads, read in place): libtorch's own choice (`_fused_sdp_choice`, which the attention call
/// itself makes), so what it depends on (device, dtype, shapes, strides, alignment, the mask,
/// whether gradients are needed, deterministic algorithms, the GPU's generation) is whatever
/// libtorch reads. An error when libtorch refuses the inputs.
pub fn sdp_choice(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    dropout: f64,
    is_causal: bool,
    enable_gqa: bool,
) -> Result<SdpBackend> {
    let mut error = std::ptr::null_mut();
    let mask = mask.map_or(std::ptr::null_mut(), |m| m.as_ptr() as *mut c_void);
    let (q, k, v) = (q.as_ptr() as *mut c_void, k.as_ptr() as *mut c_void, v.as_ptr() as *mut c_void);
    // SAFETY: the tensors live through the call; the shim catches every exception.
    let choice =
        unsafe { indolm_sdp_choice(q, k, v, mask, dropout, is_causal as c_int, enable_gqa as c_int, &mut error) };
    Ok(match choice {
        -2 => return Err(Error::system("choosing the attention kernel", take_message(error))),
        0 => SdpBackend::Math,
        1 => SdpBackend::Flash,
        2 => SdpBackend::MemoryEfficient,
        3 => SdpBackend::CuDnn,
        4 => SdpBackend::Overrideable,
        _ => SdpBackend::None,
    })
}

/// The backend `scaled_dot_product_attention` picks for queries, keys and values of shape
/// [batch, heads, seq, head_dim] in `kind` on `device`, without a mask (no padding, as in
/// pretraining), with `dropout`: libtorch's own choice ([`sdp_choice`]), by name.
pub fn attention_backend(shape: [i64; 4], kind: Kind, device: Device, dropout: f64) -> Result<&'static str> {
    let q = Tensor::empty(shape, (kind, device));
    Ok(sdp_choice(&q, &q, &q, None, dropout, false, false)?.name())
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

    #[test]
    fn the_cpu_s_flash_kernel_takes_a_mask_and_grouped_heads() {
        let q = Tensor::empty([2, 8, 16, 8], (Kind::Float, Device::Cpu));
        let kv = Tensor::empty([2, 2, 16, 8], (Kind::Float, Device::Cpu));
        let mask = Tensor::ones([2, 1, 16, 16], (Kind::Bool, Device::Cpu));
        let choice = |k: &Tensor, mask: Option<&Tensor>, dropout: f64, gqa: bool| {
            sdp_choice(&q, k, k, mask, dropout, false, gqa).unwrap()
        };
        // libtorch 2.11 on the CPU: flash, with or without a mask, grouped heads read in place.
        assert_eq!(choice(&kv, Some(&mask), 0.0, true), SdpBackend::Flash);
        assert_eq!(choice(&kv, None, 0.0, true), SdpBackend::Flash);
        // Heads that differ without enable_gqa, or dropout (which the CPU's flash refuses): math.
        assert_eq!(choice(&kv, Some(&mask), 0.0, false), SdpBackend::Math);
        assert_eq!(choice(&kv, Some(&mask), 0.1, true), SdpBackend::Math);
        assert!(SdpBackend::Flash.is_fused() && !SdpBackend::Math.is_fused());
    }
}
