//! Encoder-decoder LMs (mT5/mT0) against transformers: a tiny random MT5ForConditionalGeneration
//! built by transformers (`hf_reference.py make-mt5`: gated-gelu, an lm_head of its own as mT0's,
//! mT5's relative-position buckets, 2 encoder and 3 decoder blocks) with a T5-style Unigram
//! tokenizer. `eval indommlu` on it is held to IndoMMLU's own utils.py functions for mT0 run in
//! Python one question at a time (`indommlu-mt0`): the prompts' ids, every option's score within
//! 1e-4 relative and every prediction, by letter and by full answer; bias and sentence scores
//! are refused in one line. mBART (a tiny random `MBartForConditionalGeneration`) is held to
//! transformers in logits, loss, every gradient and one AdamW step.
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

/// The tiny mBART (`make-mbart`), built once and shared by the tests (which only read it).
fn mbart() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = scratch("seq2seq-mbart");
        reference(&["make-mbart", dir.to_str().unwrap()]);
        dir
    })
}

/// mBART (IndoBART's and mBART-50's layout) against transformers' `MBartForConditionalGeneration`
/// on a tiny random model (`make-mbart`) and one right-padded batch with -100 label padding: the
/// decoder inputs `shift_tokens_right` makes, the logits, the loss, every parameter's gradient,
/// and the loss after one AdamW step (torch's defaults, lr 1e-3, weight decay 0.01).
#[test]
fn mbart_loss_gradients_and_one_step_match_transformers() {
    use indolm_torch::device::Precision;
    use indolm_torch::model::seq2seq::mbart::{load_mbart, shift_tokens_right, Mbart};
    use tch::{Kind, Tensor};

    let dir = mbart();
    // IndoNLG's layout: `<sent></s><lang>` in, labels `<sent></s><lang>`, padding 1 / -100.
    let input_ids: Vec<Vec<i64>> =
        vec![vec![5, 17, 33, 8, 2, 90], vec![44, 12, 2, 91, 1, 1], vec![7, 7, 61, 23, 70, 2]];
    let attention_mask: Vec<Vec<i64>> =
        input_ids.iter().map(|r| r.iter().map(|&t| i64::from(t != 1)).collect()).collect();
    let labels: Vec<Vec<i64>> = vec![vec![9, 14, 2, 92, -100], vec![30, 31, 32, 2, 92], vec![50, 2, 93, -100, -100]];
    let batch = serde_json::json!({"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels});
    let (batch_path, out_path) = (dir.join("batch.json"), dir.join("step.json"));
    std::fs::write(&batch_path, batch.to_string()).unwrap();
    reference(&["mbart-step", dir.to_str().unwrap(), batch_path.to_str().unwrap(), out_path.to_str().unwrap()]);
    let theirs: Value = serde_json::from_str(&std::fs::read_to_string(&out_path).unwrap()).unwrap();

    let tensor = |rows: &Vec<Vec<i64>>| Tensor::from_slice2(rows);
    let (ids, mask, labels) = (tensor(&input_ids), tensor(&attention_mask), tensor(&labels));
    let (vs, net) = load_mbart(dir, Device::Cpu).unwrap();
    let decoder_ids = shift_tokens_right(&labels, net.config.pad_token_id);
    let expected: Vec<Vec<i64>> = serde_json::from_value(theirs["decoder_input_ids"].clone()).unwrap();
    assert_eq!(Vec::<Vec<i64>>::try_from(&decoder_ids).unwrap(), expected);

    let precision = Precision::Fp32;
    let encoded = net.encode(&ids, &mask, true, precision).unwrap();
    let hidden = net.decode(&decoder_ids, None, &encoded, &mask, true, precision).unwrap();
    let logits = net.logits(&hidden);
    let loss = Mbart::loss(&logits, &labels);
    let flat = |v: &Value| v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect::<Vec<f64>>();
    let ours: Vec<f64> = Vec::<f64>::try_from(logits.to_kind(Kind::Double).flatten(0, -1)).unwrap();
    let max_diff = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
    let logit_diff = max_diff(&ours, &flat(&theirs["logits"]));
    let loss_diff = (loss.double_value(&[]) - theirs["loss"].as_f64().unwrap()).abs();
    loss.backward();
    let grads = theirs["grads"].as_object().unwrap();
    let mut worst_grad = (0.0f64, String::new());
    let variables = vs.trainable_variables().len();
    for (name, var) in vs.variables() {
        if name == "final_logits_bias" {
            assert!(!grads.contains_key(&name));
            continue;
        }
        let theirs = flat(grads.get(&name).unwrap_or_else(|| panic!("transformers has no gradient for {name}")));
        let ours = Vec::<f64>::try_from(var.grad().to_kind(Kind::Double).flatten(0, -1)).unwrap();
        assert_eq!(ours.len(), theirs.len(), "{name}");
        let d = max_diff(&ours, &theirs);
        if d > worst_grad.0 {
            worst_grad = (d, name);
        }
    }
    assert_eq!(variables, grads.len(), "one gradient per trainable tensor, as transformers' named_parameters");
    let mut optimizer = tch::nn::OptimizerConfig::build(tch::nn::AdamW::default(), &vs, 1e-3).unwrap();
    optimizer.set_weight_decay(0.01);
    optimizer.step();
    let after = tch::no_grad(|| {
        let encoded = net.encode(&ids, &mask, false, precision).unwrap();
        let hidden = net.decode(&decoder_ids, None, &encoded, &mask, false, precision).unwrap();
        Mbart::loss(&net.logits(&hidden), &labels).double_value(&[])
    });
    let after_diff = (after - theirs["loss_after_step"].as_f64().unwrap()).abs();
    println!(
        "mBART vs transformers: max |Δ logit| {logit_diff:.2e}, |Δ loss| {loss_diff:.2e}, max |Δ grad| {:.2e} ({}), |Δ loss after one AdamW step| {after_diff:.2e}",
        worst_grad.0, worst_grad.1
    );
    assert!(logit_diff < 1e-5 && loss_diff < 1e-6, "{logit_diff} {loss_diff}");
    assert!(worst_grad.0 < 1e-6, "{worst_grad:?}");
    assert!(after_diff < 1e-6, "{after_diff}");
}

/// Beam search on the tiny mBART against transformers' `generate` (a fresh GenerationConfig each
/// time, no sampling): three settings that between them finish beams early and at max_length,
/// pad after an early end, force the last token and the first, and use each early-stopping rule
/// with length penalties below, at and above 1. Every sequence equal, every score within 1e-5.
#[test]
fn mbart_beam_search_matches_transformers_generate() {
    use indolm_torch::device::Precision;
    use indolm_torch::model::seq2seq::beam::{BeamSettings, EarlyStopping};
    use indolm_torch::model::seq2seq::mbart::load_mbart;
    use tch::Tensor;

    let dir = mbart();
    let input_ids: Vec<Vec<i64>> =
        vec![vec![5, 17, 33, 8, 2, 90], vec![44, 12, 2, 91, 1, 1], vec![7, 7, 61, 23, 70, 2]];
    let attention_mask: Vec<Vec<i64>> =
        input_ids.iter().map(|r| r.iter().map(|&t| i64::from(t != 1)).collect()).collect();
    let settings = serde_json::json!([
        {"decoder_start": [[2, 92], [2, 93], [2, 92]], "num_beams": 3, "max_length": 12, "length_penalty": 1.0,
         "early_stopping": true, "forced_bos_token_id": null, "forced_eos_token_id": 2},
        {"decoder_start": [[2], [2], [2]], "num_beams": 4, "max_length": 10, "length_penalty": 0.6,
         "early_stopping": false, "forced_bos_token_id": 90, "forced_eos_token_id": null},
        {"decoder_start": [[2, 92], [2, 93], [2, 92]], "num_beams": 2, "max_length": 9, "length_penalty": 2.0,
         "early_stopping": "never", "forced_bos_token_id": null, "forced_eos_token_id": null},
    ]);
    let spec = serde_json::json!({"input_ids": input_ids, "attention_mask": attention_mask, "settings": settings});
    let work = scratch("seq2seq-mbart-generate");
    let (spec_path, out_path) = (work.join("generate.json"), work.join("generated.json"));
    std::fs::write(&spec_path, spec.to_string()).unwrap();
    reference(&["mbart-generate", dir.to_str().unwrap(), spec_path.to_str().unwrap(), out_path.to_str().unwrap()]);
    let theirs: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&out_path).unwrap()).unwrap();

    let (_vs, net) = load_mbart(dir, Device::Cpu).unwrap();
    let (ids, mask) = (Tensor::from_slice2(&input_ids), Tensor::from_slice2(&attention_mask));
    let mut worst: f64 = 0.0;
    for (setting, expected) in settings.as_array().unwrap().iter().zip(&theirs) {
        let start: Vec<Vec<i64>> = serde_json::from_value(setting["decoder_start"].clone()).unwrap();
        let early_stopping = match &setting["early_stopping"] {
            Value::Bool(true) => EarlyStopping::Yes,
            Value::Bool(false) => EarlyStopping::No,
            _ => EarlyStopping::Never,
        };
        let beam = BeamSettings {
            num_beams: setting["num_beams"].as_i64().unwrap(),
            max_length: setting["max_length"].as_i64().unwrap(),
            length_penalty: setting["length_penalty"].as_f64().unwrap(),
            early_stopping,
            eos_token_ids: vec![2],
            pad_token_id: Some(1),
            forced_bos_token_id: setting["forced_bos_token_id"].as_i64(),
            forced_eos_token_id: setting["forced_eos_token_id"].as_i64(),
        };
        let out = net.generate(&ids, &mask, &Tensor::from_slice2(&start), &beam, Precision::Fp32).unwrap();
        let sequences = Vec::<Vec<i64>>::try_from(&out.sequences).unwrap();
        let want: Vec<Vec<i64>> = serde_json::from_value(expected["sequences"].clone()).unwrap();
        assert_eq!(sequences, want, "{setting}");
        let scores = Vec::<f64>::try_from(out.scores.to_kind(tch::Kind::Double)).unwrap();
        for (a, b) in scores.iter().zip(expected["scores"].as_array().unwrap()) {
            worst = worst.max((a - b.as_f64().unwrap()).abs());
        }
        println!("{}: {sequences:?}", setting["early_stopping"]);
    }
    println!("beam search vs transformers generate: sequences equal, max |Δ score| {worst:.2e}");
    assert!(worst < 1e-5, "{worst}");
}

