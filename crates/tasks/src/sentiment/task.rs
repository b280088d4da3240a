//! Sentiment classification as a task of the training engine: a `BertForSequenceClassification`
//! started from a BERT model, the training texts tokenized once and drawn in a seeded order
//! shuffled anew every epoch (on the loader's thread), cross-entropy over the examples, and
//! validation macro-F1 after every epoch as the score the best weights are kept by.
use super::data::{score, Example, LABELS};
use super::salt;
use crate::classifier::SequenceClassifier;
use crate::epochs::{EpochCursor, EpochOrder};
use indolm_core::logger::Logger;
use indolm_torch::device::{staged, upload};
use indolm_torch::error::Result;
use indolm_torch::model::bert::Packing;
use indolm_torch::model::model_dir::copy_into;
use indolm_torch::model::{weights, Precision};
use indolm_train::task::{
    BatchSource, Drawn, Evaluation, EvaluationPlan, Evaluations, OptimizerSpec, Slice, Task, Throughput,
};
use std::path::Path;
use std::sync::Arc;
use tch::{Device, Kind, Tensor};

/// A training text as token ids (`[CLS] … [SEP]`, cut to `max_len`) with its label.
struct Encoded {
    ids: Vec<i64>,
    label: i64,
}

/// One micro-batch: this rank's texts, padded to the longest, on the host (pinned on CUDA),
/// with the positions of their real tokens (the encoder skips the padding).
pub(crate) struct TextBatch {
    input_ids: Tensor,
    attention_mask: Tensor,
    labels: Tensor,
    /// Flat positions and columns of the real tokens, and each row's length (see [`Packing`]).
    real: (Tensor, Tensor, Vec<i64>),
}

/// The training examples in batches of a seeded order, drawn on the loader's thread.
pub(crate) struct ExampleSource {
    examples: Arc<Vec<Encoded>>,
    batch_size: usize,
    slice: Slice,
    device: Device,
    pad: i64,
    order: EpochOrder,
}

impl BatchSource for ExampleSource {
    type Batch = TextBatch;
    type Cursor = EpochCursor;

    /// The next `batch_size` examples of the epoch's order (fewer at its end), this rank's share
    /// of them padded into tensors.
    fn next(&mut self, cursor: &mut EpochCursor) -> Drawn<TextBatch> {
        let chunk = self.order.next_batch(cursor, self.batch_size);
        let rows = self.slice.rows(chunk.len());
        let units = rows.len();
        // A rank with no example of this batch trains on the first, its loss weighted by 0.
        let mine = if units == 0 { &chunk[..1] } else { &chunk[rows] };
        let width = mine.iter().map(|&i| self.examples[i].ids.len()).max().unwrap_or(0);
        let (mut ids, mut mask) = (vec![self.pad; mine.len() * width], vec![0i64; mine.len() * width]);
        for (r, &i) in mine.iter().enumerate() {
            let e = &self.examples[i].ids;
            ids[r * width..r * width + e.len()].copy_from_slice(e);
            mask[r * width..r * width + e.len()].iter_mut().for_each(|m| *m = 1);
        }
        let labels: Vec<i64> = mine.iter().map(|&i| self.examples[i].label).collect();
        let shape = [mine.len() as i64, width as i64];
        let lengths: Vec<usize> = mine.iter().map(|&i| self.examples[i].ids.len()).collect();
        let (indices, columns) = Packing::host_of_lengths(&lengths, width);
        let n = indices.len() as i64;
        Drawn {
            batch: TextBatch {
                input_ids: staged(&ids, &shape, self.device),
                attention_mask: staged(&mask, &shape, self.device),
                labels: staged(&labels, &[labels.len() as i64], self.device),
                real: (
                    staged(&indices, &[n], self.device),
                    staged(&columns, &[n], self.device),
                    lengths.iter().map(|&l| l as i64).collect(),
                ),
            },
            units,
            global_units: chunk.len(),
            rows: chunk.len(),
        }
    }
}

/// The optimizer settings of one fine-tuning (a grid point's learning rate and batch size).
#[derive(Debug, Clone)]
pub(crate) struct Hyper {
    /// The peak learning rate.
    pub lr: f64,
    /// Examples per micro-batch.
    pub batch_size: usize,
    /// Updates in the whole fine-tuning.
    pub max_steps: u64,
    /// Updates per epoch (an evaluation after each).
    pub updates_per_epoch: u64,
}

/// Fine-tuning a sequence classifier on labelled texts, selected on validation macro-F1.
pub(crate) struct SentimentTask {
    /// The classifier in training.
    pub model: SequenceClassifier,
    precision: Precision,
    device: Device,
    train: Arc<Vec<Encoded>>,
    valid: Vec<Example>,
    max_len: usize,
    seed: u64,
    hyper: Hyper,
    optimizer: indolm_core::recipe::OptimizerSection,
    tag: String,
}

