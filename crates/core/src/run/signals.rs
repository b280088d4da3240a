//! The stop flag of a run: SIGINT, SIGTERM, SIGUSR1 (what Slurm's `--signal` sends ahead of a
//! time limit) and SIGHUP (a login session that started the run ending) raise it; the engine
//! finishes its step, checkpoints and exits 0.
use crate::error::{Error, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A flag the stop signals raise.
#[derive(Clone)]
pub struct StopFlag(Arc<AtomicBool>);

impl StopFlag {
    /// A flag raised by SIGINT, SIGTERM, SIGUSR1 and SIGHUP from now on.
    pub(crate) fn on_signals() -> Result<Self> {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};
        let flag = Arc::new(AtomicBool::new(false));
        for signal in [SIGINT, SIGTERM, SIGUSR1, SIGHUP] {
            signal_hook::flag::register(signal, Arc::clone(&flag))
                .map_err(|e| Error::system("signals", e.to_string()))?;
        }
        Ok(StopFlag(flag))
    }

    /// Whether a stop signal came.
    pub fn raised(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}