/// mBART in bf16 on the CPU (CUDA's compute dtype: bf16 matrix products, fp32 norms, softmax and
/// loss), so a dtype mix-up on the GPU path shows here: the loss within 2% of fp32's, every
/// gradient finite, and beam search runs.
#[test]
fn mbart_in_bf16_on_the_cpu_stays_near_fp32() {
    use indolm_torch::device::Precision;
    use indolm_torch::model::seq2seq::beam::{BeamSettings, EarlyStopping};
    use indolm_torch::model::seq2seq::mbart::{load_mbart, shift_tokens_right, Mbart};
    use tch::Tensor;

    let (vs, net) = load_mbart(mbart(), Device::Cpu).unwrap();
    let ids = Tensor::from_slice2(&[[5i64, 17, 33, 8, 2, 90], [44, 12, 2, 91, 1, 1]]);
    let mask = ids.ne(1).to_kind(tch::Kind::Int64);
    let labels = Tensor::from_slice2(&[[9i64, 14, 2, 92, -100], [30, 31, 32, 2, 92]]);
    let decoder_ids = shift_tokens_right(&labels, net.config.pad_token_id);
    let loss = |precision: Precision| {
        let encoded = net.encode(&ids, &mask, true, precision).unwrap();
        let hidden = net.decode(&decoder_ids, None, &encoded, &mask, true, precision).unwrap();
        Mbart::loss(&net.logits(&hidden), &labels)
    };
    let fp32 = tch::no_grad(|| loss(Precision::Fp32)).double_value(&[]);
    let bf16 = loss(Precision::Bf16);
    bf16.backward();
    let relative = (bf16.double_value(&[]) - fp32).abs() / fp32;
    println!("mBART loss fp32 {fp32:.5}, bf16 {:.5} (relative {relative:.2e})", bf16.double_value(&[]));
    assert!(relative < 0.02, "{relative}");
    for (name, var) in vs.trainable_variables().iter().enumerate() {
        assert!(var.grad().isfinite().all().int64_value(&[]) == 1, "gradient {name} is not finite");
    }
    let settings = BeamSettings {
        num_beams: 2,
        max_length: 8,
        length_penalty: 1.0,
        early_stopping: EarlyStopping::Yes,
        eos_token_ids: vec![2],
        pad_token_id: Some(1),
        forced_bos_token_id: None,
        forced_eos_token_id: Some(2),
    };
    let out =
        net.generate(&ids, &mask, &Tensor::from_slice2(&[[2i64, 92], [2, 93]]), &settings, Precision::Bf16).unwrap();
    assert_eq!(out.sequences.size()[0], 2);
}
