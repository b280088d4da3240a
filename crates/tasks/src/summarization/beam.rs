//! Beam search as PreSumm decodes for BertAbs: candidates ranked by cumulative
//! log-probability divided by the GNMT length penalty ((5 + length) / 6)^α (Wu et al. 2016);
//! end-of-sequence forbidden until the hypothesis has `min_length` words and `min_sentences`
//! sentences (the Liputan6 paper's minimum: two sentences, 15 words); with trigram blocking, a
//! candidate whose last word trigram (word pieces joined at `##`) already occurred is dropped.
//! Each step keeps the best `beam` candidates; those that end go to the finished list, and the
//! search stops when the best candidate of a step ends (PreSumm's end condition) or at
//! `max_length` tokens. The model enters as a function from the live hypotheses to their
//! next-token log-probabilities. [`beam_search_batch`] searches many articles at once (one
//! model call per step for all their live hypotheses), each exactly as it would be alone.
//!
//! A step reads device values once: every row's best candidates, gathered on the device, come
//! back in one transfer. Only two rare cases read more: ties at a row's k-th best beyond the k
//! taken, and trigram blocking eating a row's candidates (a widening search). [`decoding_reads`]
//! counts the steps and the reads of the searches of the calling thread.
use indolm_torch::device::to_device_queued;
use std::cell::Cell;
use std::cmp::Ordering;
use std::collections::HashSet;
use tch::{Device, Kind, Tensor};

/// Steps and reads of the beam searches of one thread so far (see [`decoding_reads`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DecodingReads {
    /// Decoding steps: one model call each.
    pub steps: u64,
    /// Times those steps made the host wait for device values (a transfer to the host, or a
    /// size that depends on device data).
    pub reads: u64,
}

thread_local! {
    /// The calling thread's [`DecodingReads`].
    static COUNTS: Cell<DecodingReads> = const { Cell::new(DecodingReads { steps: 0, reads: 0 }) };
}

/// The steps and reads of every beam search the calling thread ran so far (a count that only
/// grows: take the difference around a search).
pub fn decoding_reads() -> DecodingReads {
    COUNTS.with(Cell::get)
}

/// Adds `steps` and `reads` to the calling thread's counts.
fn count(steps: u64, reads: u64) {
    COUNTS.with(|c| {
        let now = c.get();
        c.set(DecodingReads { steps: now.steps + steps, reads: now.reads + reads });
    });
}

/// Counts one read of device values.
fn note_read() {
    count(0, 1);
}

/// `t` brought to the host as f64 values (row-major), one read.
fn read_f64(t: &Tensor) -> Vec<f64> {
    note_read();
    Vec::<f64>::try_from(t.to_kind(Kind::Double).reshape([-1]).to_device(Device::Cpu)).expect("f64 values")
}

/// Beam-search settings.
#[derive(Debug, Clone, PartialEq)]
pub struct BeamConfig {
    /// Hypotheses kept at each step.
    pub beam: usize,
    /// Words (word pieces joined, sentence markers excluded) before end-of-sequence may come.
    pub min_length: usize,
    /// Tokens generated at most.
    pub max_length: usize,
    /// Length-penalty exponent α (0: raw cumulative log-probability).
    pub alpha: f64,
    /// Drop candidates whose last word trigram already occurred in the hypothesis.
    pub block_trigrams: bool,
    /// The token every hypothesis starts with (not part of the result).
    pub bos: i64,
    /// The end-of-sequence token.
    pub eos: i64,
    /// The token between summary sentences, if the targets have one.
    pub sentence_split: Option<i64>,
    /// Sentences before end-of-sequence may come (needs `sentence_split`).
    pub min_sentences: usize,
}

impl Default for BeamConfig {
    /// PreSumm's and the Liputan6 paper's decoding: beam 5, α 0.6, at least 15 words, at most
    /// 150 tokens.
    fn default() -> Self {
        BeamConfig {
            beam: 5,
            min_length: 15,
            max_length: 150,
            alpha: 0.6,
            block_trigrams: true,
            bos: 1,
            eos: 2,
            sentence_split: None,
            min_sentences: 1,
        }
    }
}

/// The GNMT length penalty.
pub fn length_penalty(length: usize, alpha: f64) -> f64 {
    ((5.0 + length as f64) / 6.0).powf(alpha)
}

/// Words of a hypothesis: `##` pieces joined to the previous piece.
pub fn words(pieces: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for p in pieces {
        push_piece(&mut out, p);
    }
    out
}

