//! IndoMMLU with a masked LM, zero-shot. The paper's prompt: `Ini adalah soal [SUBJECT] untuk
//! [LEVEL]. Pilihlah salah satu jawaban yang dianggap benar!`, the question, the options,
//! `Jawaban: `. Two modes: `option-pll` (the mean PLL of the option's tokens, each masked in
//! turn, after the prompt; the question is truncated from the left to fit) and `letter` (one
//! `[MASK]` after `Jawaban:` and the log-probabilities of the option letters there). The inputs
//! are made here, the forward passes by the scorer ([`LmScorer`]), which a share spreads over
//! the ranks.
use super::questions::Question;
use super::setting::mode_misfit;
use crate::scorer::{Context, Continuation, LmScorer};
use crate::IndommluMode;
use indolm_torch::data::tokenizer::TextTokenizer;
use indolm_torch::error::{Error, Result};

/// `[CLS] header question tail` ids, with the question (then the tail) cut from the left so
/// that they, a continuation of `continuation` tokens and `[SEP]` fit `max_len`.
pub(crate) fn context_ids(tok: &TextTokenizer, q: &Question, continuation: usize, max_len: usize) -> Result<Vec<i64>> {
    let enc = |s: &str| -> Result<Vec<i64>> { Ok(tok.encode_plain(s)?.into_iter().map(i64::from).collect()) };
    let header = enc(&q.header())?;
    let mut middle = enc(&q.question)?;
    middle.extend(enc(&q.tail())?);
    let room = max_len.saturating_sub(2 + header.len() + continuation);
    if middle.len() > room {
        middle.drain(..middle.len() - room);
    }
    let mut ids = vec![tok.special.cls];
    ids.extend(header);
    ids.extend(middle);
    Ok(ids)
}

/// One score per option (higher is better) for every question, by `scorer` with `tok`, the
/// tokenizer of its model of `max_len` positions.
pub(crate) fn score_questions<S: LmScorer + ?Sized>(
    scorer: &S,
    tok: &TextTokenizer,
    max_len: usize,
    questions: &[Question],
    mode: IndommluMode,
) -> Result<Vec<Vec<f64>>> {
    match mode {
        IndommluMode::OptionPll => option_pll_scores(scorer, tok, max_len, questions),
        IndommluMode::Letter => letter_scores(scorer, tok, max_len, questions),
        IndommluMode::FullAnswer => Err(mode_misfit(false)),
    }
}

/// `option-pll`: each option's PLL per token after the prompt (an option with no tokens is
/// scored as `[UNK]`).
fn option_pll_scores<S: LmScorer + ?Sized>(
    scorer: &S,
    tok: &TextTokenizer,
    max_len: usize,
    questions: &[Question],
) -> Result<Vec<Vec<f64>>> {
    let (mut contexts, mut continuations) = (Vec::new(), Vec::new());
    for q in questions {
        for (_, text) in &q.options {
            let option: Vec<i64> = tok.encode_plain(text)?.into_iter().map(i64::from).collect();
            let option = if option.is_empty() { vec![tok.special.unk] } else { option };
            let prefix = context_ids(tok, q, option.len(), max_len)?;
            continuations.push(Continuation { context: contexts.len(), ids: option });
            contexts.push(Context { source: Vec::new(), prefix });
        }
    }
    let mut it = scorer.continuation_scores(&contexts, &continuations)?.into_iter();
    Ok(questions
        .iter()
        .map(|q| q.options.iter().map(|_| it.next().expect("one score per option").mean()).collect())
        .collect())
}

/// `letter`: the log-probability of each option's letter at the `[MASK]` after `Jawaban:`.
/// Every question's prompt and letters are made first, on every rank alike, so that an error in
/// them is every rank's before anything is scored.
fn letter_scores<S: LmScorer + ?Sized>(
    scorer: &S,
    tok: &TextTokenizer,
    max_len: usize,
    questions: &[Question],
) -> Result<Vec<Vec<f64>>> {
    let contexts: Vec<Context> = questions
        .iter()
        .map(|q| Ok(Context { source: Vec::new(), prefix: context_ids(tok, q, 1, max_len)? }))
        .collect::<Result<_>>()?;
    let letters: Vec<Vec<i64>> = questions.iter().map(|q| letter_ids(tok, q)).collect::<Result<_>>()?;
    scorer.next_token_log_probs(&contexts, &letters)
}

/// The token of each of `q`'s option letters (lowercased when the tokenizer lowercases).
fn letter_ids(tok: &TextTokenizer, q: &Question) -> Result<Vec<i64>> {
    let mut ids = Vec::new();
    for (letter, _) in &q.options {
        let token = if tok.lowercase { letter.to_ascii_lowercase() } else { *letter }.to_string();
        let id = tok.token_to_id(&token).ok_or_else(|| Error::Tokenizer {
            path: tok.source.clone(),
            message: format!("no token for the option letter {token:?}"),
        })?;
        ids.push(i64::from(id));
    }
    Ok(ids)
}
