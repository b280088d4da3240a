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
//! ([`PromptTemplate::LoraInstruct`]).
//!
//! Few-shot prompts put `k` solved rows marked `is_for_fewshot` of the same subject and level
//! (in CSV order), each `[soal]\n[jawaban]\n\nJawaban: [kunci]\n\n`, between the instruction and
//! the question. A prompt longer than the model's positions is refused before anything is
//! scored. The confidence (softmax over the options' scores) and its calibration come from the
//! records, as for masked LMs ([`super::report`]).
use super::questions::Question;
use super::report::mode_misfit;
use crate::causal::CausalScorer;
use crate::IndommluMode;
use indolm_torch::error::{Error, Result};

/// The wrapping of evaluate.py's prompt, chosen as the script chooses it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PromptTemplate {
    /// `Ini adalah soal … Jawaban: `, for every model without an adapter.
    #[default]
    Plain,
    /// `### Input:\nIni adalah soal … Jawaban: ### Output:\n`, evaluate.py's prompt for a model
    /// given LoRA weights (Bactrian-X's instruction format).
    LoraInstruct,
}

impl PromptTemplate {
    /// evaluate.py's choice for `lm`: the instruction template when a LoRA adapter was merged.
    pub fn of(lm: &indolm_torch::model::decoder::CausalLm) -> Self {
        if lm.adapter.is_some() {
            PromptTemplate::LoraInstruct
        } else {
            PromptTemplate::Plain
        }
    }
}

/// The instruction that opens every prompt.
fn instruction(q: &Question) -> String {
    format!(
        "Ini adalah soal {} untuk {}. Pilihlah salah satu jawaban yang dianggap benar!\n\n",
        q.subject,
        q.level_phrase()
    )
}

/// The first `shots` demonstrations of `q`'s subject and level among `pool`, in CSV order
/// (fewer when the pool has fewer).
pub fn fewshot_examples<'a>(q: &Question, pool: &'a [Question], shots: usize) -> Vec<&'a Question> {
    pool.iter().filter(|e| e.subject == q.subject && e.level == q.level).take(shots).collect()
}

/// The prompt for `q` after `examples`: the instruction, each example with its key, the
/// question and its options, and `Jawaban: ` (evaluate.py's plain template).
pub fn prompt(q: &Question, examples: &[&Question]) -> String {
    prompt_in(q, examples, PromptTemplate::Plain)
}

/// [`prompt`] wrapped as `template` says.
pub fn prompt_in(q: &Question, examples: &[&Question], template: PromptTemplate) -> String {
    let mut text = match template {
        PromptTemplate::Plain => String::new(),
        PromptTemplate::LoraInstruct => "### Input:\n".to_string(),
    };
    text.push_str(&instruction(q));
    for e in examples {
        text.push_str(&format!("{}\n{}\n\nJawaban: {}\n\n", e.soal, e.jawaban, e.key_letter()));
    }
    text.push_str(&format!("{}\n{}\n\nJawaban: ", q.soal, q.jawaban));
    if template == PromptTemplate::LoraInstruct {
        text.push_str("### Output:\n");
    }
    text
}

/// The option lines of `q` as the CSV writes them (its non-empty `jawaban` lines, one an option).
pub(crate) fn option_lines(q: &Question) -> Vec<&str> {
    q.jawaban.split('\n').filter(|l| !l.trim().is_empty()).collect()
}

/// How many of `questions` get fewer than `shots` demonstrations of their subject and level
/// from `examples`.
pub fn short_of_demonstrations(questions: &[Question], examples: &[Question], shots: usize) -> usize {
    questions.iter().filter(|q| fewshot_examples(q, examples, shots).len() < shots).count()
}

