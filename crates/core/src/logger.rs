//! What a run shows and records as it goes: TensorBoard scalars (read by TensorBoard itself)
//! and progress — an indicatif bar with ETA on a terminal, plain log lines otherwise. Shared by
//! pretraining, the checkpoint hooks and the fine-tuning tasks. A TensorBoard file that cannot
//! be written (a full disk) costs one warning and the rest of the curves, never the run.
use crate::error::{Error, IoContext, Result};
use indicatif::{ProgressBar, ProgressStyle};
use protobuf::Message;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use tensorboard_proto::event::Event;
use tensorboard_proto::layout::Layout;
use tensorboard_proto::summary::{Summary, SummaryMetadata, SummaryMetadata_PluginData, Summary_Value};
use tensorboard_proto::tensor::TensorProto;
use tensorboard_proto::tensor_shape::TensorShapeProto;
use tensorboard_proto::types::DataType;
use tensorboard_rs::record_writer::RecordWriter;

/// The names of TensorBoard's event files: `events.out.tfevents.<time>.<host>.<pid>.<n>`.
const EVENT_FILES: &str = "events.out.tfevents.";

crate::declare_run_files!(TENSORBOARD_FILES: crate::outputs::RunFile::Pattern(EVENT_FILES, ""));

/// One TensorBoard event file (`events.out.tfevents.<time>.<host>.<pid>.<n>`): TFRecord
/// records (tensorboard-rs's writer) of `Event` messages, written on the caller's thread so
/// that every write error comes back as a value.
struct EventFile {
    path: PathBuf,
    records: RecordWriter<BufWriter<std::fs::File>>,
}

impl EventFile {
    /// Creates a new event file in `dir`, starting with the file-version event TensorBoard expects.
    fn create(dir: &Path) -> Result<Self> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_else(|_| "localhost".into());
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("{EVENT_FILES}{:010}.{}.{}.{n}", now.as_secs(), host.trim(), std::process::id());
        let path = dir.join(name);
        let file = std::fs::File::create(&path).with_path(&path)?;
        let mut events = EventFile { records: RecordWriter::new(BufWriter::new(file)), path };
        let mut version = Event::new();
        version.set_file_version("brain.Event:2".into());
        events.write(version)?;
        events.flush()?;
        Ok(events)
    }

    /// Appends `event`, stamped with the wall time.
    fn write(&mut self, mut event: Event) -> Result<()> {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        event.set_wall_time(now.as_secs_f64());
        let bytes = event.write_to_bytes().map_err(|e| Error::invalid(&self.path, e.to_string()))?;
        self.records.write(&bytes).with_path(&self.path)
    }

    /// A scalar `value` under `tag` at `step`, with a description for TensorBoard's tooltip when
    /// one is given (TensorBoard keeps the first it reads for a tag).
    fn scalar(&mut self, tag: &str, value: f32, step: u64, description: Option<&str>) -> Result<()> {
        let summary = match description {
            None => tensorboard_rs::summary::scalar(tag, value),
            // As TF2's `tf.summary.scalar` writes it: a float tensor under the scalars plugin's
            // metadata, which both of TensorBoard's loaders (Python and its Rust data server)
            // keep with its description (the Rust one drops descriptions of `simple_value`s).
            Some(description) => {
                let mut tensor = TensorProto::new();
                tensor.set_dtype(DataType::DT_FLOAT);
                tensor.set_tensor_shape(TensorShapeProto::new());
                tensor.set_float_val(vec![value]);
                let mut value = Summary_Value::new();
                value.set_tag(tag.to_string());
                value.set_tensor(tensor);
                value.set_metadata(plugin_metadata("scalars", description));
                let mut summary = Summary::new();
                summary.set_value(vec![value].into());
                summary
            }
        };
        let mut event = Event::new();
        event.set_step(step as i64);
        event.set_summary(summary);
        self.write(event)
    }

    /// The custom-scalars plugin's layout: a string tensor holding the serialized `Layout`
    /// under the tag the plugin looks for.
    fn custom_scalars_layout(&mut self, layout: &Layout) -> Result<()> {
        let bytes = layout.write_to_bytes().map_err(|e| Error::invalid(&self.path, e.to_string()))?;
        let mut tensor = TensorProto::new();
        tensor.set_dtype(DataType::DT_STRING);
        tensor.set_tensor_shape(TensorShapeProto::new());
        tensor.set_string_val(vec![bytes].into());
        let mut value = Summary_Value::new();
        value.set_tag("custom_scalars__config__".into());
        value.set_tensor(tensor);
        value.set_metadata(plugin_metadata("custom_scalars", ""));
        let mut summary = Summary::new();
        summary.set_value(vec![value].into());
        let mut event = Event::new();
        event.set_step(0);
        event.set_summary(summary);
        self.write(event)
    }

    /// Writes what is buffered to the file.
    fn flush(&mut self) -> Result<()> {
        self.records.flush().with_path(&self.path)
    }
}

