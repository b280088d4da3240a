//! Pseudo-log-likelihood scoring of sentences by a masked LM (Salazar et al. 2020): every
//! scored token is masked in turn and PLL = Σ ln p(token | rest). PLL-word-l2r (Kauf & Ivanova
//! 2023, minicons' `within_word_l2r`) masks, with each piece, the later pieces of its word. All
//! masked copies of many sentences are batched: rows are sorted by length, padded, packed under
//! a token budget, and the vocabulary projection is computed only at each row's masked position.
//! Each score also counts the scored tokens the model ranks first (rank-1 accuracy, a fluency
//! control). The ranks of a data-parallel run share the batches ([`PllScorer::score_shared`]).
use indolm_torch::data::tokenizer::TextTokenizer;
use indolm_torch::device::{read_back, to_device_queued};
use indolm_torch::error::{Error, Result};
use indolm_torch::hooks::Share;
use indolm_torch::model::BertForMaskedLM;
use tch::{Device, Kind};

/// One sentence to score: its ids (with `[CLS]`/`[SEP]`) and the positions to mask.
#[derive(Debug, Clone)]
pub struct ScoringInput {
    /// Token ids, `[CLS]` and `[SEP]` included.
    pub ids: Vec<i64>,
    /// Positions in `ids` masked in turn and scored.
    pub positions: Vec<usize>,
    /// Per scored position, the other positions masked with it (empty: none; PLL-word-l2r:
    /// the later pieces of the same word). Empty when no position masks others.
    pub also_masked: Vec<Vec<usize>>,
}

impl ScoringInput {
    /// Every position in `positions` masked alone.
    pub fn one_at_a_time(ids: Vec<i64>, positions: Vec<usize>) -> Self {
        ScoringInput { ids, positions, also_masked: Vec::new() }
    }

    /// The positions masked with the `k`-th scored one.
    fn masked_with(&self, k: usize) -> &[usize] {
        self.also_masked.get(k).map_or(&[], Vec::as_slice)
    }
}

/// PLL of one sentence over its scored tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct SentenceScore {
    /// Σ ln p(token | rest) over the scored tokens (natural log, ≤ 0).
    pub pll: f64,
    /// Tokens scored (N).
    pub tokens: usize,
    /// Scored tokens the model ranks first (its argmax is the token).
    pub correct: usize,
}

impl SentenceScore {
    /// The mean over the scored tokens, PLL / N (AUL's and AULA's score).
    pub fn mean(&self) -> f64 {
        self.pll / self.tokens.max(1) as f64
    }

    /// Pseudo-perplexity exp(−PLL / N) (RuBia's per-sentence form).
    pub fn pppl(&self) -> f64 {
        (-self.pll / self.tokens.max(1) as f64).exp()
    }

    /// Refuses a non-finite score of `sentence` (`what`: where it comes from, e.g. "pair 3 of
    /// jv"): a model whose weights or configuration give NaN or infinite log-probabilities would
    /// otherwise have every comparison decided as if it were a number (NaN is never lower, so
    /// every such pair would count as anti-stereotypical) and its reports written with nulls.
    pub(crate) fn require_finite(&self, what: &str, sentence: &str) -> Result<()> {
        if self.pll.is_finite() {
            return Ok(());
        }
        Err(Error::data(
            what,
            format!(
                "the model gave the sentence {} a non-finite score ({}): its weights or config.json produce NaN or infinite log-probabilities (a diverged checkpoint, an impossible configuration value); nothing was written",
                indolm_core::files::quoted(sentence),
                self.pll
            ),
        ))
    }
}

/// Scores sentences with a masked LM: every (sentence, position) row batched under a token budget.
pub struct PllScorer<'a> {
    /// The masked LM.
    pub model: &'a BertForMaskedLM,
    /// Its tokenizer: encodes sentences, supplies `[PAD]` and `[MASK]`.
    pub tokenizer: &'a TextTokenizer,
    /// Where the forward passes run.
    pub device: Device,
    /// Padded tokens per forward pass.
    pub token_budget: usize,
    /// Longest input in tokens (the model's positions).
    pub max_len: usize,
    /// The ranks that share the scoring ([`PllScorer::score_shared`]); none: this process
    /// scores everything.
    pub share: Option<&'a dyn Share>,
}

impl<'a> PllScorer<'a> {
    /// A scorer with a token budget suited to the device (4,096 padded tokens per forward
    /// pass on CPU, 65,536 on CUDA).
    pub fn new(model: &'a BertForMaskedLM, tokenizer: &'a TextTokenizer, device: Device) -> Self {
        let token_budget = if device.is_cuda() { 65_536 } else { 4_096 };
        PllScorer { model, tokenizer, device, token_budget, max_len: model.max_positions(), share: None }
    }

