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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

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
}
