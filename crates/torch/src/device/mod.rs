//! Device and thread selection (`--device auto|cpu|cuda|cuda:N`, `--threads N`), the compute
//! precision ([`Precision`]), and what the device layer offers the layers above: counting the
//! operations of an update and the waits among them ([`op_counts`]), libtorch's exceptions as
//! values ([`torch_errors`]), which kernels libtorch runs ([`kernels`]: the attention
//! backend, deterministic algorithms), and what the build was made against ([`build_info`]).
pub mod build_info;
pub mod kernels;
pub mod op_counts;
pub mod torch_errors;

use crate::error::{Error, Result};
use indolm_core::recipe::{bf16_on_cpu_for_tests, PrecisionSetting};
use std::path::Path;
use tch::{Device, Kind, Tensor};

/// The dtype matrix multiplications run in. Weights stay fp32; `Bf16` casts inputs and
/// weights of every linear layer and attention to bf16 and returns LayerNorm, softmax and
/// loss to fp32, as torch's autocast does (tch's own `autocast` can only pick fp16).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    /// Everything in fp32.
    Fp32,
    /// Matrix products in bf16; LayerNorm, softmax and loss in fp32.
    Bf16,
}

impl Precision {
    /// The dtype matrix products run in.
    pub fn compute_kind(self) -> Kind {
        match self {
            Precision::Fp32 => Kind::Float,
            Precision::Bf16 => Kind::BFloat16,
        }
    }
}

/// Parses a `--device` value; `auto` picks the first CUDA device when one is present.
pub fn parse_device(spec: &str) -> Result<Device> {
    let cuda_count = || if tch::Cuda::is_available() { tch::Cuda::device_count() as usize } else { 0 };
    let device = match spec {
        "auto" => return Ok(if cuda_count() > 0 { Device::Cuda(0) } else { Device::Cpu }),
        "cpu" => return Ok(Device::Cpu),
        "cuda" => Device::Cuda(0),
        s if s.starts_with("cuda:") => {
            let n: usize = s[5..]
                .parse()
                .map_err(|_| Error::argument("--device", format!("expected cuda:N with a number N, found {s:?}")))?;
            Device::Cuda(n)
        }
        s => return Err(Error::argument("--device", format!("expected auto, cpu, cuda or cuda:N, found {s:?}"))),
    };
    let Device::Cuda(n) = device else { unreachable!() };
    let count = cuda_count();
    if n >= count {
        return Err(Error::argument(
            "--device",
            format!("{spec} requested but this machine has {count} CUDA device(s) visible to libtorch (check the NVIDIA driver, >= 580 for CUDA 13, and CUDA_VISIBLE_DEVICES)"),
        ));
    }
    Ok(device)
}

/// Sets libtorch's intra-op threads; `None` keeps libtorch's default (all cores).
pub fn set_threads(threads: Option<usize>) -> Result<()> {
    match threads {
        Some(0) => Err(Error::argument("--threads", "expected at least 1")),
        Some(n) => {
            tch::set_num_threads(n as i32);
            Ok(())
        }
        None => Ok(()),
    }
}

/// Calls each of libtorch's CPU functions that go through MKL's vector math library (VML) once
/// on the calling thread and once across every intra-op thread, discarding the results. Must run
/// after [`set_threads`] and before the first real computation.
///
/// The first VML call of a process can race with MKL's own lazy set-up: in 62 of 2,250 runs of a
/// 10-step recipe on the 2-core CI machine (2 threads), the second thread's half of the first
/// `exp` came out at low accuracy (relative error 3e-5 typical, 1.5e-4 at worst, against 6e-8;
/// every later call exact). So two runs of one recipe, or a resumed run and an uninterrupted one,
/// could differ in the last bits from the first update on. After this warm-up: 600 of 600 runs
/// bit-identical (about 30 ms at start-up on 2 threads).
pub fn warm_up_cpu_math() {
    let threads = tch::get_num_threads().max(1) as i64;
    // Above libtorch's parallel grain (32,768 elements) once per thread, so every thread gets
    // a chunk; one element stays on the calling thread.
    let sizes = [1, 32_768 * (threads + 1)];
    tch::no_grad(|| {
        for kind in [tch::Kind::Float, tch::Kind::Double] {
            for size in sizes {
                let x = Tensor::full([size], 0.5, (kind, Device::Cpu));
                for f in VML_FUNCTIONS {
                    let _ = f(&x);
                }
            }
        }
    });
}

