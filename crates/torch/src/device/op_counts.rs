//! Counting the ATen operations a piece of work runs, with libtorch's `RecordFunction` global
//! callback (the hook `torch.profiler` uses; `torch_shim.cpp`), and finding among them those that
//! make the host wait for the device. On a CPU every tensor is on the CPU and nothing waits, so
//! the waits are recognised by what the operations are, which is the same on every device:
//! - reads of device values (`_local_scalar_dense`, which `item` and tch's `double_value` run),
//!   and operations whose output size depends on device data (`nonzero`, `masked_select`,
//!   `unique`, `is_nonzero`, `equal`, ...);
//! - `to` / `_to_copy` naming a device without `non_blocking` (a copy from pageable host memory to
//!   a GPU, or a read back, waits; on the CPU the same call is a no-op, so it is recognised by its
//!   arguments), and `copy_` between two devices without `non_blocking`.
//!
//! `--op-counts` (of `indolm train` and of every `indolm finetune` command: the training engine
//! counts the update of whatever task it runs) prints the counts of one steady-state update with
//! `host syncs per update: N`, and the tests hold N at 0 for pretraining, sentiment, BertExt and
//! BertAbs. A test can count any other piece of work the same way (BertAbs's beam search: one
//! wait a decoding step). Only one count runs at a time.
use crate::error::{Error, Result};
use std::ffi::{c_char, c_int, CStr};

extern "C" {
    fn indolm_ops_start(error: *mut *mut c_char) -> c_int;
    fn indolm_ops_stop(out: *mut *mut c_char, error: *mut *mut c_char) -> c_int;
    fn indolm_ops_exclude_this_thread();
    fn indolm_torch_free_message(message: *mut c_char);
}

/// What the host does while an operation runs on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Nothing: the operation is queued and the host goes on.
    None,
    /// The host waits for the device (a read, a data-dependent size, a blocking copy).
    Sync,
    /// `_fused_adamw_`'s CPU kernel reading its step count from CPU memory; the CUDA kernel
    /// reads it on the device, so on a GPU this is no wait.
    CpuKernelRead,
}

/// How often one operation ran.
#[derive(Debug, Clone)]
pub struct OpCount {
    /// ATen's name (`aten::addmm`).
    pub name: String,
    /// Times it ran, at any depth (an operation another calls counts too, as in torch.profiler).
    pub count: u64,
    /// Whether it makes the host wait.
    pub wait: Wait,
    /// The host's time in it, not in the operations it called (on a CPU: the computation; on a
    /// GPU: the launch, as the kernels run asynchronously).
    pub self_seconds: f64,
}

/// The operations counted between [`OpCounter::start`] and [`OpCounter::stop`].
#[derive(Debug, Clone, Default)]
pub struct OpCounts {
    /// Every operation by name, most frequent first; a name that ran both waiting and not (a
    /// `to` naming a device and one that does not) has a row for each.
    pub ops: Vec<OpCount>,
    /// Operations called from outside any other (those the program itself issued).
    pub top_level: u64,
}

impl OpCounts {
    /// Every operation run, at any depth.
    pub(crate) fn total(&self) -> u64 {
        self.ops.iter().map(|o| o.count).sum()
    }

    /// Operations that make the host wait for the device.
    pub fn host_syncs(&self) -> u64 {
        self.ops.iter().filter(|o| o.wait == Wait::Sync).map(|o| o.count).sum()
    }

    /// The count of one operation, waiting or not (0 when it did not run).
    pub fn count(&self, name: &str) -> u64 {
        self.ops.iter().filter(|o| o.name == name).map(|o| o.count).sum()
    }

    /// The table `--op-counts` prints: the operations by name with their count and host time, the
    /// totals and the line `host syncs per update: N`, each waiting operation marked.
    pub fn table(&self, title: &str) -> String {
        let mut out = format!("{title}\n");
        let width = self.ops.iter().map(|o| o.name.len()).max().unwrap_or(0).max(9);
        out.push_str(&format!("  {:<width$}  {:>6}  {:>9}\n", "operation", "count", "host ms"));
        for o in &self.ops {
            let mark = match o.wait {
                Wait::None => "",
                Wait::Sync => "  <- the host waits for the device",
                Wait::CpuKernelRead => "  (CPU kernel's read of host memory; no wait on a GPU)",
            };
            out.push_str(&format!("  {:<width$}  {:>6}  {:>9.3}{mark}\n", o.name, o.count, o.self_seconds * 1e3));
        }
        out.push_str(&format!(
            "operations: {} ({} issued by indolm, the rest called by them), {:.1} ms of host time in them\n",
            self.total(),
            self.top_level,
            self.seconds() * 1e3
        ));
        out.push_str(&format!("host syncs per update: {}\n", self.host_syncs()));
        out
    }

    /// The host's time in all the operations.
    pub(crate) fn seconds(&self) -> f64 {
        self.ops.iter().map(|o| o.self_seconds).sum()
    }