fn push_piece(words: &mut Vec<String>, piece: &str) {
    match (piece.strip_prefix("##"), words.last_mut()) {
        (Some(rest), Some(last)) => last.push_str(rest),
        _ => words.push(piece.to_string()),
    }
}

/// Whether the last word trigram occurred earlier in the hypothesis.
pub fn repeats_trigram(words: &[String]) -> bool {
    if words.len() < 4 {
        return false;
    }
    let n = words.len();
    let last = (&words[n - 3], &words[n - 2], &words[n - 1]);
    let earlier: HashSet<(&String, &String, &String)> =
        words[..n - 1].windows(3).map(|w| (&w[0], &w[1], &w[2])).collect();
    earlier.contains(&last)
}

/// A finished hypothesis.
#[derive(Debug, Clone, PartialEq)]
pub struct Hypothesis {
    /// Tokens after `bos`, `eos` excluded.
    pub tokens: Vec<i64>,
    /// Cumulative log-probability of its tokens, `eos` included when it ended with one.
    pub log_prob: f64,
    /// `log_prob` / length penalty.
    pub score: f64,
}

/// A live hypothesis: its tokens (from `bos`), the row of the previous step's hypotheses it
/// extends, cumulative log-probability, words so far and whether it may end now.
struct Live {
    tokens: Vec<i64>,
    parent: usize,
    log_prob: f64,
    words: Vec<String>,
    may_end: bool,
}

impl Live {
    fn new(
        tokens: Vec<i64>,
        parent: usize,
        log_prob: f64,
        config: &BeamConfig,
        piece: &impl Fn(i64) -> String,
    ) -> Self {
        let pieces: Vec<String> = tokens[1..].iter().map(|&t| piece(t)).collect();
        let words = words(&pieces);
        let may_end = match config.sentence_split {
            None => words.len() >= config.min_length,
            Some(split) => {
                let sentences: Vec<&[i64]> = tokens[1..].split(|&t| t == split).filter(|s| !s.is_empty()).collect();
                let content = sentences
                    .iter()
                    .map(|s| self::words(&s.iter().map(|&t| piece(t)).collect::<Vec<_>>()).len())
                    .sum::<usize>();
                content >= config.min_length && sentences.len() >= config.min_sentences
            }
        };
        Live { tokens, parent, log_prob, words, may_end }
    }
}

#[derive(Clone, Copy)]
struct Candidate {
    score: f64,
    log_prob: f64,
    beam: usize,
    token: i64,
}

fn best_first(a: &Candidate, b: &Candidate) -> Ordering {
    b.score.total_cmp(&a.score).then(a.beam.cmp(&b.beam)).then(a.token.cmp(&b.token))
}

/// The search over one article: its live hypotheses, its finished ones, and whether it is over.
struct Search {
    live: Vec<Live>,
    finished: Vec<Hypothesis>,
    done: bool,
}

/// One step's next-token log-probabilities of the live hypotheses [hypotheses, vocab] (the
/// model's kind), with eos impossible (−∞) where a hypothesis may not end yet, and each row's
/// cumulative log-probability. A candidate's log-probability
/// and score are computed in f64 from the row's value, `(cumulative + log p) / penalty`; within
/// a row that order is the order of log p, so rows are ranked in the model's kind.
struct StepScores {
    rows: Tensor,
    cumulative: Vec<f64>,
    penalty: f64,
}

impl StepScores {
    fn new<'l>(rows: Tensor, live: impl Iterator<Item = &'l Live>, step: usize, config: &BeamConfig) -> Self {
        let (cumulative, may_end): (Vec<f64>, Vec<bool>) = live.map(|h| (h.log_prob, h.may_end)).unzip();
        if config.eos < rows.size()[1] {
            // Queued (pinned, non-blocking on CUDA): no wait.
            let forbidden = to_device_queued(&may_end, &[may_end.len() as i64], rows.device()).logical_not();
            let _ = rows.narrow(1, config.eos, 1).squeeze_dim(1).masked_fill_(&forbidden, f64::NEG_INFINITY);
        }
        StepScores { rows, cumulative, penalty: length_penalty(step + 1, config.alpha) }
    }

    /// Possible (finite) candidates in rows `first .. first + n`.
    fn finite_in(&self, first: i64, n: i64) -> i64 {
        note_read();
        self.rows.narrow(0, first, n).isfinite().sum(Kind::Int64).int64_value(&[])
    }

    /// The candidate of row `row` (its `beam` counted from row `first`) with log-probability
    /// `log_p` (the row's value, exactly) for `token`, its f64 log-probability and score.
    fn candidate(&self, row: usize, first: usize, token: i64, log_p: f64) -> Candidate {
        let log_prob = self.cumulative[row] + log_p;
        Candidate { score: log_prob / self.penalty, log_prob, beam: row - first, token }
    }

    /// The candidates at flat positions `index` of the rows (their `beam` counted from row
    /// `first`), with their f64 log-probabilities and scores: values and positions in one read.
    fn candidates(&self, index: &Tensor, first: i64) -> Vec<Candidate> {
        let vocab = self.rows.size()[1];
        let values = self.rows.reshape([-1]).index_select(0, index).to_kind(Kind::Double);
        // Positions below 2^53 are exact in f64.
        let both = read_f64(&Tensor::stack(&[values, index.to_kind(Kind::Double)], 0));
        let (values, index) = both.split_at(both.len() / 2);
        index
            .iter()
            .zip(values)
            .map(|(&i, &log_p)| {
                let i = i as i64;
                self.candidate((i / vocab) as usize, first as usize, i % vocab, log_p)
            })
            .collect()
    }
}

