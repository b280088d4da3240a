//! Beam search as PreSumm decodes (for BertAbs): beams ranked by cumulative log-probability
//! divided by the GNMT length penalty ((5 + length) / 6)^α (Wu et al. 2016); end-of-sequence
//! forbidden while shorter than `min_length`; with trigram blocking, a hypothesis whose last
//! word trigram (word pieces joined at `##`) already occurred is dropped. The model enters as a
//! function from the live hypotheses to their next-token log-probabilities.
use std::collections::HashSet;

#[derive(Debug, Clone, PartialEq)]
pub struct BeamConfig {
    pub beam: usize,
    pub min_length: usize,
    pub max_length: usize,
    pub alpha: f64,
    pub block_trigrams: bool,
    pub bos: i64,
    pub eos: i64,
}

impl Default for BeamConfig {
    /// PreSumm's and the Liputan6 paper's decoding: beam 5, α 0.6, 15 to 150 tokens.
    fn default() -> Self {
        BeamConfig { beam: 5, min_length: 15, max_length: 150, alpha: 0.6, block_trigrams: true, bos: 1, eos: 2 }
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
        match (p.strip_prefix("##"), out.last_mut()) {
            (Some(rest), Some(last)) => last.push_str(rest),
            _ => out.push(p.clone()),
        }
    }
    out
}

/// Whether the last word trigram occurred earlier in the hypothesis.
pub fn repeats_trigram(words: &[String]) -> bool {
    if words.len() < 4 {
        return false;
    }
    let n = words.len();
    let last = (&words[n - 3], &words[n - 2], &words[n - 1]);
    let earlier: HashSet<(&String, &String, &String)> = words[..n - 1].windows(3).map(|w| (&w[0], &w[1], &w[2])).collect();
    earlier.contains(&last)
}

#[derive(Debug, Clone, PartialEq)]
pub struct Hypothesis {
    /// Tokens after `bos`, `eos` excluded.
    pub tokens: Vec<i64>,
    pub log_prob: f64,
    /// `log_prob` / length penalty.
    pub score: f64,
}

/// Decodes with `next_log_probs(hypotheses) -> one row of vocabulary log-probabilities per
/// hypothesis` (each hypothesis starts with `bos`); `piece` names a token, for trigram blocking.
/// Returns the finished hypotheses, best first.
pub fn beam_search(config: &BeamConfig, mut next_log_probs: impl FnMut(&[Vec<i64>]) -> Vec<Vec<f64>>, piece: impl Fn(i64) -> String) -> Vec<Hypothesis> {
    let mut live: Vec<(Vec<i64>, f64)> = vec![(vec![config.bos], 0.0)];
    let mut finished: Vec<Hypothesis> = Vec::new();
    for step in 0..config.max_length {
        let seqs: Vec<Vec<i64>> = live.iter().map(|(s, _)| s.clone()).collect();
        let rows = next_log_probs(&seqs);
        let length = step + 1;
        let lp = length_penalty(length, config.alpha);
        let mut candidates: Vec<(f64, f64, usize, i64)> = Vec::new(); // (score, log_prob, beam, token)
        for (b, ((seq, cum), row)) in live.iter().zip(&rows).enumerate() {
            for (token, &lpr) in row.iter().enumerate() {
                let token = token as i64;
                if token == config.eos && length <= config.min_length {
                    continue;
                }
                let total = cum + lpr;
                if config.block_trigrams && token != config.eos {
                    let mut pieces: Vec<String> = seq[1..].iter().map(|&t| piece(t)).collect();
                    pieces.push(piece(token));
                    if pieces.len() > 3 && repeats_trigram(&words(&pieces)) {
                        continue;
                    }
                }
                candidates.push((total / lp, total, b, token));
            }
        }
        candidates.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.2.cmp(&b.2)).then(a.3.cmp(&b.3)));
        let mut next = Vec::new();
        for (score, total, b, token) in candidates.into_iter().take(config.beam) {
            if token == config.eos {
                finished.push(Hypothesis { tokens: live[b].0[1..].to_vec(), log_prob: total, score });
            } else {
                let mut seq = live[b].0.clone();
                seq.push(token);
                next.push((seq, total));
            }
        }
        live = next;
        if live.is_empty() || finished.len() >= config.beam {
            break;
        }
    }
    if finished.is_empty() {
        let lp = |n: usize| length_penalty(n, config.alpha);
        finished = live.into_iter().map(|(s, total)| Hypothesis { score: total / lp(s.len() - 1), tokens: s[1..].to_vec(), log_prob: total }).collect();
    }
    finished.sort_by(|a, b| b.score.total_cmp(&a.score));
    finished
}
