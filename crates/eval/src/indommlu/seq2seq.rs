//! IndoMMLU for encoder-decoder LMs (mT0, mT5, T5), as IndoMMLU's own `evaluate.py` and
//! `utils.py` (fajri91/IndoMMLU) score mT0. The prompt is the causal LMs' ([`super::causal`]:
//! the same instruction, demonstrations and `Jawaban: `), the encoder's input.
//!
//! - `letter` (`predict_classification_mt0_by_letter`): the prompt tokenized with its special
//!   tokens (mT5's `</s>`), not truncated; the decoder's input is `tokenizer('<pad>')` with its
//!   special tokens (`<pad> </s>`), and each option letter's log-probability is read at the
//!   decoder's last position, the letter's token being the first of `tokenizer.encode(letter)`.
//! - `full-answer` (`predict_classification_mt0`): the prompt truncated to 1,024 tokens (its
//!   `</s>` kept); each option line (`A. …`) tokenized without special tokens is the decoder's
//!   labels, shifted right behind `decoder_start_token_id`, and scored by the mean
//!   log-probability of its tokens. The script pads the question's labels to the longest and
//!   masks the padding out of the mean; the decoder is causal, so the padding changes no label
//!   token's log-probability and each option is scored on its own tokens.
//!
//! Every question is encoded once for all its options, batched with others under a token
//! budget ([`Seq2SeqScorer`]).
use super::causal::{fewshot_examples, option_lines, prompt};
use super::questions::Question;
use super::report::mode_misfit;
use crate::scorer::{DecoderRow, Seq2SeqScorer};
use crate::IndommluMode;
use indolm_torch::error::{Error, Result};

/// The input length `predict_classification_mt0` truncates its prompts to.
pub const FULL_ANSWER_MAX_TOKENS: usize = 1024;

/// The scores of every question (one per option, higher is better), each prompt with `shots`
/// demonstrations from `examples`.
pub(crate) fn score_questions(
    scorer: &Seq2SeqScorer,
    questions: &[Question],
    examples: &[Question],
    mode: IndommluMode,
    shots: usize,
) -> Result<Vec<Vec<f64>>> {
    let lm = scorer.model;
    let tok = &lm.tokenizer;
    let prompts: Vec<String> = questions.iter().map(|q| prompt(q, &fewshot_examples(q, examples, shots))).collect();
    let row_error = |q: &Question, message: String| Error::data(format!("IndoMMLU row {}", q.row), message);
    match mode {
        IndommluMode::Letter => {
            // tokenizer('<pad>'): the pad token and the `</s>` the post-processor appends.
            let decoder = tok.encode_with_special_tokens("<pad>")?;
            let last = decoder.len().checked_sub(1).ok_or_else(|| Error::Tokenizer {
                path: tok.source.clone(),
                message: "`<pad>` has no tokens: nothing to start the decoder with".into(),
            })?;
            // `tokenizer.encode(letter)[0]`: the first token of the letter with special tokens.
            let letter_id = |l: char| -> Result<i64> {
                let ids = tok.encode_with_special_tokens(&l.to_string())?;
                ids.first().copied().ok_or_else(|| Error::Tokenizer {
                    path: tok.source.clone(),
                    message: format!("the letter {l:?} has no tokens"),
                })
            };
            let (mut inputs, mut rows) = (Vec::with_capacity(questions.len()), Vec::with_capacity(questions.len()));
            for (i, (q, p)) in questions.iter().zip(&prompts).enumerate() {
                inputs.push(tok.encode_with_special_tokens(p)?);
                let reads = q.options.iter().map(|(l, _)| Ok((last, letter_id(*l)?))).collect::<Result<Vec<_>>>()?;
                rows.push(DecoderRow { input: i, ids: decoder.clone(), reads });
            }
            Ok(scorer.log_probs(&inputs, &rows))
        }
        IndommluMode::FullAnswer => {
            let start = lm.config.decoder_start()?;
            let truncating = tok.truncating(FULL_ANSWER_MAX_TOKENS)?;
            let (mut inputs, mut rows) = (Vec::with_capacity(questions.len()), Vec::new());
            for (i, (q, p)) in questions.iter().zip(&prompts).enumerate() {
                inputs.push(truncating.encode_with_special_tokens(p)?);
                for line in option_lines(q) {
                    let labels = tok.encode(line)?;
                    if labels.is_empty() {
                        let shown = indolm_core::files::quoted(line);
                        return Err(row_error(q, format!("the option {shown} has no tokens to score")));
                    }
                    // _shift_right: the start token, then every label but the last.
                    let ids: Vec<i64> =
                        std::iter::once(start).chain(labels[..labels.len() - 1].iter().copied()).collect();
                    let reads = labels.iter().enumerate().map(|(t, &id)| (t, id)).collect();
                    rows.push(DecoderRow { input: i, ids, reads });
                }
            }
            let mut scored = scorer.log_probs(&inputs, &rows).into_iter();
            let mut scores = Vec::with_capacity(questions.len());
            for q in questions {
                let mut options = Vec::with_capacity(q.options.len());
                for _ in 0..q.options.len() {
                    let lps = scored.next().ok_or_else(|| row_error(q, "fewer option lines than options".into()))?;
                    options.push(lps.iter().sum::<f64>() / lps.len() as f64);
                }
                scores.push(options);
            }
            Ok(scores)
        }
        IndommluMode::OptionPll => Err(mode_misfit(true)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_the_jawaban_lines_as_written() {
        let q = Question {
            row: 2,
            subject: "IPA".into(),
            level: "SD".into(),
            kelas: "4".into(),
            question: "Soal?".into(),
            options: vec![('A', "satu".into()), ('B', "dua".into())],
            answer: 0,
            soal: "Soal?".into(),
            jawaban: "A. satu \n\nB. dua".into(),
            for_fewshot: false,
        };
        assert_eq!(option_lines(&q), ["A. satu ", "B. dua"]);
    }
}