impl Search {
    /// Whether `c` would repeat a word trigram of its hypothesis (never for eos).
    fn blocked(&self, c: &Candidate, config: &BeamConfig, piece: &impl Fn(i64) -> String) -> bool {
        if !config.block_trigrams || c.token == config.eos {
            return false;
        }
        let mut w = self.live[c.beam].words.clone();
        push_piece(&mut w, &piece(c.token));
        repeats_trigram(&w)
    }

    /// The best `beam` unblocked candidates of `pool`, in order.
    fn select(&self, mut pool: Vec<Candidate>, config: &BeamConfig, piece: &impl Fn(i64) -> String) -> Vec<Candidate> {
        pool.sort_by(best_first);
        let mut kept = Vec::new();
        for c in pool {
            if kept.len() == config.beam {
                break;
            }
            if !self.blocked(&c, config, piece) {
                kept.push(c);
            }
        }
        kept
    }

    /// Whether `pool` (each row's candidates scoring at least the row's k-th best) must hold
    /// the article's best unblocked ones: every row either gave all its possible candidates
    /// (`exhausted`: fewer than k were possible) or `beam` unblocked ones, which beat everything
    /// it left out.
    fn pool_suffices(
        &self,
        pool: &[Candidate],
        exhausted: &[bool],
        config: &BeamConfig,
        piece: &impl Fn(i64) -> String,
    ) -> bool {
        (0..self.live.len()).all(|row| {
            exhausted[row]
                || pool.iter().filter(|c| c.beam == row && !self.blocked(c, config, piece)).count() >= config.beam
        })
    }

    /// The best `beam` unblocked candidates of this article's rows (from row `first`), taking
    /// every candidate that scores at least the k-th best of them all (ties included, so the
    /// order is a full sort's) and widening k until blocking leaves enough.
    fn select_widening(
        &self,
        scores: &StepScores,
        first: i64,
        config: &BeamConfig,
        piece: &impl Fn(i64) -> String,
    ) -> Vec<Candidate> {
        let n = self.live.len() as i64;
        let vocab = scores.rows.size()[1];
        let cumulative =
            to_device_queued(&scores.cumulative[first as usize..(first + n) as usize], &[n], scores.rows.device());
        let mine = ((scores.rows.narrow(0, first, n).to_kind(Kind::Double) + cumulative.unsqueeze(1)) / scores.penalty)
            .reshape([-1]);
        let finite = scores.finite_in(first, n);
        let mut k = (config.beam as i64 * 4).max(8);
        loop {
            let k_now = k.min(finite);
            let kept = if k_now == 0 {
                Vec::new()
            } else {
                note_read();
                let threshold = mine.topk(k_now, 0, true, true).0.double_value(&[k_now - 1]);
                note_read();
                let chosen = mine.ge(threshold).logical_and(&mine.isfinite()).nonzero().reshape([-1]) + first * vocab;
                self.select(scores.candidates(&chosen, first), config, piece)
            };
            if kept.len() >= config.beam || k_now >= finite {
                return kept;
            }
            k *= 4;
        }
    }

    /// Takes the step's `kept` candidates: those that end are finished, the others live on;
    /// the search is over when the best one ends, nothing lives, or at the maximum length.
    fn apply(&mut self, kept: Vec<Candidate>, step: usize, config: &BeamConfig, piece: &impl Fn(i64) -> String) {
        let top_ends = kept.first().is_some_and(|c| c.token == config.eos);
        let last_step = step + 1 == config.max_length;
        let mut next = Vec::new();
        for c in kept {
            let parent = &self.live[c.beam].tokens;
            if c.token == config.eos {
                self.finished.push(Hypothesis { tokens: parent[1..].to_vec(), log_prob: c.log_prob, score: c.score });
            } else {
                let mut tokens = parent.clone();
                tokens.push(c.token);
                if last_step {
                    // Cut off at the maximum length: finished as they are.
                    self.finished.push(Hypothesis {
                        tokens: tokens[1..].to_vec(),
                        log_prob: c.log_prob,
                        score: c.score,
                    });
                } else if !top_ends {
                    next.push(Live::new(tokens, c.beam, c.log_prob, config, piece));
                }
            }
        }
        self.live = next;
        self.done = top_ends || self.live.is_empty() || last_step;
    }
}

