//! Training output: TensorBoard scalars (read by TensorBoard itself) and progress — an
//! indicatif bar with ETA on a terminal, plain log lines otherwise.
use crate::error::{Error, Result};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::Path;
use tensorboard_rs::summary_writer::SummaryWriter;

/// `train_log.jsonl` in the run directory: one line per logged step (step, loss, lr, grad
/// norm), exactly reproducible; a resumed run first drops the lines after its checkpoint.
pub struct TrainLog {
    file: std::fs::File,
    path: std::path::PathBuf,
}

impl TrainLog {
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
        crate::error::write_atomic(&path, kept.as_bytes())?;
        let mut file = std::fs::OpenOptions::new().append(true).open(&path).map_err(|e| Error::io(&path, e))?;
        file.flush().map_err(|e| Error::io(&path, e))?;
        Ok(TrainLog { file, path })
    }

    pub fn append(&mut self, step: u64, loss: f64, lr: f64, grad_norm: f64) -> Result<()> {
        use std::io::Write;
        let line = serde_json::json!({"step": step, "loss": loss, "lr": lr, "grad_norm": grad_norm}).to_string();
        writeln!(self.file, "{line}").map_err(|e| Error::io(&self.path, e))
    }
}

pub struct Logger {
    tb: SummaryWriter,
    bar: Option<ProgressBar>,
    /// What the bar counts ("step", "epoch"), for plain log lines.
    unit: &'static str,
}

impl Logger {
    pub fn new(tb_dir: &Path, total_steps: u64, start_step: u64) -> Result<Self> {
        Self::with_unit(tb_dir, total_steps, start_step, "step")
    }

    /// A logger whose progress counts `unit`s (a bar only when there is a total).
    pub fn with_unit(tb_dir: &Path, total_steps: u64, start_step: u64, unit: &'static str) -> Result<Self> {
        std::fs::create_dir_all(tb_dir).map_err(|e| Error::io(tb_dir, e))?;
        let bar = (std::io::stderr().is_terminal() && total_steps > 0).then(|| {
            let bar = ProgressBar::new(total_steps).with_style(
                ProgressStyle::default_bar()
                    .template(&format!(
                        "{{bar:30}} {{pos}}/{{len}} {unit}s [{{elapsed_precise}} < {{eta_precise}}] {{msg}}"
                    ))
                    .expect("valid template"),
            );
            bar.set_position(start_step);
            bar
        });
        Ok(Logger { tb: SummaryWriter::new(tb_dir), bar, unit })
    }

    pub fn scalar(&mut self, tag: &str, value: f64, step: u64) {
        self.tb.add_scalar(tag, value as f32, step as usize);
    }

    /// A progress update: the bar's message on a terminal, a log line otherwise.
    pub fn progress(&self, step: u64, line: &str) {
        match &self.bar {
            Some(bar) => {
                bar.set_position(step);
                bar.set_message(line.to_string());
            }
            None => println!("{} {step}: {line}", self.unit),
        }
    }

    /// A line that must stay visible (checkpoints, evaluations, warnings).
    pub fn println(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(line),
            None => println!("{line}"),
        }
    }

    pub fn flush(&mut self) {
        self.tb.flush();
    }

    pub fn finish(&mut self) {
        self.tb.flush();
        if let Some(bar) = &self.bar {
            bar.finish();
        }
    }
}