    fn parse(text: &str) -> Result<Self> {
        let bad = |line: &str| Error::system("counting operations", format!("unreadable line from the shim: {line:?}"));
        let mut counts = OpCounts::default();
        for line in text.lines() {
            let fields: Vec<&str> = line.split('\t').collect();
            match fields.as_slice() {
                ["top-level", n] => counts.top_level = n.parse().map_err(|_| bad(line))?,
                [name, n, kind, ns] => counts.ops.push(OpCount {
                    name: name.to_string(),
                    count: n.parse().map_err(|_| bad(line))?,
                    self_seconds: ns.parse::<f64>().map_err(|_| bad(line))? * 1e-9,
                    wait: match *kind {
                        "0" => Wait::None,
                        "1" => Wait::Sync,
                        "2" => Wait::CpuKernelRead,
                        _ => return Err(bad(line)),
                    },
                }),
                _ => return Err(bad(line)),
            }
        }
        counts.ops.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.name.cmp(&b.name)));
        Ok(counts)
    }
}

/// A count in progress; dropping it without [`OpCounter::stop`] stops it too.
pub struct OpCounter {
    running: bool,
}

impl OpCounter {
    /// Starts counting every ATen operation on every thread but those excluded.
    pub fn start() -> Result<Self> {
        let mut error = std::ptr::null_mut();
        // SAFETY: `error` is set only on failure, to a message the shim allocated.
        if unsafe { indolm_ops_start(&mut error) } == 0 {
            return Err(Error::system("counting operations", take_message(error)));
        }
        Ok(OpCounter { running: true })
    }

    /// Stops counting and returns the counts.
    pub fn stop(mut self) -> Result<OpCounts> {
        self.running = false;
        let (mut out, mut error) = (std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: on success `out` is a NUL-terminated message the shim allocated, freed here.
        if unsafe { indolm_ops_stop(&mut out, &mut error) } == 0 {
            return Err(Error::system("counting operations", take_message(error)));
        }
        OpCounts::parse(&take_message(out))
    }
}

impl Drop for OpCounter {
    fn drop(&mut self) {
        if self.running {
            let (mut out, mut error) = (std::ptr::null_mut(), std::ptr::null_mut());
            // SAFETY: as in `stop`; the messages are freed.
            if unsafe { indolm_ops_stop(&mut out, &mut error) } == 0 {
                take_message(error);
            } else {
                take_message(out);
            }
        }
    }
}

/// Operations of the calling thread are never counted (the batch thread: host work done beside
/// the update, not part of it).
pub fn exclude_this_thread() {
    // SAFETY: sets a thread-local flag of libtorch's.
    unsafe { indolm_ops_exclude_this_thread() }
}

/// A shim message as a string, freed.
pub(crate) fn take_message(message: *mut c_char) -> String {
    if message.is_null() {
        return "libtorch failed without a message".into();
    }
    // SAFETY: the shim returns a NUL-terminated malloc'ed string, freed here once.
    let text = unsafe { CStr::from_ptr(message) }.to_string_lossy().to_string();
    unsafe { indolm_torch_free_message(message) };
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind, Tensor};

    #[test]
    fn counts_operations_and_finds_the_waits() {
        let x = Tensor::ones([4, 4], (Kind::Float, Device::Cpu));
        let counter = OpCounter::start().unwrap();
        let y = x.matmul(&x) + 1.0;
        let _ = y.sum(Kind::Float).double_value(&[]); // a read
        let _ = y.gt(1.0).nonzero(); // a data-dependent size
        let _ = Tensor::from_slice(&[1.0f32]).to_device(Device::Cpu); // a pageable copy on a GPU
        let _ = Tensor::from_slice(&[1.0f32]).to_device_(Device::Cpu, Kind::Float, true, false); // non-blocking
        let _ = y.to_kind(Kind::Double); // a cast on the tensor's own device
        let _ = Vec::<f64>::try_from(y.to_kind(Kind::Double).to_device(Device::Cpu)); // a read
        let counts = counter.stop().unwrap();
        let waits: Vec<&str> = counts.ops.iter().filter(|o| o.wait == Wait::Sync).map(|o| o.name.as_str()).collect();
        assert!(counts.count("aten::mm") == 1 || counts.count("aten::matmul") == 1, "{counts:?}");
        assert_eq!(counts.host_syncs(), 4, "waits: {waits:?}\n{}", counts.table("counts"));
        assert!(waits.contains(&"aten::item") && waits.contains(&"aten::nonzero"), "{waits:?}");
        assert!(waits.contains(&"aten::to"), "{waits:?}");
        assert!(counts.total() > counts.host_syncs() && counts.top_level > 0);
        // Nothing is counted once stopped, and a new count starts from zero.
        let _ = x.matmul(&x);
        let again = OpCounter::start().unwrap();
        let _ = &x + 1.0;
        let counts = again.stop().unwrap();
        assert_eq!(counts.count("aten::mm") + counts.count("aten::matmul"), 0, "{counts:?}");
        assert_eq!(counts.host_syncs(), 0);
    }
}