/// The lowest finite value of a floating-point dtype.
fn lowest_finite(kind: Kind) -> f64 {
    match kind {
        Kind::BFloat16 => -3.389_531_389_251_535_5e38,
        Kind::Half => -65504.0,
        Kind::Double => f64::MIN,
        _ => f32::MIN as f64,
    }
}

/// Each row's candidates down to its k-th best, every candidate scoring at least that (ties
/// included, so the order is a full sort's), and whether each row had fewer than k possible
/// candidates (its k-th is −∞: all of them are taken). One read: every row's k best values and
/// tokens, gathered on the device, with how many of its candidates reach its k-th; only when
/// some row has more (ties at its k-th beyond the k taken) are they found again, exactly.
fn step_pool(scores: &StepScores, k: i64) -> (Vec<Candidate>, Vec<bool>) {
    let (top, tokens) = scores.rows.topk(k, 1, true, true);
    let kind = top.kind();
    // At least the lowest finite value of the scores' dtype, so −∞ (impossible) candidates are
    // never taken (f32's lowest would not fit a bf16 or fp16 tensor: libtorch refuses it).
    let threshold = top.select(1, k - 1).clamp_min(lowest_finite(kind)).unsqueeze(1);
    let reaching = scores.rows.ge_tensor(&threshold).sum_dim_intlist(1, false, Kind::Int64).unsqueeze(1);
    let columns = [top.to_kind(Kind::Double), tokens.to_kind(Kind::Double), reaching.to_kind(Kind::Double)];
    let host = read_f64(&Tensor::cat(&columns, 1));
    let k = k as usize;
    let (mut pool, mut exhausted, mut complete) = (Vec::new(), Vec::new(), true);
    for (row, values) in host.chunks(2 * k + 1).enumerate() {
        let (best, rest) = values.split_at(k);
        let (ids, reached) = rest.split_at(k);
        // The threshold as the device computed it: the k-th, clamped (NaN stays NaN).
        let kth = best[k - 1];
        exhausted.push(kth.is_infinite());
        let floor = if kth.is_nan() { f64::NAN } else { kth.max(lowest_finite(kind)) };
        let before = pool.len();
        for (&log_p, &token) in best.iter().zip(ids).filter(|&(&v, _)| v >= floor) {
            pool.push(scores.candidate(row, 0, token as i64, log_p));
        }
        complete &= reached[0] as usize == pool.len() - before;
    }
    if !complete {
        let vocab = scores.rows.size()[1];
        note_read();
        let chosen = scores.rows.ge_tensor(&threshold).nonzero();
        let flat = chosen.select(1, 0) * vocab + chosen.select(1, 1);
        pool = scores.candidates(&flat, 0);
    }
    (pool, exhausted)
}

/// One step of every article searching: scores for all their rows at once, each row's
/// candidates down to its k-th best gathered in one pass ([`step_pool`]), and each article's
/// selection made from them (or, when blocking ate too many, from a widening search of its own
/// rows).
fn advance_all(
    searches: &mut [Search],
    searching: &[usize],
    spans: &[(usize, usize)],
    rows: Tensor,
    step: usize,
    config: &BeamConfig,
    piece: &impl Fn(i64) -> String,
) {
    let vocab = rows.size()[1];
    let scores = StepScores::new(rows, searching.iter().flat_map(|&a| searches[a].live.iter()), step, config);
    let k = ((config.beam * 2).max(4) as i64).min(vocab);
    let (pool, exhausted) = step_pool(&scores, k);
    let mut pools: Vec<Vec<Candidate>> = vec![Vec::new(); searching.len()];
    let mut article_of_row = Vec::new();
    for (i, &(_, n)) in spans.iter().enumerate() {
        article_of_row.extend(std::iter::repeat_n(i, n));
    }
    for c in pool {
        let i = article_of_row[c.beam];
        pools[i].push(Candidate { beam: c.beam - spans[i].0, ..c });
    }
    for ((&a, &(from, n)), pool) in searching.iter().zip(spans).zip(pools) {
        let search = &searches[a];
        let kept = if search.pool_suffices(&pool, &exhausted[from..from + n], config, piece) {
            search.select(pool, config, piece)
        } else {
            search.select_widening(&scores, from as i64, config, piece)
        };
        searches[a].apply(kept, step, config, piece);
    }
}

