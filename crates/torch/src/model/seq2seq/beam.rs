//! Beam search as transformers 5's `GenerationMixin._beam_search` runs it (no sampling, one
//! returned sequence a row): each step keeps the top `max(2, 1 + eos ids) × beams` continuations
//! of the accumulated log-probabilities, the best `beams` that did not stop run on, those among
//! the top `beams` that stopped (an end-of-sequence id, or `max_length`) compete for the finished
//! slots with their score divided by (generated length)^`length_penalty`, and the search ends when
//! the finished beams can no longer improve (`early_stopping`), every continuation stopped, or
//! `max_length` is reached. The forced first and last tokens of mBART's generation config
//! (`forced_bos_token_id`, `forced_eos_token_id`) are the two logits processors applied. The
//! model is a function from decoder inputs to next-token logits, so any encoder-decoder (or
//! decoder-only) network can search with it.
use crate::error::{Error, Result};
use tch::{Kind, Tensor};

/// When the search may stop (`GenerationConfig.early_stopping`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EarlyStopping {
    /// `True`: as soon as every row has `num_beams` finished sequences.
    Yes,
    /// `False`: when the best running beam, at its current length, cannot beat the worst finished one.
    No,
    /// `"never"`: as `No`, but a positive length penalty is judged at `max_length`.
    Never,
}

/// What to search for.
#[derive(Debug, Clone, PartialEq)]
pub struct BeamSettings {
    /// Beams per row.
    pub num_beams: i64,
    /// The longest sequence, decoder prompt included.
    pub max_length: i64,
    /// The exponent of the generated length a finished score is divided by.
    pub length_penalty: f64,
    /// When to stop.
    pub early_stopping: EarlyStopping,
    /// The ids that end a sequence.
    pub eos_token_ids: Vec<i64>,
    /// The padding id (fills positions after a sequence ended).
    pub pad_token_id: Option<i64>,
    /// The id forced as the first generated token.
    pub forced_bos_token_id: Option<i64>,
    /// The id forced at the last position `max_length` allows.
    pub forced_eos_token_id: Option<i64>,
}

/// The search's result: per row, the best sequence (decoder prompt included, padded to the
/// longest of the batch) and its score.
#[derive(Debug)]
pub struct BeamOutput {
    /// [batch, length] token ids.
    pub sequences: Tensor,
    /// [batch] the length-penalised sum of log-probabilities.
    pub scores: Tensor,
}

/// Gathers `t` [batch, beams, ...] at `indices` [batch, n] along the beam dimension.
fn gather_beams(t: &Tensor, indices: &Tensor) -> Tensor {
    let mut idx = indices.shallow_clone();
    while idx.dim() < t.dim() {
        idx = idx.unsqueeze(-1);
    }
    let mut shape = t.size();
    shape[1] = indices.size()[1];
    t.take_along_dim(&idx.expand(&shape, false), 1)
}

/// -1e9 where `mask` is true, 0 elsewhere (as transformers adds `mask.to(float32) * -1.0e9`).
fn penalty(mask: &Tensor) -> Tensor {
    mask.to_kind(Kind::Float) * -1.0e9
}

