//! Encoder-decoder LMs (mT5/mT0) against transformers: a tiny random MT5ForConditionalGeneration
//! built by transformers (`hf_reference.py make-mt5`: gated-gelu, an lm_head of its own as mT0's,
//! mT5's relative-position buckets, 2 encoder and 3 decoder blocks) with a T5-style Unigram
//! tokenizer. `eval indommlu` on it is held to IndoMMLU's own utils.py functions for mT0 run in
//! Python one question at a time (`indommlu-mt0`): the prompts' ids, every option's score within
//! 1e-4 relative and every prediction, by letter and by full answer; bias and sentence scores
//! are refused in one line.
use crate::common::*;
use indolm_eval::indommlu::{load_all, read_question_records, IndommluReport, QuestionSet};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use tch::Device;

fn fixture() -> PathBuf {
    root().join("tests/fixtures/indommlu/indoMMLU-fixture.csv")
}

/// The tiny mT5, built once and shared by the tests (which only read it).
fn mt5() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = scratch("seq2seq-mt5");
        reference(&["make-mt5", dir.to_str().unwrap()]);
        dir
    })
}

/// `eval indommlu --mode MODE` (`--questions all` when `all`) on the mT5 against the reference,
/// which scores every row: each record's row, key, scores (within 1e-4 relative) and prediction.
/// Returns the reference's questions.
fn parity(mode: &str, all: bool) -> Vec<Value> {
    let (model, csv) = (mt5(), fixture());
    let work = scratch(&format!("seq2seq-indommlu-{mode}"));
    let expected_path = work.join("ref.json");
    let (model_arg, csv_arg) = (model.to_str().unwrap(), csv.to_str().unwrap());
    reference(&["indommlu-mt0", model_arg, csv_arg, mode, expected_path.to_str().unwrap()]);
    let expected: Value = serde_json::from_str(&std::fs::read_to_string(&expected_path).unwrap()).unwrap();
    let questions = expected["questions"].as_array().unwrap().clone();
    let out = work.join("eval");
    let mut args = vec!["--threads", "1", "eval", "indommlu", "--model", model_arg, "--data", csv_arg, "--mode", mode];
    args.extend(["--out", out.to_str().unwrap()]);
    if all {
        args.extend(["--questions", "all"]);
    }
    let (printed, _) = indolm_ok(&args);
    assert!(printed.contains("encoder-decoder LM, 0-shot"), "{printed}");
    let records = read_question_records(&out.join("indommlu_questions.csv")).unwrap();
    let report: IndommluReport =
        serde_json::from_str(&std::fs::read_to_string(out.join("indommlu.json")).unwrap()).unwrap();
    assert_eq!((report.mode.to_string().as_str(), report.demonstrations_included), (mode, all));
    assert!(report.encoder_decoder);
    // Held out: the rows not marked is_for_fewshot, which the script scores too.
    let wanted: Vec<&Value> = questions.iter().filter(|q| all || q["for_fewshot"].as_u64() == Some(0)).collect();
    assert_eq!((records.len(), wanted.len()), (if all { 37 } else { 30 }, records.len()));
    let mut worst: f64 = 0.0;
    for (r, e) in records.iter().zip(&wanted) {
        assert_eq!((r.row, r.key), (e["row"].as_u64().unwrap() as usize, e["key"].as_u64().unwrap() as usize));
        let scores: Vec<f64> = e["scores"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        assert_eq!(r.scores.len(), scores.len(), "row {}", r.row);
        for (a, b) in r.scores.iter().zip(&scores) {
            worst = worst.max((a - b).abs() / b.abs().max(1e-9));
        }
        assert_eq!(r.prediction, e["pred"].as_u64().unwrap() as usize, "row {}: {:?} vs {scores:?}", r.row, r.scores);
    }
    println!(
        "mt5 {mode}: {} questions, {} option scores, accuracy {:.1}; max relative score difference {worst:.2e}",
        records.len(),
        records.iter().map(|r| r.scores.len()).sum::<usize>(),
        report.average
    );
    assert!(worst <= 1e-4, "{worst}");
    questions
}

/// `--mode letter` (utils.py's `predict_classification_mt0_by_letter`) on the held-out rows:
/// the decoder reads `<pad> </s>` and each letter's first token, the prompt is the causal LMs'
/// with mT5's `</s>`; scores and predictions equal the script's.
#[test]
fn letter_scores_match_indommlu_utils_py_for_mt0() {
    let expected = parity("letter", false);
    let lm = indolm_torch::model::seq2seq::load_seq2seq_lm(mt5(), Device::Cpu).unwrap();
    assert!(lm.unused.is_empty(), "{:?}", lm.unused);
    let tok = &lm.tokenizer;
    let first = &expected[0];
    let ids = |v: &Value| v.as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect::<Vec<_>>();
    assert_eq!(tok.encode_with_special_tokens("<pad>").unwrap(), ids(&first["decoder_ids"]));
    let letters: Vec<i64> =
        ["A", "B", "C", "D"].iter().map(|l| tok.encode_with_special_tokens(l).unwrap()[0]).collect();
    assert_eq!(letters, ids(&first["choice_ids"]));
    // Every prompt's ids as transformers' tokenizer(prompt) gives them.
    let data = load_all(&fixture()).unwrap();
    for (q, e) in data.scored(QuestionSet::All).iter().zip(&expected) {
        let prompt = indolm_eval::indommlu::causal::prompt(q, &[]);
        assert_eq!(tok.encode_with_special_tokens(&prompt).unwrap(), ids(&e["ids"]), "row {}", q.row);
    }
}

/// `--mode full-answer --questions all` (utils.py's `predict_classification_mt0`, every row as
/// evaluate.py scores them): each option line's mean log-probability as the decoder's labels
/// shifted right behind `<pad>`; the prompt truncated as `tokenizer(prompt, truncation=True,
/// max_length=N)` truncates it, its `</s>` kept.
#[test]
fn full_answer_on_every_row_matches_indommlu_utils_py_for_mt0() {
    let expected = parity("full-answer", true);
    let lm = indolm_torch::model::seq2seq::load_seq2seq_lm(mt5(), Device::Cpu).unwrap();
    let data = load_all(&fixture()).unwrap();
    let q = &data.scored(QuestionSet::All)[0];
    let prompt = indolm_eval::indommlu::causal::prompt(q, &[]);
    let whole: Vec<i64> = expected[0]["ids"].as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect();
    assert!(whole.len() > 16 && whole.last() == Some(&1), "{whole:?}");
    let cut = lm.tokenizer.truncating(16).unwrap().encode_with_special_tokens(&prompt).unwrap();
    let mut kept = whole[..15].to_vec();
    kept.push(1);
    assert_eq!(cut, kept, "the first 15 tokens and </s>");
    let line = q.jawaban.lines().next().unwrap();
    let labels: Vec<i64> =
        expected[0]["label_ids"][0].as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect();
    assert_eq!(lm.tokenizer.encode(line).unwrap(), labels);
}

/// No reference defines bias or sentence scores for an encoder-decoder: `eval bias` and
/// `eval pll` refuse the mT5 folder with one line naming it.
#[test]
fn bias_and_sentence_scores_are_refused_for_an_encoder_decoder() {
    let model = mt5().to_str().unwrap();
    let pairs = test_data().join("crows-pairs/crows_pairs_anonymized.csv");
    let err = indolm_fails(&["eval", "bias", "--model", model, "--pairs", pairs.to_str().unwrap()]);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("`crows` is not defined for an encoder-decoder LM (mt5)"), "{err}");
    let text = scratch("seq2seq-pll").join("lines.txt");
    std::fs::write(&text, "Dia membeli buah di pasar.\n").unwrap();
    let err = indolm_fails(&["eval", "pll", "--model", model, "--text", text.to_str().unwrap()]);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("mt5 encoder-decoder LM") && err.contains("masked and causal LMs only"), "{err}");
}
