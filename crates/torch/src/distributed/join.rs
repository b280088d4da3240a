//! Whether this process joins a data-parallel group, and how: a process launched by torchrun or
//! srun joins the c10d group of its launch ([`join`]: NCCL on CUDA, one GPU per rank, or Gloo,
//! over the CPU or CUDA tensors staged through the host), a plain process runs alone
//! ([`join_if_launched`]).
use super::{Launch, ProcessGroup};
use crate::error::{Error, Result};
use std::time::Duration;
use tch::Device;

/// The c10d backend asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// NCCL on CUDA, Gloo on the CPU.
    Auto,
    /// NCCL: one GPU per rank.
    Nccl,
    /// Gloo: CPU tensors, or CUDA tensors staged through the host.
    Gloo,
}

/// How a launched process joins its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JoinSettings {
    /// The backend asked for.
    pub backend: Backend,
    /// How long every rank may take to join, and each collective.
    pub collective_timeout: Duration,
    /// How long the other ranks wait for rank 0's work through the rendezvous store.
    pub rank0_wait_timeout: Duration,
    /// Ask for deterministic algorithms (before NCCL's group is made, which reads the switch).
    pub deterministic: bool,
}

/// Joins the process group of `launch` for `device`'s kind: on CUDA, NCCL or Gloo with each rank
/// on the GPU [`gpu_of`] its local rank (with Gloo ranks may share one); on the CPU, Gloo.
/// `timeout` bounds the join and each collective. Returns the rank's device and its group.
pub fn join(launch: &Launch, device: Device, backend: Backend, timeout: Duration) -> Result<(Device, ProcessGroup)> {
    let on_cuda = |index: usize| crate::device::parse_device(&format!("cuda:{index}"));
    let visible = || if tch::Cuda::is_available() { tch::Cuda::device_count() as usize } else { 0 };
    match (device, backend) {
        (Device::Cuda(_), Backend::Gloo) => {
            let device = on_cuda(gpu_of(launch.local_rank, visible()))?;
            Ok((device, ProcessGroup::gloo_on(launch, device, timeout)?))
        }
        (Device::Cuda(_), _) => {
            let local = launch.local_rank;
            let device = on_cuda(gpu_of(local, visible())).map_err(|e| {
                Error::argument(
                    "backend nccl",
                    format!("{e}; NCCL takes one GPU per rank (local rank {local} here): launch one rank per GPU, or share GPUs with the gloo backend (--dist-backend gloo, dist-check --backend gloo)"),
                )
            })?;
            let Device::Cuda(index) = device else { unreachable!("parse_device gave CUDA") };
            Ok((device, ProcessGroup::nccl(launch, index, timeout)?))
        }
        (_, Backend::Nccl) => Err(Error::argument(
            "backend nccl",
            "NCCL runs on CUDA devices (--device cuda); on the CPU the backend is gloo",
        )),
        _ => Ok((device, ProcessGroup::gloo(launch, timeout)?)),
    }
}

/// The GPU a rank takes among the `visible` ones: its local rank, modulo the GPUs it sees. Under
/// torchrun or `srun --gpus-per-node` every rank of a node sees all of its GPUs and takes
/// `cuda:LOCAL_RANK`; under `srun --gpus-per-task=1` or `--gpu-bind` each task sees only its own
/// GPU, as `cuda:0`, whatever its local rank. With no GPU visible, the local rank (the device
/// check then names the missing device).
pub(crate) fn gpu_of(local_rank: usize, visible: usize) -> usize {
    match visible {
        0 => local_rank,
        n => local_rank % n,
    }
}

/// Joins the data-parallel group when torchrun or srun launched this process (each process then
/// takes the GPU of its local rank on CUDA, with NCCL; Gloo on the CPU; see [`join`]), after
/// asking for deterministic algorithms when `settings.deterministic` (before NCCL's group is made,
/// which reads the switch), its waits for rank 0 limited by `settings.rank0_wait_timeout`.
/// Returns the device to train on and the group; `device` and no group for a plain process.
pub fn join_if_launched(device: Device, settings: JoinSettings) -> Result<(Device, Option<ProcessGroup>)> {
    if settings.deterministic {
        // Read by cuBLAS when its first handle is made: without it, deterministic algorithms
        // refuse cuBLAS's matrix products on CUDA.
        if std::env::var_os("CUBLAS_WORKSPACE_CONFIG").is_none() {
            std::env::set_var("CUBLAS_WORKSPACE_CONFIG", ":4096:8");
        }
        crate::device::kernels::set_deterministic(true)?;
    }
    let Some(launch) = Launch::from_env()? else { return Ok((device, None)) };
    let (device, mut group) = join(&launch, device, settings.backend, settings.collective_timeout)?;
    group.set_rank0_wait_timeout(settings.rank0_wait_timeout);
    Ok((device, Some(group)))
}

#[cfg(test)]
mod tests {
    use super::gpu_of;

    /// Every GPU of the node visible: each rank takes its local rank's; one GPU bound to each task
    /// (`--gpus-per-task=1`): every rank takes `cuda:0`; two per task: alternating.
    #[test]
    fn a_rank_takes_its_local_rank_modulo_the_visible_gpus() {
        assert_eq!((0..8).map(|r| gpu_of(r, 8)).collect::<Vec<_>>(), vec![0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!((0..8).map(|r| gpu_of(r, 1)).collect::<Vec<_>>(), vec![0; 8]);
        assert_eq!((0..4).map(|r| gpu_of(r, 2)).collect::<Vec<_>>(), vec![0, 1, 0, 1]);
        assert_eq!(gpu_of(3, 0), 3);
    }
}
