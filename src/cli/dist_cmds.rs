//! `indolm dist-check`: joins the c10d process group of a torchrun or srun launch (Gloo on CPU,
//! NCCL on CUDA, or Gloo over CUDA tensors with `--backend gloo`) and checks its collectives
//! (sum, max, broadcast, barrier), a wait through the rendezvous store (how ranks wait for rank
//! 0's work), the gradient all-reduce the engine overlaps with backward (its sums in fp32 and
//! bf16) and the all-reduce bandwidth, so a cluster's network is known to work before a
//! week-long job starts on it. A world of one rank runs every check but the bandwidth (the GPU
//! check's one-rank NCCL run: the group's construction, the hooks and the stream order on a
//! machine with one GPU).
use super::DistBackend;
use indolm_core::outln;
use indolm_torch::distributed::{Launch, ReduceOp};
use indolm_torch::error::{Error, Result};
use indolm_train::data_parallel::DataParallel;
use std::time::{Duration, Instant};
use tch::{Device, Kind, Tensor};

/// Every rank: join, check each collective's value and a store wait, time `megabytes`
/// all-reduces. On CUDA each rank uses the GPU of its local rank and NCCL, or with `backend`
/// Gloo the GPU of its local rank modulo the GPUs present.
pub fn check(megabytes: usize, timeout: Duration, device: Device, backend: DistBackend) -> Result<()> {
    let launch = Launch::from_env()?.ok_or_else(|| {
        Error::argument(
            "dist-check",
            "not launched by torchrun or srun (neither WORLD_SIZE nor SLURM_NTASKS is set, or SLURM_NTASKS is 1: a one-task Slurm step runs as a plain process): run it as `torchrun --nproc-per-node N --no-python indolm dist-check`",
        )
    })?;
    let started = Instant::now();
    let (device, mut group) = indolm_torch::distributed::join(&launch, device, backend.into(), timeout)?;
    let backend = if device.is_cuda() && backend != DistBackend::Gloo { "NCCL" } else { "Gloo" };
    let joined = started.elapsed();
    let (rank, world) = (launch.rank, launch.world_size);
    // Every tensor is made on the group's device (a fill kernel there), as collectives need.
    let on = group.device();
    let value_of = |v: f64| Tensor::full([1], v, (Kind::Double, on));

    let mut value = value_of((rank + 1) as f64);
    group.all_reduce(&mut value, ReduceOp::Sum, "dist-check's all-reduce sum")?;
    expect("all-reduce sum", value.double_value(&[0]), (world * (world + 1) / 2) as f64)?;
    let mut value = value_of(rank as f64);
    group.all_reduce(&mut value, ReduceOp::Max, "dist-check's all-reduce max")?;
    expect("all-reduce max", value.double_value(&[0]), (world - 1) as f64)?;
    let mut value = value_of(if rank == 0 { 7.0 } else { -1.0 });
    group.broadcast(&mut value, 0, "dist-check's broadcast")?;
    expect("broadcast from rank 0", value.double_value(&[0]), 7.0)?;
    group.barrier()?;
    group.wait_for_all("every rank's arrival at dist-check's store wait")?;
    // The engine's gradient all-reduce during backward, in buckets of 2 KiB (several for the
    // check's small model).
    let mut parallel = DataParallel::new(group)?;
    let overlap = parallel.check_overlap(2 << 10)?;
    let mut group = parallel.into_group();

    let elements = (megabytes.max(1) << 20) / 4;
    let mut buffer = Tensor::ones([elements as i64], (Kind::Float, on));
    group.all_reduce(&mut buffer, ReduceOp::Sum, "dist-check's timed all-reduce")?; // warm-up: connections and buffers
    let mut seconds = Vec::new();
    for _ in 0..5 {
        let _ = buffer.fill_(1.0);
        indolm_torch::device::synchronize(device);
        let t = Instant::now();
        group.all_reduce(&mut buffer, ReduceOp::Sum, "dist-check's timed all-reduce")?;
        indolm_torch::device::synchronize(device);
        seconds.push(t.elapsed().as_secs_f64());
    }
    let (low, high) = (buffer.min().double_value(&[]), buffer.max().double_value(&[]));
    expect("timed all-reduce (every element)", low.min(high), world as f64)?;
    expect("timed all-reduce (every element)", low.max(high), world as f64)?;
    seconds.sort_by(f64::total_cmp);
    let median = seconds[seconds.len() / 2];
    let bytes = (elements * 4) as f64;
    let algorithm_bandwidth = bytes / median / 1e9;
    // NCCL's convention: a ring all-reduce moves 2 (n - 1) / n of the buffer over each link.
    let bus_bandwidth = algorithm_bandwidth * 2.0 * (world as f64 - 1.0) / world as f64;

    outln!(
        "rank {rank} of {world} (local rank {}, {}): {backend} on {}, joined in {:.2}s; sum, max, broadcast, barrier and store wait correct",
        launch.local_rank,
        launch.launcher,
        indolm_torch::device::describe(device),
        joined.as_secs_f64()
    );
    outln!(
        "rank {rank}: gradients all-reduced during backward (fp32 and bf16) equal the expected sums; {} of {} buckets launched during backward",
        overlap.during_backward,
        overlap.buckets
    );
    if rank == 0 && world == 1 {
        // A group of one moves nothing between ranks: the collectives' values, the hooks and the
        // stream order are checked, but no bandwidth is measured.
        outln!(
            "all-reduce of {megabytes} MB over 1 {backend} rank: median {:.2} ms of 5 (one rank: no link crossed, no bandwidth measured)",
            median * 1e3
        );
    } else if rank == 0 {
        outln!(
            "all-reduce of {megabytes} MB over {world} {backend} ranks: median {:.2} ms of 5, algorithm bandwidth {algorithm_bandwidth:.3} GB/s, bus bandwidth {bus_bandwidth:.3} GB/s",
            median * 1e3
        );
    }
    group.barrier()
}

/// An error unless a collective gave the value every rank can compute.
fn expect(what: &str, found: f64, expected: f64) -> Result<()> {
    if found == expected {
        return Ok(());
    }
    Err(Error::system("dist-check", format!("{what}: expected {expected}, found {found}")))
}