/// Searches from `prompt` [batch, p] (the decoder's start ids); `next_logits` maps decoder
/// inputs [batch × beams, t] to the logits of the next token [batch × beams, vocab]. From the
/// second call on it is also told, for each row, the row of the previous call that row continues
/// ([batch × beams] indices), so that a model keeping a cache per row can reorder it.
pub fn beam_search(
    prompt: &Tensor,
    settings: &BeamSettings,
    mut next_logits: impl FnMut(&Tensor, Option<&Tensor>) -> Result<Tensor>,
) -> Result<BeamOutput> {
    let s = settings;
    let (batch, p) = (prompt.size()[0], prompt.size()[1]);
    let k = s.num_beams;
    if k < 1 || s.max_length <= p || s.eos_token_ids.is_empty() {
        return Err(Error::argument(
            "beam search",
            format!(
                "needs at least one beam ({k}), a max_length ({}) beyond the prompt ({p}) and an end-of-sequence id",
                s.max_length
            ),
        ));
    }
    let device = prompt.device();
    let keep = 2i64.max(1 + s.eos_token_ids.len() as i64) * k;
    let top_mask =
        Tensor::cat(&[Tensor::ones([k], (Kind::Bool, device)), Tensor::zeros([keep - k], (Kind::Bool, device))], 0);
    let eos = Tensor::from_slice(&s.eos_token_ids).to_device(device);
    // transformers: `pad_token_id or eos_token_id[0]` (a pad id of 0 counts as none).
    let fill = s.pad_token_id.filter(|&id| id != 0).unwrap_or(s.eos_token_ids[0]);
    let mut running = Tensor::full([batch, k, s.max_length], fill, (Kind::Int64, device));
    running.narrow(2, 0, p).copy_(&prompt.unsqueeze(1).expand([batch, k, p], false));
    let mut sequences = running.copy();
    let mut running_scores = Tensor::zeros([batch, k], (Kind::Float, device));
    let _ = running_scores.narrow(1, 1, k - 1).fill_(-1.0e9);
    let mut beam_scores = Tensor::full([batch, k], -1.0e9, (Kind::Float, device));
    let mut finished = Tensor::zeros([batch, k], (Kind::Bool, device));
    // Tokens generated by each finished slot (transformers counts its beam indices that are set).
    let mut finished_len = Tensor::zeros([batch, k], (Kind::Int64, device));
    let mut improvable = Tensor::ones([batch, 1], (Kind::Bool, device));
    let mut cur = p;
    // The row of the previous call each running beam continues.
    let mut continued: Option<Tensor> = None;
    let batch_offsets = Tensor::arange(batch, (Kind::Int64, device)).unsqueeze(1) * k;
    loop {
        let flat = running.narrow(2, 0, cur).reshape([batch * k, cur]);
        let logits = next_logits(&flat, continued.as_ref())?.to_kind(Kind::Float);
        let vocab = logits.size()[1];
        let mut log_probs = logits.log_softmax(-1, Kind::Float);
        let forced = if cur == 1 { s.forced_bos_token_id } else { None }.or(if cur == s.max_length - 1 {
            s.forced_eos_token_id
        } else {
            None
        });
        if let Some(id) = forced {
            if id < 0 || id >= vocab {
                return Err(Error::argument(
                    "beam search",
                    format!("forced token {id} outside the vocabulary of {vocab}"),
                ));
            }
            let only = Tensor::full([batch * k, vocab], f64::NEG_INFINITY, (Kind::Float, device));
            let _ = only.narrow(1, id, 1).fill_(0.0);
            log_probs = only;
        }
        let accumulated =
            (log_probs.view([batch, k, vocab]) + running_scores.unsqueeze(-1)).reshape([batch, k * vocab]);
        let (topk_scores, topk_indices) = accumulated.topk(keep, -1, true, true);
        let from_beam = topk_indices.floor_divide_scalar(vocab);
        let ids = topk_indices.remainder(vocab);
        let topk_sequences = gather_beams(&running, &from_beam);
        topk_sequences.narrow(2, cur, 1).copy_(&ids.unsqueeze(-1));
        let stops = ids.unsqueeze(-1).eq_tensor(&eos.view([1, 1, -1])).any_dim(-1, false);
        let stops = if cur + 1 >= s.max_length { stops.ones_like() } else { stops };

        // The best `k` that did not stop run on.
        let running_candidates = &topk_scores + penalty(&stops);
        let next = running_candidates.topk(k, -1, true, true).1;
        running = gather_beams(&topk_sequences, &next);
        running_scores = gather_beams(&running_candidates, &next);
        continued = Some((gather_beams(&from_beam, &next) + &batch_offsets).reshape([batch * k]));

        // Those among the top `k` that stopped compete for the finished slots.
        let just_finished = stops.logical_and(&top_mask.unsqueeze(0));
        let generated = (cur + 1 - p) as f64;
        let full = finished
            .all_dim(-1, true)
            .logical_and(&Tensor::from(s.early_stopping == EarlyStopping::Yes).to_device(device));
        let candidates = &topk_scores / generated.powf(s.length_penalty)
            + penalty(&full)
            + penalty(&improvable.logical_not())
            + penalty(&just_finished.logical_not());
        let merged_scores = Tensor::cat(&[&beam_scores, &candidates], 1);
        let best = merged_scores.topk(k, -1, true, true).1;
        sequences = gather_beams(&Tensor::cat(&[&sequences, &topk_sequences], 1), &best);
        beam_scores = gather_beams(&merged_scores, &best);
        finished = gather_beams(&Tensor::cat(&[&finished, &just_finished], 1), &best);
        let topk_len = Tensor::full([batch, keep], cur + 1 - p, (Kind::Int64, device));
        finished_len = gather_beams(&Tensor::cat(&[&finished_len, &topk_len], 1), &best);
        cur += 1;

        let hypothetical =
            if s.early_stopping == EarlyStopping::Never && s.length_penalty > 0.0 { s.max_length - p } else { cur - p };
        let best_running = running_scores.narrow(1, 0, 1) / (hypothetical as f64).powf(s.length_penalty);
        let worst_finished = beam_scores
            .min_dim(1, true)
            .0
            .expand([batch, k], false)
            .where_self(&finished, &Tensor::full([batch, k], -1.0e9, (Kind::Float, device)));
        improvable = improvable.logical_and(&best_running.gt_tensor(&worst_finished).any_dim(-1, true));
        let can_improve = improvable.any().int64_value(&[]) != 0;
        let open = !(finished.all().int64_value(&[]) != 0 && s.early_stopping == EarlyStopping::Yes);
        let continues = stops.all().int64_value(&[]) == 0;
        if !(can_improve && open && continues) {
            break;
        }
    }
    let generated = finished_len.narrow(1, 0, 1).max().int64_value(&[]);
    Ok(BeamOutput { sequences: sequences.select(1, 0).narrow(1, 0, p + generated), scores: beam_scores.select(1, 0) })
}
