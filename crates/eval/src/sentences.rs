//! `eval pll`'s scoring of a text file: each non-blank line scored by a masked LM (PLL, CrowS'
//! shared tokens for two tab-separated sentences, PLL-word-l2r, or with nothing masked: AUL,
//! AULA) or by a causal LM (its log-likelihood after the prefix token, as lm-evaluation-harness
//! scores CrowS-Pairs). Every score is checked finite, and every error names the file and line;
//! the convention and the time taken go to stderr. Printing the scores is the command's.
use crate::aul::UnmaskedScorer;
use crate::causal::{CausalScore, CausalScorer, Convention};
use crate::pll::{crows_inputs, PllScorer, ScoringInput, SentenceScore};
use crate::scorer::LoadedLm;
use indolm_core::files::read_to_string;
use indolm_torch::error::{Error, Result};
use indolm_torch::model::decoder::CausalLm;
use indolm_torch::model::model_dir::LoadedModel;
use std::path::Path;
use tch::Device;

/// How each line is scored (`eval pll --metric`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineMetric {
    /// Every token, one masked at a time (a causal LM: its log-likelihood).
    Pll,
    /// Only the tokens the two tab-separated sentences of a line share.
    Crows,
    /// Every token, the later pieces of its word masked too.
    PllWordL2r,
    /// Nothing masked: the mean log-probability.
    Aul,
    /// Nothing masked: weighted by the attention each position receives.
    Aula,
}

/// A masked LM's scores: each scored sentence with the line it came from.
pub struct MaskedLines {
    /// (line number, sentence) of each score.
    pub labels: Vec<(usize, String)>,
    /// The scores.
    pub scores: Vec<SentenceScore>,
    /// The warning every output carries (a randomly initialised MLM head allowed).
    pub warning: Option<String>,
}

/// A causal LM's scores, one per line.
pub struct CausalLines {
    /// The lines.
    pub sentences: Vec<String>,
    /// Their scores.
    pub scores: Vec<CausalScore>,
    /// How they were scored.
    pub convention: Convention,
}

/// The scores of a file's lines, by the kind of model.
pub enum ScoredLines {
    /// By a masked LM.
    Masked(MaskedLines),
    /// By a causal LM.
    Causal(CausalLines),
}

/// Scores every non-blank line of `text` with the model loaded from `model` under `metric`; a
/// masked LM whose MLM head was initialised randomly is refused unless `allow_random_head`.
pub fn score_lines(
    lm: &LoadedLm,
    model: &Path,
    text: &Path,
    metric: LineMetric,
    allow_random_head: bool,
    device: Device,
) -> Result<ScoredLines> {
    let loaded = match lm {
        LoadedLm::Causal(causal) => {
            for note in lm.notes() {
                eprintln!("note: {note}");
            }
            return causal_lines(causal, model, text, metric).map(ScoredLines::Causal);
        }
        LoadedLm::Masked(loaded) => loaded,
        LoadedLm::Seq2Seq(_) => {
            return Err(Error::argument(
                "--model",
                format!(
                    "{} ({}): sentence scores are defined for masked and causal LMs only",
                    lm.describe(),
                    model.display()
                ),
            ))
        }
    };
    let warning = lm.require_trained_head(model, allow_random_head)?;
    let scorer = PllScorer::new(&loaded.model, &loaded.tokenizer, device);
    let content = read_to_string(text)?;
    let numbered = sentences(text, &content)?;
    if matches!(metric, LineMetric::Aul | LineMetric::Aula) {
        let lines = unmasked(loaded, text, &numbered, metric, device)?;
        return Ok(ScoredLines::Masked(MaskedLines { warning, ..lines }));
    }
    let mut inputs: Vec<ScoringInput> = Vec::new();
    // Each scored sentence with the line it came from.
    let mut labels: Vec<(usize, String)> = Vec::new();
    for &(n, line) in &numbered {
        let at = |e| at_line(text, n, e);
        match metric {
            LineMetric::Pll => {
                inputs.push(scorer.full_input(line).map_err(at)?);
                labels.push((n, line.to_string()));
            }
            LineMetric::PllWordL2r => {
                inputs.push(scorer.word_l2r_input(line).map_err(at)?);
                labels.push((n, line.to_string()));
            }
            LineMetric::Aul | LineMetric::Aula => unreachable!("scored above"),
            LineMetric::Crows => {
                let (a, b) = line
                    .split_once('\t')
                    .ok_or_else(|| Error::invalid(text, format!("line {n}: expected two tab-separated sentences")))?;
                let (ia, ib) = crows_inputs(&loaded.tokenizer, a, b).map_err(at)?;
                inputs.extend([ia, ib]);
                labels.extend([(n, a.to_string()), (n, b.to_string())]);
            }
        }
    }
    let started = std::time::Instant::now();
    let scores = scorer.score(&inputs);
    require_finite(text, &labels, &scores)?;
    let secs = started.elapsed().as_secs_f64();
    let positions: usize = scores.iter().map(|s| s.tokens).sum();
    eprintln!(
        "scored {positions} masked positions in {secs:.3} s ({:.0} positions/s)",
        positions as f64 / secs.max(1e-9)
    );
    Ok(ScoredLines::Masked(MaskedLines { labels, scores, warning }))
}

