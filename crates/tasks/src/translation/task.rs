//! One translation direction as a task of the training engine: the training pairs tokenized
//! once into mBART's rows ([`super::format`]) and drawn in a seeded order shuffled anew every
//! epoch (on the loader's thread), transformers' teacher-forced cross-entropy over the target
//! tokens, and after every epoch the validation SacreBLEU the best weights are kept by
//! (IndoNLG's teacher-forced argmax, or greedy decoding).
use super::decoding::{teacher_forced, translate, Decoding};
use super::format::{MbartFormat, Pair};
use super::model::TranslationModel;
use super::recipe::Selection;
use super::salt;
use crate::epochs::{EpochCursor, EpochOrder};
use indolm_core::logger::Logger;
use indolm_metrics::bleu::{corpus_bleu, BleuOptions};
use indolm_torch::device::{staged, upload};
use indolm_torch::error::{Error, Result};
use indolm_torch::model::seq2seq::mbart::{shift_tokens_right, Mbart};
use indolm_torch::model::Precision;
use indolm_train::task::{
    BatchSource, Drawn, Evaluation, EvaluationPlan, Evaluations, OptimizerSpec, Slice, Task, Throughput,
};
use std::path::Path;
use std::sync::Arc;
use tch::{Device, Tensor};

/// One micro-batch: this rank's pairs, right-padded, on the host (pinned on CUDA).
pub(crate) struct PairBatch {
    input_ids: Tensor,
    attention_mask: Tensor,
    /// Labels, padding -100.
    labels: Tensor,
}

/// The training pairs in batches of a seeded order, drawn on the loader's thread.
pub(crate) struct PairSource {
    pairs: Arc<Vec<Pair>>,
    batch_size: usize,
    slice: Slice,
    device: Device,
    pad: i64,
    order: EpochOrder,
}

/// Rows right-padded with `fill` into host tensors (pinned for `device`).
fn staged_rows(rows: &[&[i64]], fill: i64, device: Device) -> Tensor {
    let width = rows.iter().map(|r| r.len()).max().unwrap_or(1);
    let mut ids = vec![fill; rows.len() * width];
    for (i, r) in rows.iter().enumerate() {
        ids[i * width..i * width + r.len()].copy_from_slice(r);
    }
    staged(&ids, &[rows.len() as i64, width as i64], device)
}

impl BatchSource for PairSource {
    type Batch = PairBatch;
    type Cursor = EpochCursor;

    /// The next `batch_size` pairs of the epoch's order (fewer at its end), this rank's share of
    /// them padded; the units are target tokens (the labels).
    fn next(&mut self, cursor: &mut EpochCursor) -> Drawn<PairBatch> {
        let chunk = self.order.next_batch(cursor, self.batch_size);
        let rows = self.slice.rows(chunk.len());
        let global_units = chunk.iter().map(|&i| self.pairs[i].labels.len()).sum();
        // A rank with no pair of this batch trains on the first, its loss weighted by 0.
        let (mine, units) = match rows.is_empty() {
            true => (&chunk[..1], 0),
            false => (&chunk[rows.clone()], chunk[rows].iter().map(|&i| self.pairs[i].labels.len()).sum()),
        };
        let sources: Vec<&[i64]> = mine.iter().map(|&i| self.pairs[i].source.as_slice()).collect();
        let labels: Vec<&[i64]> = mine.iter().map(|&i| self.pairs[i].labels.as_slice()).collect();
        let masks: Vec<Vec<i64>> = sources.iter().map(|s| vec![1; s.len()]).collect();
        let masks: Vec<&[i64]> = masks.iter().map(Vec::as_slice).collect();
        Drawn {
            batch: PairBatch {
                input_ids: staged_rows(&sources, self.pad, self.device),
                attention_mask: staged_rows(&masks, 0, self.device),
                labels: staged_rows(&labels, -100, self.device),
            },
            units,
            global_units,
            rows: chunk.len(),
        }
    }
}

/// The optimizer settings and length of one direction's fine-tuning.
#[derive(Debug, Clone)]
pub(crate) struct Hyper {
    /// Pairs per micro-batch.
    pub batch_size: usize,
    /// Updates in the whole fine-tuning.
    pub max_steps: u64,
    /// Updates per epoch (an evaluation after each).
    pub updates_per_epoch: u64,
}

/// The validation split as the task scores it.
pub(crate) struct Validation {
    /// The pairs' rows.
    pub pairs: Vec<Pair>,
    /// What is measured.
    pub selection: Selection,
    /// Sentences scored or decoded together.
    pub batch: usize,
}

/// Fine-tuning an mBART on one direction's pairs, selected on validation SacreBLEU.
pub(crate) struct TranslationTask {
    /// The model in training.
    pub model: TranslationModel,
    precision: Precision,
    format: MbartFormat,
    train: Arc<Vec<Pair>>,
    valid: Validation,
    seed: u64,
    hyper: Hyper,
    optimizer: indolm_core::recipe::OptimizerSection,
    tag: String,
}