    /// This scorer with its batches shared among the ranks of `share`.
    pub(crate) fn shared(self, share: &'a dyn Share) -> Self {
        PllScorer { share: Some(share), ..self }
    }

    /// The standard input: every token but `[CLS]` and `[SEP]` is scored.
    pub fn full_input(&self, text: &str) -> Result<ScoringInput> {
        let ids: Vec<i64> = self.tokenizer.encode(text)?.into_iter().map(i64::from).collect();
        if ids.len() <= 2 {
            return Err(Error::data(
                "PLL scoring",
                format!("the sentence {} has no tokens", indolm_core::files::quoted(text)),
            ));
        }
        if ids.len() > self.max_len {
            return Err(Error::data(
                "PLL scoring",
                format!(
                    "the sentence {} has {} tokens, more than the model's {}",
                    indolm_core::files::quoted(text),
                    ids.len(),
                    self.max_len
                ),
            ));
        }
        let positions = (1..ids.len() - 1).collect();
        Ok(ScoringInput::one_at_a_time(ids, positions))
    }

    /// PLL-word-l2r's input: every token but `[CLS]` and `[SEP]` scored, each with the later
    /// pieces of its word masked too (words as the tokenizer's pre-tokenizer splits them,
    /// transformers' `word_ids()`).
    pub fn word_l2r_input(&self, text: &str) -> Result<ScoringInput> {
        let mut input = self.full_input(text)?;
        let (_, words) = self.tokenizer.encode_with_word_ids(text)?;
        input.also_masked = input
            .positions
            .iter()
            .map(|&p| match words[p] {
                Some(w) => (p + 1..words.len()).filter(|&q| words[q] == Some(w)).collect(),
                None => Vec::new(),
            })
            .collect();
        Ok(input)
    }

    /// Scores every input, in this process alone; rows (input, position) are batched by length.
    pub fn score(&self, inputs: &[ScoringInput]) -> Vec<SentenceScore> {
        let plan = RowPlan::new(inputs, self.token_budget);
        let mut values = vec![0.0; 2 * plan.rows.len()];
        for items in &plan.batches {
            self.score_into(inputs, &plan, items, &mut values);
        }
        plan.scores(inputs, &values)
    }

    /// [`PllScorer::score`] with the batches shared among the ranks of [`PllScorer::share`]:
    /// every rank plans the batches as one process does, scores its own, and the rows' values
    /// are combined exactly, then summed per input in the plan's order, so the scores are bit for
    /// bit one process's. Alone when there is no share.
    pub(crate) fn score_shared(&self, inputs: &[ScoringInput]) -> Result<Vec<SentenceScore>> {
        let Some(share) = self.share else { return Ok(self.score(inputs)) };
        let plan = RowPlan::new(inputs, self.token_budget);
        let mut values = vec![0.0; 2 * plan.rows.len()];
        for items in &plan.batches {
            if share.take(items.len()) {
                self.score_into(inputs, &plan, items, &mut values);
            }
        }
        share.combine(&mut values, "the PLL scores")?;
        Ok(plan.scores(inputs, &values))
    }

    /// Scores the rows `items` of `plan` (one batch) into `values`: at `2r` row `r`'s ln p, at
    /// `2r + 1` 1 when the model ranks the token first, else 0.
    fn score_into(&self, inputs: &[ScoringInput], plan: &RowPlan, items: &[usize], values: &mut [f64]) {
        let batch: Vec<(usize, usize)> = items.iter().map(|&r| plan.rows[r]).collect();
        let (log_probs, firsts) = self.score_rows(inputs, &batch);
        for ((&r, lp), first) in items.iter().zip(log_probs).zip(firsts) {
            values[2 * r] = lp;
            values[2 * r + 1] = f64::from(u8::from(first));
        }
    }