/// A causal LM's log-likelihood of each line (after the BOS token, else EOS); the convention is
/// printed to stderr.
fn causal_lines(lm: &CausalLm, model: &Path, text: &Path, metric: LineMetric) -> Result<CausalLines> {
    if metric != LineMetric::Pll {
        return Err(Error::argument(
            "--metric",
            format!("{} is a causal LM: only `pll` applies (its log-likelihood)", model.display()),
        ));
    }
    let scorer = CausalScorer::new(lm)?;
    let convention = scorer.convention();
    eprintln!(
        "{} causal LM: each sentence scored after {} (id {}, its {}), no special tokens, no EOS; log-likelihood = sum of token log-probabilities",
        lm.config.family.name(),
        convention.prefix_token,
        convention.prefix_token_id,
        convention.prefix_is
    );
    let content = read_to_string(text)?;
    let numbered = sentences(text, &content)?;
    let ids = numbered
        .iter()
        .map(|&(n, line)| scorer.encode(line).map_err(|e| at_line(text, n, e)))
        .collect::<Result<Vec<_>>>()?;
    let started = std::time::Instant::now();
    let scores = scorer.score_ids(&ids);
    for (&(n, line), s) in numbered.iter().zip(&scores) {
        s.as_sentence_score().require_finite("causal LM scoring", line).map_err(|e| at_line(text, n, e))?;
    }
    let tokens: usize = scores.iter().map(|s| s.tokens()).sum();
    eprintln!("scored {tokens} tokens in {:.3} s", started.elapsed().as_secs_f64());
    let sentences = numbered.iter().map(|(_, l)| l.to_string()).collect();
    Ok(CausalLines { sentences, scores, convention })
}

/// The non-blank lines of `text`'s `content`, each with its line number (from 1); a file with
/// none is refused rather than scored as nothing.
fn sentences<'c>(text: &Path, content: &'c str) -> Result<Vec<(usize, &'c str)>> {
    let numbered: Vec<(usize, &str)> =
        content.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()).map(|(i, l)| (i + 1, l)).collect();
    if numbered.is_empty() {
        return Err(Error::invalid(text, "no sentence to score: the file is empty or blank (one sentence a line)"));
    }
    Ok(numbered)
}

/// `error` about the sentence on line `n` of `text`, with the file and line in front.
fn at_line(text: &Path, n: usize, error: Error) -> Error {
    Error::invalid(text, format!("line {n}: {error}"))
}

/// Refuses a non-finite score, naming its line of `text`.
fn require_finite(text: &Path, labels: &[(usize, String)], scores: &[SentenceScore]) -> Result<()> {
    for ((n, label), s) in labels.iter().zip(scores) {
        s.require_finite("PLL scoring", label).map_err(|e| at_line(text, *n, e))?;
    }
    Ok(())
}

/// `--metric aul|aula`: each line scored with nothing masked.
fn unmasked(
    loaded: &LoadedModel,
    text: &Path,
    lines: &[(usize, &str)],
    metric: LineMetric,
    device: Device,
) -> Result<MaskedLines> {
    let scorer = UnmaskedScorer::new(&loaded.model, &loaded.tokenizer, device);
    let inputs: Vec<Vec<i64>> =
        lines.iter().map(|&(n, l)| scorer.input(l).map_err(|e| at_line(text, n, e))).collect::<Result<_>>()?;
    let scores: Vec<_> =
        scorer.score(&inputs).into_iter().map(|s| if metric == LineMetric::Aul { s.aul } else { s.aula }).collect();
    let labels: Vec<(usize, String)> = lines.iter().map(|&(n, l)| (n, l.to_string())).collect();
    require_finite(text, &labels, &scores)?;
    Ok(MaskedLines { labels, scores, warning: None })
}