impl TranslationTask {
    /// The task of training `model` on `train` pairs, selected on `valid`; `tag` (the direction)
    /// names it in the log lines. Refuses a `format` whose rows the model's positions cannot hold.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        model: TranslationModel,
        precision: Precision,
        format: MbartFormat,
        train: Vec<Pair>,
        valid: Validation,
        seed: u64,
        hyper: Hyper,
        optimizer: indolm_core::recipe::OptimizerSection,
        tag: String,
    ) -> Result<Self> {
        let positions = model.net.config.max_position_embeddings;
        if format.max_len as i64 > positions {
            return Err(Error::field(
                &model.net.config.path,
                "max_position_embeddings",
                format!("{positions}: fewer positions than the recipe's data.max_len {}", format.max_len),
            ));
        }
        Ok(TranslationTask { model, precision, format, train: Arc::new(train), valid, seed, hyper, optimizer, tag })
    }

    /// The validation SacreBLEU (and, teacher-forced, the loss) of the model as it stands.
    fn validate(&self) -> Result<(f64, Option<f64>)> {
        let v = &self.valid;
        let (hypotheses, references, loss) = match v.selection {
            Selection::TeacherForced => {
                let found = teacher_forced(&self.model, &v.pairs, v.batch, self.precision)?;
                (found.hypotheses, found.references, Some(found.loss))
            }
            Selection::Greedy => {
                let sources: Vec<&[i64]> = v.pairs.iter().map(|p| p.source.as_slice()).collect();
                let decoding = Decoding { beams: 1, length_penalty: 1.0, batch: v.batch };
                let hypotheses = translate(&self.model, &self.format, &sources, decoding, self.precision)?;
                let references =
                    v.pairs.iter().map(|p| self.model.tokenizer.decode(&p.labels, true)).collect::<Result<Vec<_>>>()?;
                (hypotheses, references, None)
            }
        };
        let bleu = corpus_bleu(&hypotheses, &[references.as_slice()], &BleuOptions::default())?;
        Ok((bleu.score, loss))
    }
}

impl Evaluations for TranslationTask {
    fn plan(&self) -> EvaluationPlan {
        EvaluationPlan { every: self.hyper.updates_per_epoch, at_last: true, ..EvaluationPlan::default() }
    }

    fn evaluate(&mut self, step: u64, logger: &mut Logger) -> Result<Evaluation> {
        let (bleu, loss) = self.validate()?;
        logger.scalar("eval/valid_bleu", bleu, step);
        let epoch = step.div_ceil(self.hyper.updates_per_epoch);
        let how = match self.valid.selection {
            Selection::TeacherForced => "teacher-forced",
            Selection::Greedy => "greedy",
        };
        let mut line = format!("{}: step {step} (epoch {epoch}): valid SacreBLEU ({how}) {bleu:.2}", self.tag);
        if let Some(loss) = loss {
            logger.scalar("eval/valid_loss", loss, step);
            line.push_str(&format!(", loss {loss:.4}"));
        }
        logger.println(&line);
        Ok(Evaluation { score: Some(("valid SacreBLEU".into(), bleu)) })
    }
}

impl Task for TranslationTask {
    type Source = PairSource;

    fn describe(&self) -> String {
        let c = &self.model.net.config;
        format!(
            "MBartForConditionalGeneration enc{} dec{} d{} heads{} ffn{} V{} ({:.1}M parameters)",
            c.encoder_layers,
            c.decoder_layers,
            c.d_model,
            c.encoder_attention_heads,
            c.encoder_ffn_dim,
            c.vocab_size,
            c.parameters() / 1e6
        )
    }

    fn precision(&self) -> Precision {
        self.precision
    }

    fn optimizers(&self) -> Vec<OptimizerSpec> {
        let o = &self.optimizer;
        vec![OptimizerSpec {
            name: String::new(),
            vars: self.model.trainable(),
            betas: o.betas,
            eps: o.eps,
            weight_decay: o.weight_decay,
            schedule: o.schedule_of(o.lr, o.warmup_steps, self.hyper.max_steps, Some(self.hyper.updates_per_epoch)),
            grad_clip: o.grad_clip,
        }]
    }

    fn source(&mut self, slice: Slice) -> Result<PairSource> {
        Ok(PairSource {
            pairs: Arc::clone(&self.train),
            batch_size: self.hyper.batch_size,
            slice,
            device: self.model.vs.device(),
            pad: self.model.net.config.pad_token_id,
            order: EpochOrder::new(self.train.len(), self.seed, salt::TRANSLATION_SHUFFLE),
        })
    }

    fn start_cursor(&self) -> EpochCursor {
        EpochCursor::default()
    }

    fn loss(&self, batch: &PairBatch) -> Tensor {
        let d = self.model.vs.device();
        let net: &Mbart = &self.model.net;
        let (ids, mask, labels) =
            (upload(&batch.input_ids, d), upload(&batch.attention_mask, d), upload(&batch.labels, d));
        // Rows are at most `max_len` long, which `new` checked against the positions.
        let encoded = net.encode(&ids, &mask, true, self.precision).expect("rows fit the positions (checked in new)");
        let decoder_input = shift_tokens_right(&labels, net.config.pad_token_id);
        let hidden = net
            .decode(&decoder_input, None, &encoded, &mask, true, self.precision)
            .expect("rows fit the positions (checked in new)");
        Mbart::loss(&net.logits(&hidden), &labels)
    }

    fn save_model(&self, dir: &Path) -> Result<()> {
        self.model.save(dir)
    }

    fn load_weights(&mut self, dir: &Path) -> Result<()> {
        self.model.load_weights(dir)
    }

    fn throughput(&self) -> Throughput {
        Throughput {
            per_update: (self.hyper.batch_size * self.optimizer.grad_accumulation) as f64,
            per_row: 1.0,
            unit: "pairs",
            short: "pairs",
            flops_per_unit: None,
        }
    }
}
