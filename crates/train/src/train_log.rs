//! `train_log.jsonl`: the pretraining loss curve as plain JSON lines, exactly reproducible
//! across resumes.
use indolm_torch::error::{IoContext, Result};
use std::path::Path;

/// `train_log.jsonl` in the run directory: one line per logged step (step, loss, lr, grad
/// norm), exactly reproducible; a resumed run first drops the lines after its checkpoint.
pub(crate) struct TrainLog {
    file: std::fs::File,
    path: std::path::PathBuf,
}

impl TrainLog {
    /// Opens `<run_dir>/train_log.jsonl` for appending, first dropping the lines after `resume_step`.
    pub fn open(run_dir: &Path, resume_step: u64) -> Result<Self> {
        use std::io::Write;
        let path = run_dir.join("train_log.jsonl");
        let kept: String = match std::fs::read_to_string(&path) {
            Ok(text) => text
                .lines()
                .filter(|l| {
                    serde_json::from_str::<serde_json::Value>(l)
                        .ok()
                        .and_then(|v| v["step"].as_u64())
                        .is_some_and(|s| s <= resume_step)
                })
                .map(|l| format!("{l}\n"))
                .collect(),
            Err(_) => String::new(),
        };
        indolm_core::files::write_atomic(&path, kept.as_bytes())?;
        let mut file = std::fs::OpenOptions::new().append(true).open(&path).with_path(&path)?;
        file.flush().with_path(&path)?;
        Ok(TrainLog { file, path })
    }

    /// Appends one logged step.
    pub(crate) fn append(&mut self, step: u64, loss: f64, lr: f64, grad_norm: f64) -> Result<()> {
        use std::io::Write;
        let line = serde_json::json!({"step": step, "loss": loss, "lr": lr, "grad_norm": grad_norm}).to_string();
        writeln!(self.file, "{line}").with_path(&self.path)
    }
}
