//! IndoMMLU's prompts as its own `evaluate.py` writes them (fajri91/IndoMMLU), the text every
//! causal and encoder-decoder LM is scored after: `Ini adalah soal [SUBJECT] untuk [LEVEL].
//! Pilihlah salah satu jawaban yang dianggap benar!\n\n[soal]\n[jawaban]\n\nJawaban: ` with the
//! CSV's fields verbatim; few-shot prompts put `k` solved rows marked `is_for_fewshot` of the
//! same subject and level (in CSV order), each `[soal]\n[jawaban]\n\nJawaban: [kunci]\n\n`,
//! between the instruction and the question. With a PEFT LoRA adapter (Bactrian-X) the prompt is
//! the one evaluate.py uses whenever it is given `--lora_weights` ([`PromptTemplate`]), recorded
//! in the report.
use super::questions::Question;

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