    /// ln p(original token) at the scored position of each row, and whether the model ranks
    /// that token first.
    fn score_rows(&self, inputs: &[ScoringInput], rows: &[(usize, usize)]) -> (Vec<f64>, Vec<bool>) {
        let width = rows.iter().map(|&(i, _)| inputs[i].ids.len()).max().unwrap_or(0);
        let n = rows.len();
        let mut ids = vec![self.tokenizer.special.pad; n * width];
        let mut mask = vec![0i64; n * width];
        let mut flat_positions = Vec::with_capacity(n);
        let mut targets = Vec::with_capacity(n);
        for (r, &(i, k)) in rows.iter().enumerate() {
            let src = &inputs[i].ids;
            let p = inputs[i].positions[k];
            ids[r * width..r * width + src.len()].copy_from_slice(src);
            mask[r * width..r * width + src.len()].iter_mut().for_each(|m| *m = 1);
            ids[r * width + p] = self.tokenizer.special.mask;
            for &q in inputs[i].masked_with(k) {
                ids[r * width + q] = self.tokenizer.special.mask;
            }
            flat_positions.push((r * width + p) as i64);
            targets.push(src[p]);
        }
        let shape = [n as i64, width as i64];
        tch::no_grad(|| {
            let ids = to_device_queued(&ids, &shape, self.device);
            let mask = to_device_queued(&mask, &shape, self.device);
            // Only the real tokens go through the encoder (rows of one batch differ in length).
            let lengths: Vec<usize> = rows.iter().map(|&(i, _)| inputs[i].ids.len()).collect();
            let packing = indolm_torch::model::bert::Packing::of_lengths(&lengths, width, self.device);
            let hidden = self.model.bert.forward_packed(&ids, None, &mask, &packing, false);
            let positions = to_device_queued(&flat_positions, &[n as i64], self.device);
            let logits = self.model.logits_at(&hidden, &positions);
            let targets = to_device_queued(&targets, &[n as i64, 1], self.device);
            let log_probs = logits.log_softmax(-1, Kind::Float);
            let lp = log_probs.gather(1, &targets, false).squeeze_dim(1);
            let first = log_probs.argmax(-1, false).eq_tensor(&targets.squeeze_dim(1));
            let [lp, first]: [Vec<f64>; 2] = read_back(&[lp, first]).try_into().expect("two rows");
            (lp, first.into_iter().map(|h| h == 1.0).collect())
        })
    }
}

/// The rows of a PLL scoring and their batches: a row (input, k) masks the input's k-th scored
/// position (and those masked with it); rows are batched by length under the token budget.
struct RowPlan {
    rows: Vec<(usize, usize)>,
    batches: Vec<Vec<usize>>,
}

impl RowPlan {
    fn new(inputs: &[ScoringInput], token_budget: usize) -> Self {
        let rows: Vec<(usize, usize)> =
            inputs.iter().enumerate().flat_map(|(i, inp)| (0..inp.positions.len()).map(move |k| (i, k))).collect();
        let lengths: Vec<usize> = rows.iter().map(|&(i, _)| inputs[i].ids.len()).collect();
        let batches = indolm_torch::data::batching::by_length(&lengths, token_budget);
        RowPlan { rows, batches }
    }

    /// Each input's score from its rows' values ([`PllScorer::score_into`]), added batch by
    /// batch in the plan's order.
    fn scores(&self, inputs: &[ScoringInput], values: &[f64]) -> Vec<SentenceScore> {
        let mut pll = vec![0.0f64; inputs.len()];
        let mut correct = vec![0usize; inputs.len()];
        for &r in self.batches.iter().flatten() {
            let i = self.rows[r].0;
            pll[i] += values[2 * r];
            correct[i] += usize::from(values[2 * r + 1] == 1.0);
        }
        inputs
            .iter()
            .zip(pll)
            .zip(correct)
            .map(|((inp, pll), correct)| SentenceScore { pll, tokens: inp.positions.len(), correct })
            .collect()
    }
}

/// The positions of tokens two id sequences share, as CrowS-Pairs finds them: the "equal"
/// blocks of Python's `difflib.SequenceMatcher` (no junk; inputs are short), in order.
pub fn shared_positions(a: &[i64], b: &[i64]) -> (Vec<usize>, Vec<usize>) {
    let mut blocks = Vec::new();
    matching_blocks(a, b, 0, a.len(), 0, b.len(), &mut blocks);
    blocks.sort_unstable();
    let mut pa = Vec::new();
    let mut pb = Vec::new();
    for (i, j, k) in blocks {
        pa.extend(i..i + k);
        pb.extend(j..j + k);
    }
    (pa, pb)
}

/// difflib's recursion: the longest matching block in a[alo..ahi] × b[blo..bhi] (earliest in
/// `a`, then in `b`, among the longest), then the same on both sides of it.
fn matching_blocks(
    a: &[i64],
    b: &[i64],
    alo: usize,
    ahi: usize,
    blo: usize,
    bhi: usize,
    out: &mut Vec<(usize, usize, usize)>,
) {
    let (mut best_i, mut best_j, mut best_k) = (alo, blo, 0);
    // run[j + 1] = length of the match ending at a[i], b[j].
    let mut prev = vec![0usize; bhi - blo + 1];
    for (i, ai) in a.iter().enumerate().take(ahi).skip(alo) {
        let mut cur = vec![0usize; bhi - blo + 1];
        for j in blo..bhi {
            if *ai == b[j] {
                let k = prev[j - blo] + 1;
                cur[j - blo + 1] = k;
                if k > best_k {
                    best_i = i + 1 - k;
                    best_j = j + 1 - k;
                    best_k = k;
                }
            }
        }
        prev = cur;
    }
    if best_k == 0 {
        return;
    }
    matching_blocks(a, b, alo, best_i, blo, best_j, out);
    out.push((best_i, best_j, best_k));
    matching_blocks(a, b, best_i + best_k, ahi, best_j + best_k, bhi, out);
}