impl SentimentTask {
    /// The task of training `model` on `train` (tokenized here, once), selected on `valid`;
    /// `tag` names it in the log lines.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        model: SequenceClassifier,
        precision: Precision,
        train: &[Example],
        valid: Vec<Example>,
        max_len: usize,
        seed: u64,
        hyper: Hyper,
        optimizer: indolm_core::recipe::OptimizerSection,
        tag: String,
    ) -> Result<Self> {
        let encoded = train
            .iter()
            .map(|e| Ok(Encoded { ids: model.tokenizer.single_row(&e.text, max_len)?.0, label: e.label as i64 }))
            .collect::<Result<Vec<_>>>()?;
        Ok(SentimentTask {
            device: model.vs.device(),
            model,
            precision,
            train: Arc::new(encoded),
            valid,
            max_len,
            seed,
            hyper,
            optimizer,
            tag,
        })
    }
}

impl Evaluations for SentimentTask {
    fn plan(&self) -> EvaluationPlan {
        EvaluationPlan { every: self.hyper.updates_per_epoch, at_last: true, ..EvaluationPlan::default() }
    }

    fn evaluate(&mut self, step: u64, logger: &mut Logger) -> Result<Evaluation> {
        let (scores, _) = score(&self.model, &self.valid, self.max_len)?;
        logger.scalar("eval/valid_macro_f1", scores.macro_f1, step);
        logger.scalar("eval/valid_accuracy", scores.accuracy, step);
        let epoch = step.div_ceil(self.hyper.updates_per_epoch);
        logger.println(&format!(
            "{}: step {step} (epoch {epoch}): valid macro-F1 {:.4}, accuracy {:.4}",
            self.tag, scores.macro_f1, scores.accuracy
        ));
        Ok(Evaluation { score: Some(("valid macro-F1".into(), scores.macro_f1)) })
    }
}

impl Task for SentimentTask {
    type Source = ExampleSource;

    fn describe(&self) -> String {
        let c = &self.model.config;
        format!(
            "BertForSequenceClassification L{} H{} A{} FF{} V{}, {} labels",
            c.num_hidden_layers,
            c.hidden_size,
            c.num_attention_heads,
            c.intermediate_size,
            c.vocab_size,
            LABELS.len()
        )
    }

    fn precision(&self) -> Precision {
        self.precision
    }

    fn optimizers(&self) -> Vec<OptimizerSpec> {
        let o = &self.optimizer;
        vec![OptimizerSpec {
            name: String::new(),
            vars: self.model.vs.variables().into_iter().collect(),
            betas: o.betas,
            eps: o.eps,
            weight_decay: o.weight_decay,
            schedule: o.schedule_of(
                self.hyper.lr,
                o.warmup_steps,
                self.hyper.max_steps,
                Some(self.hyper.updates_per_epoch),
            ),
            grad_clip: o.grad_clip,
        }]
    }

    fn source(&mut self, slice: Slice) -> Result<ExampleSource> {
        Ok(ExampleSource {
            examples: Arc::clone(&self.train),
            batch_size: self.hyper.batch_size,
            slice,
            device: self.device,
            pad: self.model.tokenizer.special.pad,
            order: EpochOrder::new(self.train.len(), self.seed, salt::SENTIMENT_SHUFFLE),
        })
    }

    fn start_cursor(&self) -> EpochCursor {
        EpochCursor::default()
    }

    fn loss(&self, batch: &TextBatch) -> Tensor {
        let d = self.device;
        let (indices, columns, lengths) = &batch.real;
        let packing = Packing { indices: upload(indices, d), columns: upload(columns, d), lengths: lengths.clone() };
        let (ids, mask) = (upload(&batch.input_ids, d), upload(&batch.attention_mask, d));
        let logits = self.model.logits_packed(&ids, &mask, &packing, true);
        logits.log_softmax(-1, Kind::Float).nll_loss(&upload(&batch.labels, d))
    }

    fn save_model(&self, dir: &Path) -> Result<()> {
        self.model.save(dir)
    }

    fn load_weights(&mut self, dir: &Path) -> Result<()> {
        let path = dir.join(indolm_torch::model::model_dir::WEIGHTS_FILE);
        copy_into(&self.model.vs, weights::read_file(&path)?, &path, &[]).map(|_| ())
    }

    fn throughput(&self) -> Throughput {
        Throughput {
            per_update: (self.hyper.batch_size * self.optimizer.grad_accumulation) as f64,
            per_row: 1.0,
            unit: "examples",
            short: "ex",
            flops_per_unit: None,
        }
    }
}