/// Decodes with `next_log_probs(hypotheses, parents) -> one row of vocabulary log-probabilities
/// per hypothesis` (each hypothesis starts with `bos`; all have the same length; `parents[i]` is
/// the row of the previous call's hypotheses that hypothesis `i` extends, for a model that
/// caches per-hypothesis state); `piece` names a token, for trigram blocking and word counts.
/// Returns the finished hypotheses, best first. One article of [`beam_search_batch`].
pub fn beam_search(
    config: &BeamConfig,
    mut next_log_probs: impl FnMut(&[Vec<i64>], &[usize]) -> Vec<Vec<f64>>,
    piece: impl Fn(i64) -> String,
) -> Vec<Hypothesis> {
    let next = |seqs: &[Vec<i64>], parents: &[usize]| -> Tensor {
        let rows = next_log_probs(seqs, parents);
        let vocab = rows.first().map_or(0, Vec::len) as i64;
        Tensor::from_slice(&rows.concat()).view([rows.len() as i64, vocab])
    };
    beam_search_batch(config, 1, next, piece).pop().expect("one article")
}

/// Beam search over `articles` articles at once, each with its own beam, stopping rule and
/// finished list; an article whose search is over leaves the batch. `next_log_probs(hypotheses,
/// parents)` gets the live hypotheses of every article still searching, article after article,
/// and returns their next-token log-probabilities [hypotheses, vocab] (any float kind, any
/// device); `parents[i]` is the row of the previous call that hypothesis `i` extends, and in the
/// first call (one `bos` row per article) the article's index. Each article's result is what
/// [`beam_search`] finds for it alone: best first.
pub(crate) fn beam_search_batch(
    config: &BeamConfig,
    articles: usize,
    mut next_log_probs: impl FnMut(&[Vec<i64>], &[usize]) -> Tensor,
    piece: impl Fn(i64) -> String,
) -> Vec<Vec<Hypothesis>> {
    let start = || Search {
        live: vec![Live::new(vec![config.bos], 0, 0.0, config, &piece)],
        finished: Vec::new(),
        done: false,
    };
    let mut searches: Vec<Search> = (0..articles).map(|_| start()).collect();
    // Where each article's rows began in the previous call (its index before the first).
    let mut offsets: Vec<usize> = (0..articles).collect();
    for step in 0..config.max_length {
        let searching: Vec<usize> = (0..articles).filter(|&a| !searches[a].done).collect();
        if searching.is_empty() {
            break;
        }
        let (mut seqs, mut parents, mut spans) = (Vec::new(), Vec::new(), Vec::new());
        for &a in &searching {
            spans.push((seqs.len(), searches[a].live.len()));
            for h in &searches[a].live {
                seqs.push(h.tokens.clone());
                parents.push(offsets[a] + h.parent);
            }
        }
        let rows = next_log_probs(&seqs, &parents);
        count(1, 0);
        advance_all(&mut searches, &searching, &spans, rows, step, config, &piece);
        for (&a, &(from, _)) in searching.iter().zip(&spans) {
            offsets[a] = from;
        }
    }
    searches
        .into_iter()
        .map(|mut s| {
            s.finished.sort_by(|a, b| b.score.total_cmp(&a.score));
            s.finished
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn the_threshold_floor_fits_every_score_dtype() {
        for kind in [Kind::BFloat16, Kind::Half, Kind::Float, Kind::Double] {
            let scores = Tensor::from_slice(&[f64::NEG_INFINITY, -1.5]).to_kind(kind);
            // f32's lowest in a bf16 tensor is what libtorch refused ("cannot be converted ...
            // without overflow"); the dtype's own lowest finite value is taken.
            let floored = scores.clamp_min(lowest_finite(kind)).to_kind(Kind::Double);
            let values = Vec::<f64>::try_from(&floored).unwrap();
            assert!(values[0].is_finite() && values[0] < -1e4 && values[1] == -1.5, "{kind:?}: {values:?}");
        }
        let refused = indolm_torch::device::torch_errors::catch(|| {
            Tensor::from_slice(&[-1.0f32]).to_kind(Kind::BFloat16).clamp_min(-(f32::MAX as f64))
        });
        assert!(refused.is_err(), "the old floor was expected to overflow bf16");
    }

    // A vocabulary of six: 0 pad, 1 bos, 2 eos, 3 "a", 4 "b", 5 "c".
    const VOCAB: usize = 6;
    const BOS: i64 = 1;
    const EOS: i64 = 2;
    const A: i64 = 3;
    const B: i64 = 4;
    const C: i64 = 5;

    fn piece(t: i64) -> String {
        ["<pad>", "<bos>", "<eos>", "a", "b", "c"][t as usize].to_string()
    }

    fn config(beam: usize, min_length: usize, max_length: usize, alpha: f64, block_trigrams: bool) -> BeamConfig {
        BeamConfig { beam, min_length, max_length, alpha, block_trigrams, bos: BOS, eos: EOS, ..BeamConfig::default() }
    }

    type Table = HashMap<Vec<i64>, Vec<f64>>;
    /// (prefix, the tokens it allows with their log-probabilities).
    type Row<'a> = (&'a [i64], &'a [(i64, f64)]);
    /// Each call of the model: (hypotheses, parents).
    type Calls = Vec<(Vec<Vec<i64>>, Vec<usize>)>;

    /// A "model" as a table: prefix → the log-probabilities of the tokens it allows; every
    /// other token, and every prefix not listed, is impossible (−∞).
    fn table(rows: &[Row]) -> Table {
        rows.iter()
            .map(|(prefix, entries)| {
                let mut row = vec![f64::NEG_INFINITY; VOCAB];
                for &(t, lp) in entries.iter() {
                    row[t as usize] = lp;
                }
                (prefix.to_vec(), row)
            })
            .collect()
    }

    /// The finished hypotheses, and each call's (hypotheses, parents).
    fn run(config: &BeamConfig, model: &Table) -> (Vec<Hypothesis>, Calls) {
        let mut calls = Vec::new();
        let found = beam_search(
            config,
            |seqs: &[Vec<i64>], parents: &[usize]| {
                calls.push((seqs.to_vec(), parents.to_vec()));
                seqs.iter().map(|s| model.get(s).cloned().unwrap_or_else(|| vec![f64::NEG_INFINITY; VOCAB])).collect()
            },
            piece,
        );
        (found, calls)
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn ties_past_the_k_taken_are_found_again_and_a_step_reads_once() {
        // Ten tokens: 0 pad, 1 bos, 2 eos, 3..=9 words. After bos the seven words tie, and a
        // beam of 1 takes k = 4 a row: three tied words lie past the k taken, and the smallest
        // token (3) must still win, as a full sort ranks them.
        let row = |allowed: &[(i64, f64)]| {
            let mut r = vec![f64::NEG_INFINITY; 10];
            for &(t, lp) in allowed {
                r[t as usize] = lp;
            }
            r
        };
        let tied: Vec<(i64, f64)> = (3..10).map(|t| (t, -1.0)).collect();
        let cfg = config(1, 0, 5, 0.0, false);
        let before = decoding_reads();
        let found = beam_search(
            &cfg,
            |seqs: &[Vec<i64>], _: &[usize]| {
                seqs.iter().map(|s| if s.len() == 1 { row(&tied) } else { row(&[(EOS, -0.5), (4, -2.0)]) }).collect()
            },
            |t| format!("w{t}"),
        );
        let after = decoding_reads();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].tokens, vec![3]);
        assert!(close(found[0].log_prob, -1.5), "{found:?}");
        // Two steps: the tied one reads three times (its k best, the tied positions, their
        // values), the other once.
        assert_eq!((after.steps - before.steps, after.reads - before.reads), (2, 4));
    }

    #[test]
    fn gnmt_length_penalty_values() {
        // ((5 + length) / 6)^α: 1 at length 1 and at α 0; growing with length for α > 0.
        for alpha in [0.0, 0.6, 1.0, 2.0] {
            assert!(close(length_penalty(1, alpha), 1.0));
        }
        assert!(close(length_penalty(40, 0.0), 1.0));
        assert!(close(length_penalty(13, 0.5), 3f64.sqrt()));
        assert!(close(length_penalty(19, 0.6), 4f64.powf(0.6)));
        assert!(close(length_penalty(2, 1.0), 7.0 / 6.0));
        assert!(length_penalty(10, 0.6) < length_penalty(11, 0.6));
    }

    #[test]
    fn word_pieces_and_trigram_edges() {
        assert!(words(&[]).is_empty());
        let w = |ps: &[&str]| words(&ps.iter().map(|p| p.to_string()).collect::<Vec<_>>());
        assert_eq!(w(&["a", "##b", "##c", "d"]), vec!["abc", "d"]);
        // A continuation with nothing before it stays a word of its own, prefix and all.
        assert_eq!(w(&["##x", "a"]), vec!["##x", "a"]);
        let s = |ws: &[&str]| ws.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        // Three words hold one trigram: nothing earlier to repeat.
        assert!(!repeats_trigram(&s(&["a", "a", "a"])));
        // Overlapping occurrences count: "a a a" at 0 and at 1.
        assert!(repeats_trigram(&s(&["a", "a", "a", "a"])));
        // "c a b" never occurred before (only "a b c", "b c a").
        assert!(!repeats_trigram(&s(&["a", "b", "c", "a", "b"])));
    }

    #[test]
    fn finished_hypotheses_the_stop_rule_and_parents() {
        let model = table(&[
            (&[BOS], &[(A, -0.1), (B, -0.5), (EOS, -5.0)]),
            (&[BOS, A], &[(EOS, -0.7), (C, -3.0)]),
            (&[BOS, B], &[(EOS, -1.0), (C, -0.1)]),
            (&[BOS, B, C], &[(EOS, -1.0), (A, -2.0)]),
        ]);
        // Step 1 keeps "a" (−0.1) and "b" (−0.5). Step 2's best are "b c" (−0.6) and "a" + eos
        // (−0.8): the latter finishes, "b c" lives on as the only hypothesis, continuing row 1.
        // Step 3's best ends ("b c" + eos, −1.6): the search stops, and "b c a" (−2.6) is dropped.
        let (found, calls) = run(&config(2, 0, 10, 1.0, false), &model);
        let tokens: Vec<&[i64]> = found.iter().map(|h| h.tokens.as_slice()).collect();
        assert_eq!(tokens, vec![&[A][..], &[B, C][..]]);
        assert!(close(found[0].log_prob, -0.8) && close(found[1].log_prob, -1.6), "{found:?}");
        // Scores divide by the penalty at the length reached, eos included: α 1 gives
        // −0.8 / (7/6) and −1.6 / (8/6).
        assert!(close(found[0].score, -0.8 * 6.0 / 7.0) && close(found[1].score, -1.2), "{found:?}");
        let seqs: Vec<Vec<Vec<i64>>> = calls.iter().map(|c| c.0.clone()).collect();
        let parents: Vec<Vec<usize>> = calls.iter().map(|c| c.1.clone()).collect();
        assert_eq!(seqs, vec![vec![vec![BOS]], vec![vec![BOS, A], vec![BOS, B]], vec![vec![BOS, B, C]]]);
        assert_eq!(parents, vec![vec![0], vec![0, 0], vec![1]]);
    }

    #[test]
    fn the_last_step_finishes_what_it_keeps_even_below_the_minimum_length() {
        // eos would be the likeliest token, but 5 words are needed and only 2 tokens allowed.
        let model = table(&[
            (&[BOS], &[(EOS, 0.0), (A, -0.1), (B, -0.2)]),
            (&[BOS, A], &[(EOS, 0.0), (A, -0.1), (B, -0.5)]),
            (&[BOS, B], &[(EOS, 0.0), (A, -0.3), (B, -1.0)]),
        ]);
        let (found, calls) = run(&config(2, 5, 2, 0.0, false), &model);
        let got: Vec<(Vec<i64>, f64)> = found.iter().map(|h| (h.tokens.clone(), h.log_prob)).collect();
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].0.clone(), got[1].0.clone()), (vec![A, A], vec![B, A]));
        assert!(close(got[0].1, -0.2) && close(got[1].1, -0.5), "{got:?}");
        assert_eq!(calls.len(), 2, "max_length tokens, one call each");
    }

    #[test]
    fn ties_go_to_the_earlier_row_then_the_smaller_token() {
        let model =
            table(&[(&[BOS], &[(A, -1.0), (B, -1.0)]), (&[BOS, A], &[(EOS, -1.0)]), (&[BOS, B], &[(EOS, -1.0)])]);
        let (one, _) = run(&config(1, 0, 10, 0.0, false), &model);
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].tokens, vec![A]);
        let (two, _) = run(&config(2, 0, 10, 0.0, false), &model);
        let tokens: Vec<Vec<i64>> = two.iter().map(|h| h.tokens.clone()).collect();
        assert_eq!(tokens, vec![vec![A], vec![B]]);
    }

    #[test]
    fn impossible_candidates_are_never_kept() {
        // A beam of 3 with one possible token keeps one hypothesis.
        let model = table(&[(&[BOS], &[(A, -1.0)]), (&[BOS, A], &[(EOS, -1.0)])]);
        let (found, calls) = run(&config(3, 0, 10, 0.0, false), &model);
        assert_eq!(calls.iter().map(|c| c.0.len()).collect::<Vec<_>>(), vec![1, 1]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].tokens, vec![A]);
        assert!(close(found[0].log_prob, -2.0));
        // Nothing possible at all: no hypothesis, after one call.
        let (found, calls) = run(&config(3, 0, 10, 0.0, false), &table(&[]));
        assert!(found.is_empty());
        assert_eq!(calls.len(), 1);
    }

    #[test]
    fn a_blocked_trigram_falls_back_to_the_next_candidate_and_eos_is_never_blocked() {
        // The model wants "a b c a b c": the second "c" repeats "a b c" and is blocked, so the
        // unlikely eos ends the hypothesis instead.
        let model = table(&[
            (&[BOS], &[(A, -0.1)]),
            (&[BOS, A], &[(B, -0.1)]),
            (&[BOS, A, B], &[(C, -0.1)]),
            (&[BOS, A, B, C], &[(A, -0.1)]),
            (&[BOS, A, B, C, A], &[(B, -0.1)]),
            (&[BOS, A, B, C, A, B], &[(C, -0.1), (EOS, -5.0)]),
            (&[BOS, A, B, C, A, B, C], &[(EOS, -0.1)]),
        ]);
        let (blocked, _) = run(&config(1, 0, 20, 0.0, true), &model);
        assert_eq!(blocked[0].tokens, vec![A, B, C, A, B]);
        assert!(close(blocked[0].log_prob, -5.5));
        let (free, _) = run(&config(1, 0, 20, 0.0, false), &model);
        assert_eq!(free[0].tokens, vec![A, B, C, A, B, C]);
    }

    #[test]
    fn a_batch_searches_each_article_as_alone_and_finished_ones_leave() {
        // Article 0 ends after one token; article 1 takes three.
        let short = table(&[(&[BOS], &[(A, -0.1), (EOS, -3.0)]), (&[BOS, A], &[(EOS, -0.1), (B, -2.0)])]);
        let long = table(&[
            (&[BOS], &[(B, -0.2), (C, -0.3)]),
            (&[BOS, B], &[(C, -0.1), (EOS, -4.0)]),
            (&[BOS, C], &[(A, -0.1)]),
            (&[BOS, B, C], &[(EOS, -0.1)]),
            (&[BOS, C, A], &[(EOS, -2.0)]),
        ]);
        let cfg = config(2, 0, 10, 0.0, false);
        let (alone_short, _) = run(&cfg, &short);
        let (alone_long, _) = run(&cfg, &long);
        let models = [&short, &long];
        let mut calls: Calls = Vec::new();
        // Each call's rows come article after article; the owner of a row follows its parent.
        let mut owner_of_rows: Vec<usize> = vec![0, 1];
        let found = beam_search_batch(
            &cfg,
            2,
            |seqs: &[Vec<i64>], parents: &[usize]| {
                calls.push((seqs.to_vec(), parents.to_vec()));
                owner_of_rows = parents.iter().map(|&p| owner_of_rows[p]).collect();
                let rows: Vec<f64> = seqs
                    .iter()
                    .zip(&owner_of_rows)
                    .flat_map(|(s, &a)| models[a].get(s).cloned().unwrap_or_else(|| vec![f64::NEG_INFINITY; VOCAB]))
                    .collect();
                Tensor::from_slice(&rows).view([seqs.len() as i64, VOCAB as i64]).to_kind(Kind::Float)
            },
            piece,
        );
        // The rows came as f32: the same hypotheses, scores within f32 rounding.
        for (batched, alone) in found.iter().zip([&alone_short, &alone_long]) {
            assert_eq!(
                batched.iter().map(|h| &h.tokens).collect::<Vec<_>>(),
                alone.iter().map(|h| &h.tokens).collect::<Vec<_>>()
            );
            assert!(batched.iter().zip(alone.iter()).all(|(b, a)| (b.score - a.score).abs() < 1e-6));
        }
        // First call: one bos row per article, parents the articles; then article 0 has two
        // rows ("a", and "eos" finished so not live: one row) and article 1 two; then only 1.
        let parents: Vec<Vec<usize>> = calls.iter().map(|c| c.1.clone()).collect();
        assert_eq!(parents[0], vec![0, 1]);
        assert_eq!(calls[1].0, vec![vec![BOS, A], vec![BOS, B], vec![BOS, C]]);
        assert_eq!(parents[1], vec![0, 1, 1]);
        assert!(calls[2..].iter().all(|c| c.0.iter().all(|s| s[1] != A)), "article 0 left the batch: {calls:?}");
    }
}