/// The scores of every question (one per option, higher is better), each prompt with `shots`
/// demonstrations from `examples`.
pub(crate) fn score_questions(
    scorer: &CausalScorer,
    questions: &[Question],
    examples: &[Question],
    mode: IndommluMode,
    shots: usize,
) -> Result<Vec<Vec<f64>>> {
    let lm = scorer.model;
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
        IndommluMode::Letter => {
            let mut rows = Vec::with_capacity(questions.len());
            let mut letters = Vec::with_capacity(questions.len());
            // Each letter's token, looked up once.
            let mut letter_ids = std::collections::BTreeMap::new();
            for (q, p) in questions.iter().zip(&prompts) {
                let ids = tok.encode_with_special_tokens(p)?;
                fits(q, &ids)?;
                rows.push(ids);
                let mut ids = Vec::with_capacity(q.options.len());
                for (l, _) in &q.options {
                    if !letter_ids.contains_key(l) {
                        letter_ids.insert(*l, tok.answer_letter_id(&l.to_string())?);
                    }
                    ids.push(letter_ids[l]);
                }
                letters.push(ids);
            }
            scorer.next_token_log_probs(&rows, &letters)
        }
        IndommluMode::FullAnswer => {
            let mut rows = Vec::new();
            for (q, p) in questions.iter().zip(&prompts) {
                for line in option_lines(q) {
                    let ids = tok.encode_with_special_tokens(&format!("{p}{line}"))?;
                    fits(q, &ids)?;
                    if ids.len() < 2 {
                        return Err(Error::data(format!("IndoMMLU row {}", q.row), "the text has under two tokens"));
                    }
                    rows.push(ids);
                }
            }
            let mut scored = scorer.score_rows(&rows).into_iter();
            questions
                .iter()
                .map(|q| {
                    (0..q.options.len())
                        .map(|_| {
                            let (lps, _) = scored.next().expect("one row per option");
                            lps.iter().sum::<f64>() / lps.len() as f64
                        })
                        .collect()
                })
                .collect()
        }
        IndommluMode::OptionPll => return Err(mode_misfit(true)),
    };
    Ok(scores)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question(row: usize, subject: &str, soal: &str, key: usize, for_fewshot: bool) -> Question {
        let jawaban = "A. satu\nB. dua\nC. tiga".to_string();
        Question {
            row,
            subject: subject.into(),
            level: "SD".into(),
            kelas: "4.0".into(),
            question: soal.trim().into(),
            options: vec![('A', "satu".into()), ('B', "dua".into()), ('C', "tiga".into())],
            answer: key,
            soal: soal.into(),
            jawaban,
            for_fewshot,
        }
    }

    #[test]
    fn prompts_follow_evaluate_py_and_add_solved_examples_of_the_same_subject_and_level() {
        let q = question(9, "IPA", "Berapa kaki ayam? ", 1, false);
        assert_eq!(
            prompt(&q, &[]),
            "Ini adalah soal IPA untuk 4 SD. Pilihlah salah satu jawaban yang dianggap benar!\n\nBerapa kaki ayam? \nA. satu\nB. dua\nC. tiga\n\nJawaban: "
        );
        let pool = [
            question(2, "IPS", "Lain?", 0, true),
            question(3, "IPA", "Satu?", 0, true),
            question(4, "IPA", "Tiga?", 2, true),
        ];
        let shown = fewshot_examples(&q, &pool, 5);
        assert_eq!(shown.iter().map(|e| e.row).collect::<Vec<_>>(), [3, 4]);
        assert_eq!(fewshot_examples(&q, &pool, 1).len(), 1);
        let text = prompt(&q, &shown);
        assert_eq!(
            text,
            "Ini adalah soal IPA untuk 4 SD. Pilihlah salah satu jawaban yang dianggap benar!\n\n\
             Satu?\nA. satu\nB. dua\nC. tiga\n\nJawaban: A\n\n\
             Tiga?\nA. satu\nB. dua\nC. tiga\n\nJawaban: C\n\n\
             Berapa kaki ayam? \nA. satu\nB. dua\nC. tiga\n\nJawaban: "
        );
        assert_eq!(option_lines(&q), ["A. satu", "B. dua", "C. tiga"]);
        assert_eq!(
            prompt_in(&q, &[], PromptTemplate::LoraInstruct),
            "### Input:\nIni adalah soal IPA untuk 4 SD. Pilihlah salah satu jawaban yang dianggap benar!\n\nBerapa kaki ayam? \nA. satu\nB. dua\nC. tiga\n\nJawaban: ### Output:\n"
        );
    }
}