/// CrowS-Pairs inputs for a pair: each sentence scored at the shared tokens only, the first
/// and last shared positions (`[CLS]`, `[SEP]`) skipped.
pub fn crows_inputs(tokenizer: &TextTokenizer, a: &str, b: &str) -> Result<(ScoringInput, ScoringInput)> {
    let ia: Vec<i64> = tokenizer.encode(a)?.into_iter().map(i64::from).collect();
    let ib: Vec<i64> = tokenizer.encode(b)?.into_iter().map(i64::from).collect();
    let (pa, pb) = shared_positions(&ia, &ib);
    let trim = |p: Vec<usize>| if p.len() >= 2 { p[1..p.len() - 1].to_vec() } else { Vec::new() };
    Ok((ScoringInput::one_at_a_time(ia, trim(pa)), ScoringInput::one_at_a_time(ib, trim(pb))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use indolm_torch::data::tokenizer::test_tokenizer;

    // Each case was checked against Python's
    // difflib.SequenceMatcher(None, a, b).get_matching_blocks().
    #[test]
    fn shared_positions_are_difflib_matching_blocks() {
        // Two blocks of two, (0, 0, 2) and (3, 3, 2): the first is the earliest of the longest.
        assert_eq!(shared_positions(&[1, 5, 6, 7, 2], &[1, 5, 9, 7, 2]), (vec![0, 1, 3, 4], vec![0, 1, 3, 4]));
        // An insertion in b: (0, 0, 2), (2, 4, 1).
        assert_eq!(shared_positions(&[1, 4, 2], &[1, 4, 8, 8, 2]), (vec![0, 1, 2], vec![0, 1, 4]));
        // Tokens that change order cannot all match: the longest block (2, 1, 2) first, then
        // (0, 0, 1) left of it and (4, 4, 1) right of it; 10 is left out on both sides.
        assert_eq!(shared_positions(&[2, 10, 11, 12, 3], &[2, 11, 12, 10, 3]), (vec![0, 2, 3, 4], vec![0, 1, 2, 4]));
        // Single-token blocks: (0, 0, 1), (1, 2, 1), (3, 3, 1).
        assert_eq!(shared_positions(&[1, 2, 3, 9], &[1, 3, 2, 9]), (vec![0, 1, 3], vec![0, 2, 3]));
        // Among equally long matches the earliest in b: (0, 1, 1).
        assert_eq!(shared_positions(&[7], &[5, 7, 7]), (vec![0], vec![1]));
        assert_eq!(shared_positions(&[1, 2], &[3, 4]), (vec![], vec![]));
        assert_eq!(shared_positions(&[], &[1]), (vec![], vec![]));
    }

    #[test]
    fn crows_inputs_score_the_shared_tokens_without_cls_and_sep() {
        let t = test_tokenizer(&["dia", "seorang", "dokter", "perawat", "hebat"]);
        // [CLS] dia seorang dokter hebat [SEP] vs [CLS] dia seorang perawat hebat [SEP]:
        // shared positions 0 1 2 4 5 in both; without the first and last: 1 2 4.
        let (a, b) = crows_inputs(&t, "dia seorang dokter hebat", "Dia seorang perawat hebat").unwrap();
        assert_eq!(a.ids, vec![2, 5, 6, 7, 9, 3]);
        assert_eq!(b.ids, vec![2, 5, 6, 8, 9, 3]);
        assert_eq!((a.positions, b.positions), (vec![1, 2, 4], vec![1, 2, 4]));
        // Sentences of different lengths: the shared tokens sit at different positions.
        let (a, b) = crows_inputs(&t, "dokter hebat", "dia seorang dokter hebat").unwrap();
        assert_eq!((a.positions, b.positions), (vec![1, 2], vec![3, 4]));
    }

    #[test]
    fn pseudo_perplexity_is_exp_of_the_mean_negative_pll() {
        let s = SentenceScore { pll: -6.0, tokens: 3, correct: 0 };
        assert!((s.pppl() - 2f64.exp()).abs() < 1e-12);
        assert_eq!(SentenceScore { pll: 0.0, tokens: 5, correct: 0 }.pppl(), 1.0);
    }
}