/// Summary metadata naming the TensorBoard plugin that reads a value, with a description.
fn plugin_metadata(plugin_name: &str, description: &str) -> SummaryMetadata {
    let mut plugin = SummaryMetadata_PluginData::new();
    plugin.set_plugin_name(plugin_name.into());
    let mut metadata = SummaryMetadata::new();
    metadata.set_plugin_data(plugin);
    metadata.set_summary_description(description.into());
    metadata
}

/// TensorBoard scalars and progress lines of one run.
pub struct Logger {
    /// `None` once a write has failed (after one warning).
    tb: Option<EventFile>,
    bar: Option<ProgressBar>,
    /// What the bar counts ("step", "epoch"), for plain log lines.
    unit: &'static str,
    /// Shows and records nothing (the ranks other than 0 of a data-parallel run).
    quiet: bool,
    /// Tags whose description has been written.
    described: std::collections::HashSet<String>,
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
        Ok(Logger { tb: Some(EventFile::create(tb_dir)?), bar, unit, quiet: false, described: Default::default() })
    }

    /// A logger that shows and records nothing: every data-parallel rank but 0 has one.
    pub(crate) fn quiet() -> Self {
        Logger { tb: None, bar: None, unit: "step", quiet: true, described: Default::default() }
    }

    /// Records `value` under `tag` at `step` for TensorBoard.
    pub fn scalar(&mut self, tag: &str, value: f64, step: u64) {
        let written = self.tb.as_mut().map(|tb| tb.scalar(tag, value as f32, step, None));
        self.stop_tensorboard_on_error(written);
    }

    /// Records `value` under `tag` at `step` with `description`, which TensorBoard shows beside
    /// the chart; it is written with the tag's first record of this logger only.
    pub fn scalar_described(&mut self, tag: &str, value: f64, step: u64, description: &str) {
        let first = self.described.insert(tag.to_string());
        let description = if first { description } else { "" };
        let written = self.tb.as_mut().map(|tb| tb.scalar(tag, value as f32, step, Some(description)));
        self.stop_tensorboard_on_error(written);
    }

    /// Writes a layout for TensorBoard's custom-scalars dashboard (charts that group tags
    /// across runs, and margin charts with interval bands).
    pub fn custom_scalars_layout(&mut self, layout: &Layout) {
        let written = self.tb.as_mut().map(|tb| tb.custom_scalars_layout(layout));
        self.stop_tensorboard_on_error(written);
    }

    /// After a failed TensorBoard write: one warning on stderr, and no more TensorBoard writes.
    fn stop_tensorboard_on_error(&mut self, written: Option<Result<()>>) {
        if let Some(Err(e)) = written {
            let warning = format!("warning: TensorBoard events are no longer written ({e}); the run goes on, and its metrics still go to the log");
            match &self.bar {
                Some(bar) => bar.suspend(|| {
                    let _ = writeln!(std::io::stderr(), "{warning}");
                }),
                None => {
                    let _ = writeln!(std::io::stderr(), "{warning}");
                }
            }
            self.tb = None;
        }
    }

    /// A progress update: the bar's message on a terminal, a log line otherwise.
    pub fn progress(&self, step: u64, line: &str) {
        if self.quiet {
            return;
        }
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
        if self.quiet {
            return;
        }
        match &self.bar {
            Some(bar) => bar.println(line),
            None => outln!("{line}"),
        }
    }

    /// Writes buffered TensorBoard events to disk (at checkpoints).
    pub fn flush(&mut self) {
        let flushed = self.tb.as_mut().map(EventFile::flush);
        self.stop_tensorboard_on_error(flushed);
    }

    /// Flushes the events and closes the progress bar.
    pub fn finish(&mut self) {
        self.flush();
        if let Some(bar) = &self.bar {
            bar.finish();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full disk under the event file (`/dev/full` answers every write with ENOSPC): one
    /// warning, TensorBoard off, and the caller carries on.
    #[test]
    fn a_failing_event_file_turns_tensorboard_off_instead_of_panicking() {
        let dir = std::env::temp_dir().join(format!("indolm-logger-{}", std::process::id()));
        let mut logger = Logger::with_unit(&dir, 0, 0, "step").unwrap();
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        // A buffer of one byte, so the first record reaches the device.
        logger.tb.as_mut().unwrap().records = RecordWriter::new(BufWriter::with_capacity(1, full));
        logger.tb.as_mut().unwrap().path = PathBuf::from("/dev/full");
        logger.scalar("train/loss", 1.0, 1);
        assert!(logger.tb.is_none(), "a failed write left TensorBoard on");
        logger.scalar("train/loss", 0.5, 2);
        logger.flush();
        logger.finish();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
