//! Training output: TensorBoard scalars (read by TensorBoard itself) and progress — an
//! indicatif bar with ETA on a terminal, plain log lines otherwise.
use crate::error::{Error, Result};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::Path;
use tensorboard_rs::summary_writer::SummaryWriter;

pub struct Logger {
    tb: SummaryWriter,
    bar: Option<ProgressBar>,
}

impl Logger {
    pub fn new(tb_dir: &Path, total_steps: u64, start_step: u64) -> Result<Self> {
        std::fs::create_dir_all(tb_dir).map_err(|e| Error::io(tb_dir, e))?;
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(total_steps).with_style(
                ProgressStyle::default_bar()
                    .template("{bar:30} {pos}/{len} steps [{elapsed_precise} < {eta_precise}] {msg}")
                    .expect("valid template"),
            );
            bar.set_position(start_step);
            bar
        });
        Ok(Logger { tb: SummaryWriter::new(tb_dir), bar })
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
            None => println!("step {step}: {line}"),
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
