//! `BertForSequenceClassification` (HF names: `bert.*` with its pooler, `classifier.*`): the
//! pooled `[CLS]` vector, dropout, and a linear layer to the labels; for the RoBERTa family
//! (XLM-R) `XLMRobertaForSequenceClassification` (no pooler; `classifier.dense` and
//! `classifier.out_proj` on the `<s>` vector, tanh between, dropout before each). Loads any
//! BERT or XLM-R model directory (a missing pooler or classifier starts random, with a note) and
//! saves what transformers' `AutoModelForSequenceClassification` and `AutoTokenizer` load,
//! `id2label` included.
use indolm_torch::data::tokenizer::{pad_rows, TextTokenizer};
use indolm_torch::device::Precision;
use indolm_torch::error::{Error, Result};
use indolm_torch::model::bert::Packing;
use indolm_torch::model::layers::Linear;
use indolm_torch::model::model_dir::{copy_into, read_model_files, save_model_files_as};
use indolm_torch::model::{BertConfig, BertModel, Component, LoadNote};
use std::path::Path;
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

/// The layers between the encoder and the labels.
enum Head {
    /// BERT's: pooler (in the encoder), dropout, `classifier`.
    Pooled(Linear),
    /// XLM-R's `XLMRobertaClassificationHead`: the first token's vector, dropout,
    /// `classifier.dense`, tanh, dropout, `classifier.out_proj`.
    Roberta { dense: Linear, out_proj: Linear },
}

/// HF `BertForSequenceClassification`: the encoder with its pooler, dropout, and a linear layer
/// from the pooled `[CLS]` vector to the labels (or XLM-R's head, see [`Head`]).
pub struct SequenceClassifier {
    /// Its variables (`bert.*`, `classifier.*`).
    pub vs: VarStore,
    /// `bert`, pooler included (none for XLM-R).
    pub bert: BertModel,
    classifier: Head,
    dropout: f64,
    /// The encoder's configuration.
    pub config: BertConfig,
    /// The model directory's tokenizer.
    pub tokenizer: TextTokenizer,
    /// Class names; the index is the class id (`id2label`).
    pub labels: Vec<String>,
}

impl SequenceClassifier {
    /// Builds the classifier on a model directory's encoder; `labels` name the classes.
    pub fn load(dir: &Path, labels: &[String], device: Device) -> Result<(Self, Vec<LoadNote>)> {
        let files = read_model_files(dir)?;
        let vs = VarStore::new(device);
        let root = vs.root();
        let c = &files.config;
        let roberta = c.is_roberta();
        let bert = BertModel::new(&root / "bert", c, !roberta);
        let (h, n, std) = (c.hidden_size, labels.len() as i64, c.initializer_range);
        let classifier = if roberta {
            Head::Roberta {
                dense: Linear::new(&root / "classifier" / "dense", h, h, std),
                out_proj: Linear::new(&root / "classifier" / "out_proj", h, n, std),
            }
        } else {
            Head::Pooled(Linear::new(&root / "classifier", h, n, std))
        };
        // XLM-R's head takes `classifier_dropout` when the config sets it, as transformers does.
        let dropout = match c.extra.get("classifier_dropout").and_then(|d| d.as_f64()) {
            Some(p) if roberta => p,
            _ => c.hidden_dropout_prob,
        };
        let mut notes = files.notes;
        notes.extend(copy_into(&vs, files.tensors, &files.weights_path, &[Component::Pooler, Component::Classifier])?);
        Ok((
            SequenceClassifier {
                vs,
                bert,
                classifier,
                dropout,
                config: files.config,
                tokenizer: files.tokenizer,
                labels: labels.to_vec(),
            },
            notes,
        ))
    }

    /// Sets the dtype of the encoder's and the classifier's matrix products.
    pub fn set_precision(&mut self, precision: Precision) {
        self.bert.precision = precision;
    }

    /// Label logits [batch, labels] (fp32).
    pub fn logits(&self, input_ids: &Tensor, attention_mask: &Tensor, train: bool) -> Tensor {
        let hidden = self.bert.forward(input_ids, None, Some(attention_mask), train);
        self.head(&hidden, train)
    }

