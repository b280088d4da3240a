//! What a run shows and records as it goes: TensorBoard scalars (read by TensorBoard itself)
//! and progress — an indicatif bar with ETA on a terminal, plain log lines otherwise. Shared by
//! pretraining, the checkpoint hooks and the fine-tuning tasks.
use crate::error::{IoContext, Result};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::Path;
use tensorboard_rs::summary_writer::SummaryWriter;

/// TensorBoard scalars and progress lines of one run.
pub struct Logger {
    tb: SummaryWriter,
    bar: Option<ProgressBar>,
    /// What the bar counts ("step", "epoch"), for plain log lines.
    unit: &'static str,
}

impl Logger {
    /// A logger whose progress counts steps, writing TensorBoard events to `tb_dir`; the bar (on a
    /// terminal) runs to `total_steps` from `start_step`.
    pub fn new(tb_dir: &Path, total_steps: u64, start_step: u64) -> Result<Self> {
        Self::with_unit(tb_dir, total_steps, start_step, "step")
    }

    /// A logger whose progress counts `unit`s (a bar only when there is a total).
    pub fn with_unit(tb_dir: &Path, total_steps: u64, start_step: u64, unit: &'static str) -> Result<Self> {
        std::fs::create_dir_all(tb_dir).with_path(tb_dir)?;
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

    /// Records `value` under `tag` at `step` for TensorBoard.
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
            None => outln!("{} {step}: {line}", self.unit),
        }
    }

    /// A line that must stay visible (checkpoints, evaluations, warnings).
    pub fn println(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(line),
            None => outln!("{line}"),
        }
    }

    /// Writes buffered TensorBoard events to disk (at checkpoints).
    pub fn flush(&mut self) {
        self.tb.flush();
    }

    /// Flushes the events and closes the progress bar.
    pub fn finish(&mut self) {
        self.tb.flush();
        if let Some(bar) = &self.bar {
            bar.finish();
        }
    }
}
