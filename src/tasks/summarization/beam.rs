//! Beam search as PreSumm decodes for BertAbs: candidates ranked by cumulative
//! log-probability divided by the GNMT length penalty ((5 + length) / 6)^α (Wu et al. 2016);
//! end-of-sequence forbidden until the hypothesis has `min_length` words and `min_sentences`
//! sentences (the Liputan6 paper's minimum: two sentences, 15 words); with trigram blocking, a
//! candidate whose last word trigram (word pieces joined at `##`) already occurred is dropped.
//! Each step keeps the best `beam` candidates; those that end go to the finished list, and the
//! search stops when the best candidate of a step ends (PreSumm's end condition) or at
//! `max_length` tokens. The model enters as a function from the live hypotheses to their
//! next-token log-probabilities.
use std::cmp::Ordering;
use std::collections::HashSet;

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

/// Decodes with `next_log_probs(hypotheses, parents) -> one row of vocabulary log-probabilities
/// per hypothesis` (each hypothesis starts with `bos`; all have the same length; `parents[i]` is
/// the row of the previous call's hypotheses that hypothesis `i` extends, for a model that
/// caches per-hypothesis state); `piece` names a token, for trigram blocking and word counts.
/// Returns the finished hypotheses, best first.
pub fn beam_search(
    config: &BeamConfig,
    mut next_log_probs: impl FnMut(&[Vec<i64>], &[usize]) -> Vec<Vec<f64>>,
    piece: impl Fn(i64) -> String,
) -> Vec<Hypothesis> {
    let mut live = vec![Live::new(vec![config.bos], 0, 0.0, config, &piece)];
    let mut finished: Vec<Hypothesis> = Vec::new();
    for step in 0..config.max_length {
        let seqs: Vec<Vec<i64>> = live.iter().map(|h| h.tokens.clone()).collect();
        let parents: Vec<usize> = live.iter().map(|h| h.parent).collect();
        let rows = next_log_probs(&seqs, &parents);
        let lp = length_penalty(step + 1, config.alpha);
        let mut pool: Vec<Candidate> = Vec::new();
        for (b, (hyp, row)) in live.iter().zip(&rows).enumerate() {
            for (token, &log_p) in row.iter().enumerate() {
                let token = token as i64;
                if token == config.eos && !hyp.may_end {
                    continue;
                }
                let log_prob = hyp.log_prob + log_p;
                pool.push(Candidate { score: log_prob / lp, log_prob, beam: b, token });
            }
        }
        let blocked = |c: &Candidate| {
            if !config.block_trigrams || c.token == config.eos {
                return false;
            }
            let mut w = live[c.beam].words.clone();
            push_piece(&mut w, &piece(c.token));
            repeats_trigram(&w)
        };
        // The best `beam` unblocked candidates, sorting only as much of the pool as needed.
        let mut kept: Vec<Candidate> = Vec::new();
        let (mut start, mut window) = (0, (config.beam * 4).max(8));
        while kept.len() < config.beam && start < pool.len() {
            let end = (start + window).min(pool.len());
            if end < pool.len() {
                pool[start..].select_nth_unstable_by(end - start - 1, best_first);
            }
            pool[start..end].sort_by(best_first);
            for c in &pool[start..end] {
                if kept.len() < config.beam && !c.score.is_infinite() && !blocked(c) {
                    kept.push(*c);
                }
            }
            start = end;
            window *= 4;
        }
        let top_ends = kept.first().is_some_and(|c| c.token == config.eos);
        let last_step = step + 1 == config.max_length;
        let mut next = Vec::new();
        for c in kept {
            let parent = &live[c.beam].tokens;
            if c.token == config.eos {
                finished.push(Hypothesis { tokens: parent[1..].to_vec(), log_prob: c.log_prob, score: c.score });
            } else {
                let mut tokens = parent.clone();
                tokens.push(c.token);
                if last_step || top_ends {
                    // Cut off at the maximum length, or the search ends here: these count as
                    // finished only when they are the last word of the search.
                    if last_step {
                        finished.push(Hypothesis {
                            tokens: tokens[1..].to_vec(),
                            log_prob: c.log_prob,
                            score: c.score,
                        });
                    }
                } else {
                    next.push(Live::new(tokens, c.beam, c.log_prob, config, &piece));
                }
            }
        }
        live = next;
        if top_ends || live.is_empty() {
            break;
        }
    }
    finished.sort_by(|a, b| b.score.total_cmp(&a.score));
    finished
}