    /// [`SequenceClassifier::logits`] with the encoder on the real tokens only (see [`Packing`]).
    pub(crate) fn logits_packed(
        &self,
        input_ids: &Tensor,
        attention_mask: &Tensor,
        packing: &Packing,
        train: bool,
    ) -> Tensor {
        let hidden = self.bert.forward_packed(input_ids, None, attention_mask, packing, train);
        self.head(&hidden, train)
    }

    /// The pooled `[CLS]` vector, dropout and the classifier (XLM-R: see [`Head`]).
    fn head(&self, hidden: &Tensor, train: bool) -> Tensor {
        use indolm_torch::model::layers::dropout;
        let precision = self.bert.precision;
        match &self.classifier {
            Head::Pooled(classifier) => {
                let pooled = dropout(
                    &self.bert.pool(hidden).expect("the classifier is built with a pooler"),
                    self.dropout,
                    train,
                );
                classifier.forward(&pooled, precision).to_kind(Kind::Float)
            }
            Head::Roberta { dense, out_proj } => {
                let first = dropout(&hidden.select(1, 0), self.dropout, train);
                let x = dense.forward(&first, precision).to_kind(Kind::Float).tanh();
                out_proj.forward(&dropout(&x, self.dropout, train), precision).to_kind(Kind::Float)
            }
        }
    }

    /// A model directory transformers' `BertForSequenceClassification` loads.
    pub fn save(&self, dir: &Path) -> Result<()> {
        let id2label: serde_json::Map<String, serde_json::Value> =
            self.labels.iter().enumerate().map(|(i, l)| (i.to_string(), l.clone().into())).collect();
        let label2id: serde_json::Map<String, serde_json::Value> =
            self.labels.iter().enumerate().map(|(i, l)| (l.clone(), i.into())).collect();
        let extra = serde_json::Map::from_iter([
            ("id2label".to_string(), id2label.into()),
            ("label2id".to_string(), label2id.into()),
            ("problem_type".to_string(), "single_label_classification".into()),
        ]);
        save_model_files_as(
            dir,
            &self.config.to_hf_json_as("BertForSequenceClassification", extra),
            &self.vs,
            &self.tokenizer,
        )
    }

    /// Label probabilities for texts, in input order: batched by length under the device's
    /// token budget (see [`indolm_torch::data::batching`]), each text's result what it gets alone up to
    /// float rounding (padding is masked).
    pub fn predict(&self, texts: &[&str], max_len: usize) -> Result<Vec<Vec<f64>>> {
        let device = self.vs.device();
        if max_len < 3 {
            return Err(Error::data("prediction", format!("max_len must be at least 3, found {max_len}")));
        }
        // Tokenized once; the lengths sort the batches.
        let rows: Vec<(Vec<i64>, Vec<i64>)> =
            texts.iter().map(|t| self.tokenizer.single_row(t, max_len)).collect::<Result<_>>()?;
        let lengths: Vec<usize> = rows.iter().map(|r| r.0.len()).collect();
        let mut out = vec![Vec::new(); texts.len()];
        for batch_items in
            indolm_torch::data::batching::by_length(&lengths, indolm_torch::data::batching::token_budget(device))
        {
            let chunk: Vec<(Vec<i64>, Vec<i64>)> = batch_items.iter().map(|&i| rows[i].clone()).collect();
            let batch = pad_rows(chunk, self.tokenizer.special.pad);
            let width = batch.input_ids.size()[1] as usize;
            let packing = Packing::of_lengths(&batch.lengths, width, device);
            let probs = tch::no_grad(|| {
                let (ids, mask) = (batch.input_ids.to_device(device), batch.attention_mask.to_device(device));
                self.logits_packed(&ids, &mask, &packing, false).softmax(-1, Kind::Double)
            });
            let probs = probs.to_device(Device::Cpu);
            for (r, &i) in batch_items.iter().enumerate() {
                out[i] = Vec::<f64>::try_from(probs.get(r as i64)).expect("a row of probabilities");
            }
        }
        Ok(out)
    }
}
