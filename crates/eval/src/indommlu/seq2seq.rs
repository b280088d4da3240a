//! IndoMMLU for encoder-decoder LMs (mT0, mT5, T5), as IndoMMLU's own `evaluate.py` and
//! `utils.py` (fajri91/IndoMMLU) score mT0. The prompt is the causal LMs' ([`super::prompts`]:
//! the same instruction, demonstrations and `Jawaban: `), the encoder's input.
//!
//! - `letter` (`predict_classification_mt0_by_letter`): the prompt tokenized with its special
//!   tokens (mT5's `</s>`), not truncated; the decoder's input is `tokenizer('<pad>')` with its
//!   special tokens (`<pad> </s>`), and each option letter's log-probability is read as the next
//!   token after it, the letter's token being the first of `tokenizer.encode(letter)`.
//! - `full-answer` (`predict_classification_mt0`): the prompt truncated to 1,024 tokens (its
//!   `</s>` kept); each option line (`A. …`) tokenized without special tokens is the decoder's
//!   labels, shifted right behind `decoder_start_token_id`, and scored by the mean
//!   log-probability of its tokens. The script pads the question's labels to the longest and
//!   masks the padding out of the mean; the decoder is causal, so the padding changes no label
//!   token's log-probability and each option is scored on its own tokens.
//!
//! Every question is one context, encoded once for all its options, batched with others under a
//! token budget by the scorer ([`LmScorer`]).
use super::prompts::{fewshot_examples, option_lines, prompt};
use super::questions::Question;
use super::setting::mode_misfit;
use crate::scorer::{Context, Continuation, LmScorer};
use crate::IndommluMode;
use indolm_torch::error::{Error, Result};
use indolm_torch::model::seq2seq::Seq2SeqLm;

/// The input length `predict_classification_mt0` truncates its prompts to.
pub(crate) const FULL_ANSWER_MAX_TOKENS: usize = 1024;

/// The scores of every question (one per option, higher is better) by `scorer`, reading `lm`,
/// each prompt with `shots` demonstrations from `examples`.
pub(crate) fn score_questions<S: LmScorer + ?Sized>(
    scorer: &S,
    lm: &Seq2SeqLm,
    questions: &[Question],
    examples: &[Question],
    mode: IndommluMode,
    shots: usize,
) -> Result<Vec<Vec<f64>>> {
    let tok = &lm.tokenizer;
    let prompts: Vec<String> = questions.iter().map(|q| prompt(q, &fewshot_examples(q, examples, shots))).collect();
    let row_error = |q: &Question, message: String| Error::data(format!("IndoMMLU row {}", q.row), message);
    match mode {
        IndommluMode::Letter => {
            // tokenizer('<pad>'): the pad token and the `</s>` the post-processor appends.
            let decoder = tok.encode_with_special_tokens("<pad>")?;
            if decoder.is_empty() {
                return Err(Error::Tokenizer {
                    path: tok.source.clone(),
                    message: "`<pad>` has no tokens: nothing to start the decoder with".into(),
                });
            }
            // `tokenizer.encode(letter)[0]`: the first token of the letter with special tokens.
            let letter_id = |l: char| -> Result<i64> {
                let ids = tok.encode_with_special_tokens(&l.to_string())?;
                ids.first().copied().ok_or_else(|| Error::Tokenizer {
                    path: tok.source.clone(),
                    message: format!("the letter {l:?} has no tokens"),
                })
            };
            let (mut contexts, mut letters) =
                (Vec::with_capacity(questions.len()), Vec::with_capacity(questions.len()));
            for (q, p) in questions.iter().zip(&prompts) {
                contexts.push(Context { source: tok.encode_with_special_tokens(p)?, prefix: decoder.clone() });
                letters.push(q.options.iter().map(|(l, _)| letter_id(*l)).collect::<Result<Vec<_>>>()?);
            }
            scorer.next_token_log_probs(&contexts, &letters)
        }
        IndommluMode::FullAnswer => {
            let start = lm.config.decoder_start()?;
            let truncating = tok.truncating(FULL_ANSWER_MAX_TOKENS)?;
            let (mut contexts, mut continuations) = (Vec::with_capacity(questions.len()), Vec::new());
            for (i, (q, p)) in questions.iter().zip(&prompts).enumerate() {
                contexts.push(Context { source: truncating.encode_with_special_tokens(p)?, prefix: vec![start] });
                for line in option_lines(q) {
                    // The labels, read after the start token (_shift_right).
                    let labels = tok.encode(line)?;
                    if labels.is_empty() {
                        let shown = indolm_core::files::quoted(line);
                        return Err(row_error(q, format!("the option {shown} has no tokens to score")));
                    }
                    continuations.push(Continuation { context: i, ids: labels });
                }
            }
            let mut scored = scorer.continuation_scores(&contexts, &continuations)?.into_iter();
            let mut scores = Vec::with_capacity(questions.len());
            for q in questions {
                let mut options = Vec::with_capacity(q.options.len());
                for _ in 0..q.options.len() {
                    let score = scored.next().ok_or_else(|| row_error(q, "fewer option lines than options".into()))?;
                    options.push(score.mean());
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
