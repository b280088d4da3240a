//! IndoMMLU with a masked LM, zero-shot. The paper's prompt: `Ini adalah soal [SUBJECT] untuk
//! [LEVEL]. Pilihlah salah satu jawaban yang dianggap benar!`, the question, the options,
//! `Jawaban: `. Two modes: `option-pll` (the mean PLL of the option's tokens, each masked in
//! turn, after the prompt; the question is truncated from the left to fit) and `letter` (one
//! `[MASK]` after `Jawaban:` and the logits of the option letters). A scorer with a share
//! ([`PllScorer::shared`]) scores its share of the batches on each rank, combined exactly.
use super::questions::Question;
use super::report::mode_misfit;
use crate::pll::{PllScorer, ScoringInput};
use crate::IndommluMode;
use indolm_torch::data::tokenizer::TextTokenizer;
use indolm_torch::device::to_device_queued;
use indolm_torch::error::{Error, Result};
use indolm_torch::hooks::{takes, Share};
use indolm_torch::model::BertForMaskedLM;
use tch::{Device, Kind, Tensor};

/// `[CLS] header question tail X [SEP]` ids, with the question (then the tail) cut from the
/// left so the whole fits `max_len`; returns the ids and where `X` starts.
pub(crate) fn context_ids(
    tok: &TextTokenizer,
    q: &Question,
    extra: &[i64],
    max_len: usize,
) -> Result<(Vec<i64>, usize)> {
    let enc = |s: &str| -> Result<Vec<i64>> { Ok(tok.encode_plain(s)?.into_iter().map(i64::from).collect()) };
    let header = enc(&q.header())?;
    let mut middle = enc(&q.question)?;
    middle.extend(enc(&q.tail())?);
    let room = max_len.saturating_sub(2 + header.len() + extra.len());
    if middle.len() > room {
        middle.drain(..middle.len() - room);
    }
    let mut ids = vec![tok.special.cls];
    ids.extend(header);
    ids.extend(middle);
    let start = ids.len();
    ids.extend_from_slice(extra);
    ids.push(tok.special.sep);
    Ok((ids, start))
}

/// One score per option (higher is better) for every question.
pub(crate) fn score_questions(scorer: &PllScorer, questions: &[Question], mode: IndommluMode) -> Result<Vec<Vec<f64>>> {
    match mode {
        IndommluMode::OptionPll => option_pll_scores(scorer, questions),
        IndommluMode::Letter => letter_scores(scorer, questions),
        IndommluMode::FullAnswer => Err(mode_misfit(false)),
    }
}

/// `option-pll`: each option's PLL per token after the prompt (an option with no tokens is
/// scored as `[UNK]`).
fn option_pll_scores(scorer: &PllScorer, questions: &[Question]) -> Result<Vec<Vec<f64>>> {
    let tok = scorer.tokenizer;
    let max_len = scorer.model.max_positions();
    let mut inputs = Vec::new();
    for q in questions {
        for (_, text) in &q.options {
            let option: Vec<i64> = tok.encode_plain(text)?.into_iter().map(i64::from).collect();
            let option = if option.is_empty() { vec![tok.special.unk] } else { option };
            let (ids, start) = context_ids(tok, q, &option, max_len)?;
            inputs.push(ScoringInput::one_at_a_time(ids, (start..start + option.len()).collect()));
        }
    }
    let scores = scorer.score_shared(&inputs)?;
    let mut it = scores.into_iter();
    Ok(questions
        .iter()
        .map(|q| {
            q.options
                .iter()
                .map(|_| {
                    let s = it.next().expect("one score per option");
                    s.pll / s.tokens as f64
                })
                .collect()
        })
        .collect())
}

/// Questions a batch in `letter` mode.
const LETTER_BATCH: usize = 16;

/// `letter`: the log-probability of each option's letter at the `[MASK]` after `Jawaban:`,
/// [`LETTER_BATCH`] questions a batch, shared among the ranks of the scorer's share. Every
/// question's prompt and letters are made first, on every rank alike, so that an error in them
/// is every rank's before anything is scored.
fn letter_scores(scorer: &PllScorer, questions: &[Question]) -> Result<Vec<Vec<f64>>> {
    let (model, tok) = (scorer.model, scorer.tokenizer);
    let max_len = model.max_positions();
    let prompts: Vec<(Vec<i64>, usize)> =
        questions.iter().map(|q| context_ids(tok, q, &[tok.special.mask], max_len)).collect::<Result<_>>()?;
    let letters: Vec<Vec<i64>> = questions.iter().map(|q| letter_ids(tok, q)).collect::<Result<_>>()?;
    // Each question's options at `offsets[i]..` of one table of values.
    let offsets: Vec<usize> = letters
        .iter()
        .scan(0, |next, l| {
            let at = *next;
            *next += l.len();
            Some(at)
        })
        .collect();
    let mut values = vec![0.0; letters.iter().map(Vec::len).sum()];
    for (b, batch) in prompts.chunks(LETTER_BATCH).enumerate() {
        if !takes(scorer.share, batch.len()) {
            continue;
        }
        let log_probs = answer_log_probs(model, tok, batch, scorer.device);
        for r in 0..batch.len() {
            let i = b * LETTER_BATCH + r;
            for (k, &id) in letters[i].iter().enumerate() {
                values[offsets[i] + k] = log_probs.double_value(&[r as i64, id]);
            }
        }
    }
    if let Some(share) = scorer.share {
        Share::combine(share, &mut values, "the IndoMMLU letter scores")?;
    }
    Ok(offsets.iter().zip(&letters).map(|(&at, l)| values[at..at + l.len()].to_vec()).collect())
}

/// The log-probabilities over the vocabulary at the answer `[MASK]` of each prompt (its ids and
/// where the `[MASK]` is), in one padded batch: `[prompts, vocab]`, double precision, on the
/// CPU.
fn answer_log_probs(
    model: &BertForMaskedLM,
    tok: &TextTokenizer,
    prompts: &[(Vec<i64>, usize)],
    device: Device,
) -> Tensor {
    let rows: Vec<&[i64]> = prompts.iter().map(|(ids, _)| ids.as_slice()).collect();
    let positions: Vec<usize> = prompts.iter().map(|&(_, start)| start).collect();
    let width = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    let flat: Vec<i64> = rows
        .iter()
        .flat_map(|r| r.iter().copied().chain(std::iter::repeat_n(tok.special.pad, width - r.len())))
        .collect();
    let mask: Vec<i64> = rows
        .iter()
        .flat_map(|r| std::iter::repeat_n(1i64, r.len()).chain(std::iter::repeat_n(0, width - r.len())))
        .collect();
    let flat_pos: Vec<i64> = positions.iter().enumerate().map(|(r, &p)| (r * width + p) as i64).collect();
    let shape = [rows.len() as i64, width as i64];
    tch::no_grad(|| {
        let ids = to_device_queued(&flat, &shape, device);
        let m = to_device_queued(&mask, &shape, device);
        let hidden = model.bert.forward(&ids, None, Some(&m), false);
        model
            .logits_at(&hidden, &to_device_queued(&flat_pos, &[flat_pos.len() as i64], device))
            .log_softmax(-1, Kind::Double)
            .to_device(Device::Cpu)
    })
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