/// libtorch's unary functions that call MKL VML for float and double (ATen/cpu/vml.h).
const VML_FUNCTIONS: [fn(&Tensor) -> Tensor; 16] = [
    Tensor::acos,
    Tensor::asin,
    Tensor::atan,
    Tensor::cos,
    Tensor::erf,
    Tensor::erfc,
    Tensor::erfinv,
    Tensor::exp,
    Tensor::log,
    Tensor::log10,
    Tensor::log2,
    Tensor::sin,
    Tensor::sqrt,
    Tensor::tan,
    Tensor::tanh,
    Tensor::trunc,
];

/// A host tensor of `values` in `shape`, ready to be copied to `device`: in pinned (page-locked)
/// memory when `device` is CUDA, so that [`upload`] queues the copy without the host waiting.
/// Pinned by `at::_pin_memory`, which takes the accelerator's pinned allocator for `device`:
/// `Tensor::pin_memory(device)`, the only form tch binds, passes the argument libtorch deprecates
/// (a warning in every process).
pub fn staged<T: tch::kind::Element>(values: &[T], shape: &[i64], device: Device) -> Tensor {
    let t = Tensor::from_slice(values).view(shape);
    match device {
        Device::Cuda(_) => t.f_internal_pin_memory(device).unwrap_or(t),
        _ => t,
    }
}

/// `host` on `device`, the copy asked for as non-blocking: from pinned memory (CUDA) it is queued,
/// not waited for; on the CPU there is no copy at all.
pub fn upload(host: &Tensor, device: Device) -> Tensor {
    host.to_device_(device, host.kind(), true, false)
}

/// `values` in `shape` on `device`, the copy queued without the host waiting: staged in pinned
/// memory and uploaded non-blocking on CUDA, no copy at all on the CPU.
pub fn to_device_queued<T: tch::kind::Element>(values: &[T], shape: &[i64], device: Device) -> Tensor {
    upload(&staged(values, shape, device), device)
}

/// Equal-length 1-D device tensors (values, 0/1 flags) brought to the host in one transfer, so a
/// batch makes the host wait once: stacked as f64, read back, one vector each.
pub fn read_back(rows: &[Tensor]) -> Vec<Vec<f64>> {
    let stacked: Vec<Tensor> = rows.iter().map(|t| t.to_kind(tch::Kind::Double)).collect();
    let host = Tensor::stack(&stacked, 0).to_device(Device::Cpu);
    (0..rows.len() as i64).map(|i| Vec::<f64>::try_from(host.get(i)).expect("a vector of f64")).collect()
}

/// The compute precision for a device: bf16 mixed precision on CUDA, fp32 on CPU.
pub fn default_precision(device: Device) -> Precision {
    if device.is_cuda() {
        Precision::Bf16
    } else {
        Precision::Fp32
    }
}

/// Waits until the device has finished its queued work (CUDA runs asynchronously; a no-op on
/// CPU): for timing, and after collectives that return once queued.
pub fn synchronize(device: Device) {
    if let Device::Cuda(index) = device {
        tch::Cuda::synchronize(index as i64);
    }
}

/// A one-line description of the device for logs.
pub fn describe(device: Device) -> String {
    match device {
        Device::Cpu => format!("cpu ({} threads)", tch::get_num_threads()),
        Device::Cuda(n) => format!("cuda:{n} (of {})", tch::Cuda::device_count()),
        other => format!("{other:?}"),
    }
}

/// The compute precision a recipe's `precision` asks for on `device` (pretraining and the
/// fine-tuning recipes): bf16 on CPU is refused.
pub fn resolve_precision(setting: PrecisionSetting, device: Device, recipe_path: &Path) -> Result<Precision> {
    match (setting, device) {
        (PrecisionSetting::Fp32, _) => Ok(Precision::Fp32),
        (PrecisionSetting::Bf16, d) if d.is_cuda() || bf16_on_cpu_for_tests() => Ok(Precision::Bf16),
        (PrecisionSetting::Bf16, _) => Err(Error::field(
            recipe_path,
            "precision",
            "bf16 needs a CUDA device; use \"auto\" (bf16 on CUDA, fp32 on CPU) or \"fp32\"",
        )),
        (PrecisionSetting::Auto, d) => Ok(default_precision(d)),
    }
}

/// Reseeds libtorch's global generator (dropout, initialisation) for `salt`.
pub fn seed_torch(seed: u64, salt: u64) {
    tch::manual_seed(indolm_core::seeds::derive_seed(seed, salt) as i64);
}
