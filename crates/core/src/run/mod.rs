//! The run layer, below the engine (`train`) and the tasks: it alone owns a run's folder and
//! its layout ([`layout`]), the lock that keeps a second writer out, the logger and TensorBoard,
//! the stop-signal flag ([`signals`]), and the atomic save and checksum-verified restore of a
//! set of named states, with the best weights kept apart from the last checkpoints
//! ([`checkpoints`]), never deleting weights that another process reads ([`readers`]).
pub mod checkpoints;
pub mod layout;
pub mod ownership;
pub mod readers;
pub(crate) mod signals;
pub mod units;

pub use checkpoints::{BestState, CheckpointContents, CheckpointStore, Part, ResumePoint, Retention, TrainerState};
pub use layout::RunLayout;
pub(crate) use signals::StopFlag;

use crate::error::Result;
use crate::files::DirLock;
use crate::logger::Logger;
use checkpoints::Start;
use std::path::{Path, PathBuf};

/// How a run is opened.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// `latest`, `auto` (`latest` when the run has a checkpoint, else a new run) or a checkpoint
    /// folder.
    pub resume: Option<String>,
    /// Start over, deleting the run's earlier checkpoints and logs.
    pub overwrite: bool,
    /// This process writes (the only process, or rank 0 of a data-parallel run).
    pub leader: bool,
    /// When checkpoints are written and what each keeps.
    pub retention: Retention,
    /// The run's TensorBoard folder.
    pub tensorboard: PathBuf,
    /// The steps the run takes in all (for the progress bar).
    pub total_steps: u64,
    /// What the run reads besides its recipe (the model it starts from): `--overwrite` never
    /// removes a run or TensorBoard folder that is one of them or holds one.
    pub inputs: Vec<PathBuf>,
}

/// An open run: its folder (locked by the leader), checkpoints, logger and stop flag.
pub struct Run {
    /// The checkpoints (and through them the layout).
    pub checkpoints: CheckpointStore,
    /// TensorBoard and the progress line; quiet on the ranks other than 0.
    pub logger: Logger,
    /// Raised by the stop signals.
    pub stop: StopFlag,
    /// Whether this process writes.
    pub leader: bool,
    _lock: Option<DirLock>,
    /// The folders this open created (the run's, its TensorBoard's), for [`Run::abandon`].
    created: Vec<PathBuf>,
}

impl Run {
    /// Opens the run at `layout`: takes its lock (the leader), finds the checkpoint to resume
    /// from, makes the folder ready (refusing to overwrite an earlier run unless asked), opens
    /// the logger at the resumed step, and starts listening for stop signals.
    pub fn open(layout: RunLayout, options: &RunOptions) -> Result<(Run, Option<ResumePoint>)> {
        let store = CheckpointStore::new(layout, options.retention);
        let store = if options.leader { store } else { store.quiet() };
        let lock = if options.leader { Some(DirLock::acquire(store.run_dir())?) } else { None };
        if options.leader {
            // What writers killed earlier left (evaluations, outputs): their processes are gone.
            crate::files::sweep_dead_temps_under(store.run_dir());
        }
        let resume = store.find_resume_point(options.resume.as_deref())?;
        let created: Vec<PathBuf> = [store.run_dir(), options.tensorboard.as_path()]
            .into_iter()
            .filter(|d| options.leader && !d.exists())
            .map(Path::to_path_buf)
            .collect();
        if options.leader {
            let start = Start {
                resuming: resume.is_some(),
                auto: options.resume.as_deref() == Some("auto"),
                overwrite: options.overwrite,
            };
            store.prepare(start, &options.tensorboard, &options.inputs)?;
        }
        let start = resume.as_ref().map_or(0, |p| p.state.step);
        let logger = if options.leader {
            Logger::new(&options.tensorboard, options.total_steps, start)?
        } else {
            Logger::quiet()
        };
        let run = Run {
            checkpoints: store,
            logger,
            stop: StopFlag::on_signals()?,
            leader: options.leader,
            _lock: lock,
            created,
        };
        Ok((run, resume))
    }

    /// For a run refused before it trained (its task could not be set up): removes the folders
    /// this open created, when they hold only what indolm wrote, and the lock file, so a refused
    /// command leaves nothing behind.
    pub fn abandon(self) {
        let Run { logger, _lock: lock, created, .. } = self;
        drop(logger); // its event file closed before its folder goes
        for dir in &created {
            if ownership::foreign_files(dir).is_ok_and(|f| f.is_empty()) {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
        if let Some(lock) = lock {
            lock.release_and_remove();
        }
    }

    /// The run folder.
    pub fn dir(&self) -> &Path {
        self.checkpoints.run_dir()
    }

    /// The run's layout.
    pub fn layout(&self) -> &RunLayout {
        self.checkpoints.layout()
    }
}
