//! What a translation model produces, without gradients, in batches: the teacher-forced argmax
//! IndoNLG validates on (its `forward_generation` without `is_inference`: at every label
//! position the most likely token given the reference prefix, decoded with the special tokens
//! left out, beside the labels decoded the same way) with the mean loss, and translations by beam
//! search (one beam: greedy) from the target language token, as transformers' `generate`.
use super::format::{MbartFormat, Pair};
use super::model::TranslationModel;
use indolm_torch::error::Result;
use indolm_torch::model::seq2seq::beam::{BeamSettings, EarlyStopping};
use indolm_torch::model::seq2seq::mbart::{shift_tokens_right, Mbart};
use indolm_torch::model::Precision;
use tch::{Device, Kind, Tensor};

/// Rows right-padded with `fill` into one [rows, longest] tensor on `device`, with the mask of
/// their real tokens.
pub(crate) fn padded(rows: &[&[i64]], fill: i64, device: Device) -> (Tensor, Tensor) {
    let width = rows.iter().map(|r| r.len()).max().unwrap_or(0).max(1);
    let (mut ids, mut mask) = (vec![fill; rows.len() * width], vec![0i64; rows.len() * width]);
    for (i, r) in rows.iter().enumerate() {
        ids[i * width..i * width + r.len()].copy_from_slice(r);
        mask[i * width..i * width + r.len()].iter_mut().for_each(|m| *m = 1);
    }
    let shape = [rows.len() as i64, width as i64];
    (Tensor::from_slice(&ids).view(shape).to_device(device), Tensor::from_slice(&mask).view(shape).to_device(device))
}

/// The logits [rows, t, vocab] of teacher forcing on `pairs` (labels padded with -100).
pub(crate) fn forward(
    net: &Mbart,
    pairs: &[&Pair],
    device: Device,
    train: bool,
    precision: Precision,
) -> Result<(Tensor, Tensor)> {
    let pad = net.config.pad_token_id;
    let sources: Vec<&[i64]> = pairs.iter().map(|p| p.source.as_slice()).collect();
    let labels: Vec<&[i64]> = pairs.iter().map(|p| p.labels.as_slice()).collect();
    let (ids, mask) = padded(&sources, pad, device);
    let (labels, _) = padded(&labels, -100, device);
    let encoded = net.encode(&ids, &mask, train, precision)?;
    let hidden = net.decode(&shift_tokens_right(&labels, pad), None, &encoded, &mask, train, precision)?;
    Ok((net.logits(&hidden), labels))
}

/// What the teacher-forced pass over a split found.
pub(crate) struct TeacherForced {
    /// Per pair, the argmax tokens at its label positions, decoded (special tokens left out).
    pub hypotheses: Vec<String>,
    /// Per pair, its labels decoded the same way: the references IndoNLG scores against.
    pub references: Vec<String>,
    /// The mean cross-entropy over every label token of the split.
    pub loss: f64,
}

/// IndoNLG's validation pass over `pairs`, `batch` at a time.
pub(crate) fn teacher_forced(
    model: &TranslationModel,
    pairs: &[Pair],
    batch: usize,
    precision: Precision,
) -> Result<TeacherForced> {
    let device = model.vs.device();
    let (mut hypotheses, mut references) = (Vec::new(), Vec::new());
    let (mut loss_sum, mut tokens) = (0.0, 0i64);
    tch::no_grad(|| -> Result<()> {
        for chunk in pairs.chunks(batch.max(1)) {
            let rows: Vec<&Pair> = chunk.iter().collect();
            let (logits, labels) = forward(&model.net, &rows, device, false, precision)?;
            let vocab = logits.size()[2];
            let flat = logits.view([-1, vocab]).log_softmax(-1, Kind::Float);
            let n = labels.ne(-100).sum(Kind::Int64).int64_value(&[]);
            loss_sum += flat.nll_loss(&labels.view([-1])).double_value(&[]) * n as f64;
            tokens += n;
            let argmax = Vec::<i64>::try_from(logits.argmax(-1, false).flatten(0, -1).to_device(Device::Cpu))
                .map_err(|e| indolm_torch::error::Error::torch("reading the argmax", e))?;
            let width = labels.size()[1] as usize;
            for (i, pair) in chunk.iter().enumerate() {
                let hyp: Vec<i64> = argmax[i * width..i * width + pair.labels.len()].to_vec();
                hypotheses.push(model.tokenizer.decode(&hyp, true)?);
                references.push(model.tokenizer.decode(&pair.labels, true)?);
            }
        }
        Ok(())
    })?;
    Ok(TeacherForced { hypotheses, references, loss: loss_sum / tokens.max(1) as f64 })
}

/// How to decode.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Decoding {
    /// Beams (1: greedy).
    pub beams: i64,
    /// The length penalty.
    pub length_penalty: f64,
    /// Sentences searched together.
    pub batch: usize,
}

/// The translations of encoder rows `sources`, searched from `format`'s target language token to
/// at most `format.max_len` tokens (transformers' `generate` with `num_beams`,
/// `early_stopping=True`, `max_length`, the configuration's `forced_eos_token_id`), decoded with
/// the special tokens left out.
pub(crate) fn translate(
    model: &TranslationModel,
    format: &MbartFormat,
    sources: &[&[i64]],
    decoding: Decoding,
    precision: Precision,
) -> Result<Vec<String>> {
    let device = model.vs.device();
    let c = &model.net.config;
    let settings = BeamSettings {
        num_beams: decoding.beams,
        max_length: format.max_len as i64,
        length_penalty: decoding.length_penalty,
        early_stopping: EarlyStopping::Yes,
        eos_token_ids: vec![c.eos_token_id],
        pad_token_id: Some(c.pad_token_id),
        forced_bos_token_id: None,
        forced_eos_token_id: model.forced_eos_token_id,
    };
    let mut out = Vec::with_capacity(sources.len());
    for chunk in sources.chunks(decoding.batch.max(1)) {
        let (ids, mask) = padded(chunk, c.pad_token_id, device);
        let start = Tensor::full([chunk.len() as i64, 1], format.decoder_start(), (Kind::Int64, device));
        let found = model.net.generate(&ids, &mask, &start, &settings, precision)?;
        let sequences = found.sequences.to_device(Device::Cpu);
        let width = sequences.size()[1] as usize;
        let flat = Vec::<i64>::try_from(sequences.flatten(0, -1))
            .map_err(|e| indolm_torch::error::Error::torch("reading generated tokens", e))?;
        for row in flat.chunks(width) {
            // After the start token, up to the first end of sequence.
            let generated = &row[1..];
            let end = generated.iter().position(|&t| t == c.eos_token_id).unwrap_or(generated.len());
            out.push(model.tokenizer.decode(&generated[..end], true)?);
        }
    }
    Ok(out)
}
