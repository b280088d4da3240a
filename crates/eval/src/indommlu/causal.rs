//! IndoMMLU for causal LMs, as IndoMMLU's own `evaluate.py` and `utils.py` (fajri91/IndoMMLU)
//! score them. The prompt is `Ini adalah soal [SUBJECT] untuk [LEVEL]. Pilihlah salah satu
//! jawaban yang dianggap benar!\n\n[soal]\n[jawaban]\n\nJawaban: ` with the CSV's fields
//! verbatim, tokenized with the special tokens the tokenizer adds (transformers'
//! `tokenizer(prompt)`: Llama's and Gemma's BOS, nothing for Qwen or BLOOM).
//!
//! - `letter`, the paper's reported setting: each option letter's log-probability as the next
//!   token after the prompt, the letter's token being the last of `tokenizer.encode(letter)`.
//! - `full-answer`: the prompt followed by the option's line (`A. …`), scored by the mean
//!   log-probability of all its tokens after the first — evaluate.py's `logprobs.mean()`, in
//!   which the prompt's tokens count too.
//!
//! With a PEFT LoRA adapter (Bactrian-X), the prompt is the one evaluate.py uses whenever it is
//! given `--lora_weights`: the same text between `### Input:\n` and ` ### Output:\n`
//! ([`PromptTemplate::LoraInstruct`]). The prompts, few-shot ones included, come from
//! [`super::prompts`], the forward passes from the scorer ([`LmScorer`]). A prompt longer than the
//! model's positions is refused before anything is scored. The confidence (softmax over the
//! options' scores) and its calibration come from the records, as for masked LMs.
pub use super::prompts::{fewshot_examples, prompt, prompt_in, short_of_demonstrations, PromptTemplate};

use super::prompts::option_lines;
use super::questions::Question;
use super::setting::mode_misfit;
use crate::scorer::{Context, Continuation, LmScorer};
use crate::IndommluMode;
use indolm_torch::error::{Error, Result};
use indolm_torch::model::decoder::CausalLm;

/// The scores of every question (one per option, higher is better) by `scorer`, reading `lm`,
/// each prompt with `shots` demonstrations from `examples`.
pub(crate) fn score_questions<S: LmScorer + ?Sized>(
    scorer: &S,
    lm: &CausalLm,
    questions: &[Question],
    examples: &[Question],
    mode: IndommluMode,
    shots: usize,
) -> Result<Vec<Vec<f64>>> {
    let tok = &lm.tokenizer;
    let template = PromptTemplate::of(lm);
    let prompts: Vec<String> =
        questions.iter().map(|q| prompt_in(q, &fewshot_examples(q, examples, shots), template)).collect();
    let fits = |q: &Question, ids: &[i64]| -> Result<()> {
        match lm.config.max_positions {
            Some(max) if ids.len() as i64 > max => Err(Error::data(
                format!("IndoMMLU row {}", q.row),
                format!(
                    "the prompt has {} tokens, more than the model's {max} positions{}",
                    ids.len(),
                    if shots > 0 { "; use fewer --shots" } else { "" }
                ),
            )),
            _ => Ok(()),
        }
    };
    let scores = match mode {
        // Each option letter's token as the next token after the prompt.
        IndommluMode::Letter => {
            let mut contexts = Vec::with_capacity(questions.len());
            let mut letters = Vec::with_capacity(questions.len());
            // Each letter's token, looked up once.
            let mut letter_ids = std::collections::BTreeMap::new();
            for (q, p) in questions.iter().zip(&prompts) {
                let ids = tok.encode_with_special_tokens(p)?;
                fits(q, &ids)?;
                contexts.push(Context { source: Vec::new(), prefix: ids });
                let mut ids = Vec::with_capacity(q.options.len());
                for (l, _) in &q.options {
                    if !letter_ids.contains_key(l) {
                        letter_ids.insert(*l, tok.answer_letter_id(&l.to_string())?);
                    }
                    ids.push(letter_ids[l]);
                }
                letters.push(ids);
            }
            scorer.next_token_log_probs(&contexts, &letters)?
        }
        // The prompt and the option's line tokenized as one text; every token after its first
        // is the continuation (evaluate.py's mean counts the prompt's tokens too).
        IndommluMode::FullAnswer => {
            let (mut contexts, mut continuations) = (Vec::new(), Vec::new());
            for (q, p) in questions.iter().zip(&prompts) {
                for line in option_lines(q) {
                    let ids = tok.encode_with_special_tokens(&format!("{p}{line}"))?;
                    fits(q, &ids)?;
                    if ids.len() < 2 {
                        return Err(Error::data(format!("IndoMMLU row {}", q.row), "the text has under two tokens"));
                    }
                    continuations.push(Continuation { context: contexts.len(), ids: ids[1..].to_vec() });
                    contexts.push(Context { source: Vec::new(), prefix: vec![ids[0]] });
                }
            }
            let mut scored = scorer.continuation_scores(&contexts, &continuations)?.into_iter();
            questions
                .iter()
                .map(|q| (0..q.options.len()).map(|_| scored.next().expect("one row per option").mean()).collect())
                .collect()
        }
        IndommluMode::OptionPll => return Err(mode_misfit(true)),
    };
    Ok(scores)
}
