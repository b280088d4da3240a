//! Device and thread selection: `--device auto|cpu|cuda|cuda:N` and `--threads N`.
use crate::error::{Error, Result};
use crate::model::Precision;
use tch::Device;

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

/// The compute precision for a device: bf16 mixed precision on CUDA, fp32 on CPU.
pub fn default_precision(device: Device) -> Precision {
    if device.is_cuda() {
        Precision::Bf16
    } else {
        Precision::Fp32
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
