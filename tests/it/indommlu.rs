//! IndoMMLU: option-PLL and letter scores against transformers on the same checkpoint; causal
//! LMs (a tiny Llama whose tokenizer adds BOS, a tiny BLOOM without) against IndoMMLU's own
//! evaluate.py run in Python, zero- and few-shot, both strategies, with the confidence and its
//! calibration error; the aggregation arithmetic on the fixture (hand-computed); bad input.
use crate::common::*;
use indolm_eval::indommlu::causal::PromptTemplate;
use indolm_eval::indommlu::OptionScores;
use indolm_eval::indommlu::{aggregate_records, load, load_all, IndommluReport, Setting};
use indolm_eval::indommlu::{read_question_records, Question, QuestionRecord};
use indolm_eval::pll::PllScorer;
use indolm_eval::IndommluMode;
use indolm_torch::model::model_dir::load_masked_lm;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use tch::Device;

fn fixture() -> PathBuf {
    root().join("tests/fixtures/indommlu/indoMMLU-fixture.csv")
}

/// The reference model with 512 positions, so whole prompts fit.
fn long_model() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = scratch("hf-reference-512");
        reference(&["make-model", dir.to_str().unwrap(), "512"]);
        dir
    })
}

fn parity(mode: IndommluMode, name: &str) {
    let dir = long_model();
    let out = scratch(&format!("indommlu-{name}")).join("ref.json");
    reference(&["indommlu", dir.to_str().unwrap(), fixture().to_str().unwrap(), name, out.to_str().unwrap()]);
    let expected: Vec<Vec<f64>> = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let loaded = load_masked_lm(dir, Device::Cpu).unwrap();
    let questions = load(&fixture()).unwrap();
    let scorer = PllScorer::new(&loaded.model, &loaded.tokenizer, Device::Cpu);
    let ours = scorer.option_scores(&questions, &[], Setting::masked(mode)).unwrap();
    let mut worst: f64 = 0.0;
    for (o, e) in ours.iter().zip(&expected) {
        assert_eq!(o.len(), e.len());
        for (a, b) in o.iter().zip(e) {
            worst = worst.max((a - b).abs() / b.abs().max(1e-9));
        }
    }
    println!(
        "{name}: {} questions, {} option scores, max relative difference {worst:.2e}",
        questions.len(),
        ours.iter().map(Vec::len).sum::<usize>()
    );
    assert!(worst <= 1e-4);
}

#[test]
fn option_pll_matches_transformers() {
    parity(IndommluMode::OptionPll, "option-pll");
}

#[test]
fn letter_mode_matches_transformers() {
    parity(IndommluMode::Letter, "letter");
}

/// `eval indommlu --out` keeps every question's record: the option scores equal transformers',
/// rows and keys are the CSV's, and the records alone aggregate to the written report.
#[test]
fn per_question_records_hold_the_reference_scores_and_give_back_the_report() {
    let dir = long_model();
    let scratch_dir = scratch("indommlu-records");
    let reference_out = scratch_dir.join("ref.json");
    reference(&[
        "indommlu",
        dir.to_str().unwrap(),
        fixture().to_str().unwrap(),
        "letter",
        reference_out.to_str().unwrap(),
    ]);
    let expected: Vec<Vec<f64>> = serde_json::from_str(&std::fs::read_to_string(&reference_out).unwrap()).unwrap();
    let out = scratch_dir.join("eval");
    let fixture = fixture();
    indolm_ok(&[
        "--threads",
        "1",
        "eval",
        "indommlu",
        "--model",
        dir.to_str().unwrap(),
        "--data",
        fixture.to_str().unwrap(),
        "--mode",
        "letter",
        "--out",
        out.to_str().unwrap(),
    ]);
    let records = read_question_records(&out.join("indommlu_questions.csv")).unwrap();
    let questions = load(&fixture).unwrap();
    assert_eq!(records.len(), questions.len());
    let mut worst: f64 = 0.0;
    for ((r, q), e) in records.iter().zip(&questions).zip(&expected) {
        assert_eq!((r.row, r.key, r.scores.len()), (q.row, q.answer, q.options.len()));
        for (a, b) in r.scores.iter().zip(e) {
            worst = worst.max((a - b).abs() / b.abs().max(1e-9));
        }
    }
    println!("records: {} questions, max relative difference of the option scores {worst:.2e}", records.len());
    assert!(worst <= 1e-4);
    let written: IndommluReport =
        serde_json::from_str(&std::fs::read_to_string(out.join("indommlu.json")).unwrap()).unwrap();
    assert_eq!(aggregate_records(&records, Setting::masked(IndommluMode::Letter), None), written);
}

/// The paper's zero-shot set, `--questions all`: every row, the seven demonstrations included,
/// each scored as transformers scores it, the report saying which set it used; refused with
/// demonstrations in the prompts (`--shots`).
#[test]
fn zero_shot_on_every_row_scores_the_demonstrations_too_as_the_paper_did() {
    let (dir, fixture) = (long_model(), fixture());
    let work = scratch("indommlu-all");
    let reference_out = work.join("ref.json");
    let (model, csv) = (dir.to_str().unwrap(), fixture.to_str().unwrap());
    reference(&["indommlu", model, csv, "letter", reference_out.to_str().unwrap(), "all"]);
    let expected: Vec<Vec<f64>> = serde_json::from_str(&std::fs::read_to_string(&reference_out).unwrap()).unwrap();
    let out = work.join("eval");
    let args = ["--threads", "1", "eval", "indommlu", "--model", model, "--data", csv, "--mode", "letter"];
    let (stdout, stderr) = indolm_ok(&[&args[..], &["--questions", "all", "--out", out.to_str().unwrap()]].concat());
    assert!(stdout.contains("37 questions (every row, the is_for_fewshot demonstrations included)"), "{stdout}");
    assert!(stderr.contains("the 7 marked is_for_fewshot included (the paper's zero-shot set)"), "{stderr}");
    let records = read_question_records(&out.join("indommlu_questions.csv")).unwrap();
    assert_eq!((records.len(), expected.len()), (37, 37));
    for (r, e) in records.iter().zip(&expected) {
        for (a, b) in r.scores.iter().zip(e) {
            assert!((a - b).abs() / b.abs().max(1e-9) <= 1e-4, "row {}: {a} vs {b}", r.row);
        }
    }
    let written: IndommluReport =
        serde_json::from_str(&std::fs::read_to_string(out.join("indommlu.json")).unwrap()).unwrap();
    assert!(written.demonstrations_included && written.questions == 37);
    let err = indolm_fails(&[&args[..], &["--questions", "all", "--shots", "2"]].concat());
    assert!(err.contains("--questions") && err.contains("only with --shots 0"), "{err}");
}

#[test]
fn aggregation_on_the_fixture_with_hand_computed_values() {
    let data = load_all(&fixture()).unwrap();
    let questions = data.questions;
    // The fixture's seven rows marked is_for_fewshot are demonstrations, not questions.
    assert_eq!((questions.len(), data.examples.len(), data.has_fewshot_column), (30, 7, true));
    assert!(data.examples.iter().all(|e| e.for_fewshot) && questions.iter().all(|q| !q.for_fewshot));
    // Answer "A" everywhere. By hand: STEM = mean(Kimia 0, Biologi 50, IPA 0, Fisika 0) = 12.5,
    // its random baseline mean(1/5, 1/5, 1/4, 1/5) = 21.25; Social science 50.0 (random 24.67);
    // Humanities 50.0 (26.17); Indonesian language 50.0 (24.58); Local languages 80.0 (28.33);
    // average of the five areas 48.5, random 25.0. Four negated questions, none keyed A.
    let records: Vec<QuestionRecord> = questions
        .iter()
        .map(|q| QuestionRecord::new(q, (0..q.options.len()).map(|i| if i == 0 { 0.0 } else { -1.0 }).collect()))
        .collect::<indolm_torch::error::Result<_>>()
        .unwrap();
    let report = aggregate_records(&records, Setting::masked(IndommluMode::Letter), None);
    let got: Vec<(&str, f64, f64, usize)> =
        report.areas.iter().map(|a| (a.area.as_str(), a.accuracy, a.random, a.subjects)).collect();
    let expected = [
        ("STEM", 12.5, 21.25, 4),
        ("Social science", 50.0, 24.666666666666668, 5),
        ("Humanities", 50.0, 26.166666666666668, 5),
        ("Indonesian language", 50.0, 24.583333333333332, 1),
        ("Local languages and cultures", 80.0, 28.333333333333332, 5),
    ];
    for (g, e) in got.iter().zip(expected) {
        assert_eq!(g.0, e.0);
        assert!((g.1 - e.1).abs() < 1e-9 && (g.2 - e.2).abs() < 1e-9 && g.3 == e.3, "{g:?} vs {e:?}");
    }
    assert!((report.average - 48.5).abs() < 1e-9 && (report.random_average - 25.0).abs() < 1e-9);
    assert_eq!((report.negated.questions, report.negated.correct), (4, 0));
    assert_eq!(report.not_negated.questions, 26);
    // Table 5 per area: the negated rows are two STEM (IPA, Biologi), one PPKN and one Bahasa
    // Indonesia question, all keyed C; A is right for 1 of STEM's other 5, 4 of Social science's
    // 7, 3 of Humanities' 6, 2 of Indonesian's 3 and 4 of the local languages' 5.
    let negation: Vec<(&str, usize, usize, usize, usize)> = report
        .negation_by_area
        .iter()
        .map(|n| {
            (n.area.as_str(), n.negated.questions, n.negated.correct, n.not_negated.questions, n.not_negated.correct)
        })
        .collect();
    assert_eq!(
        negation,
        vec![
            ("STEM", 2, 0, 5, 1),
            ("Social science", 1, 0, 7, 4),
            ("Humanities", 0, 0, 6, 3),
            ("Indonesian language", 1, 0, 3, 2),
            ("Local languages and cultures", 0, 0, 5, 4)
        ]
    );
    assert!(report.markdown().contains("| Indonesian language | 0.0 | 66.7 | 1 / 3 |"), "{}", report.markdown());
    let cell = &report.subject_level["Bahasa Indonesia / Seleksi PTN"];
    assert_eq!((cell.questions, cell.correct), (1, 1));
    // Fig. 5's Indonesian language by grade: grades 2, 7 and 12 and the entrance exam, keyed A,
    // B, C and A (grade 8's row is a demonstration).
    let grades: Vec<(&str, usize, usize)> =
        report.indonesian_by_grade.iter().map(|g| (g.grade.as_str(), g.cell.questions, g.cell.correct)).collect();
    assert_eq!(grades, vec![("2", 1, 1), ("7", 1, 0), ("12", 1, 0), ("UE", 1, 1)]);
    assert!(report.markdown().contains(
        "Indonesian language by grade (accuracy, questions): 2 100.0 (1), 7 0.0 (1), 12 0.0 (1), UE 100.0 (1)"
    ));
    assert!(report.markdown().contains("| Bahasa Indonesia / Seleksi PTN | 100.0 | 20.0 | 1 | pass |"));
    assert!(questions
        .iter()
        .find(|q| q.level == "Seleksi PTN")
        .unwrap()
        .header()
        .contains("untuk seleksi masuk universitas."));
    assert!(questions[0].header().contains("soal IPA untuk 4 SD."));
}

#[test]
fn bad_csv_rows_are_named() {
    let dir = scratch("indommlu-bad");
    let header = "subject,level,kelas,soal,jawaban,kunci\n";
    let cases = [
        ("IPA,SD,4,Soal?,\"A. satu\nC. dua\",A\n", "row 2: cannot split the options"),
        ("IPA,SD,4,Soal?,\"A. satu\nB. dua\",D\n", "row 2: the key \"D\" is not among the options AB"),
        ("IPA,SD,4,,\"A. satu\nB. dua\",A\n", "row 2: empty question"),
    ];
    for (i, (row, message)) in cases.iter().enumerate() {
        let path = dir.join(format!("{i}.csv"));
        std::fs::write(&path, format!("{header}{row}")).unwrap();
        let err = load(&path).unwrap_err().to_string();
        assert!(err.contains(&format!("{i}.csv")) && err.contains(message), "{err}");
    }
    std::fs::write(dir.join("cols.csv"), "subject,level,soal,jawaban,kunci\n").unwrap();
    let err = load(&dir.join("cols.csv")).unwrap_err().to_string();
    assert!(err.contains("`kelas`") && err.contains("missing column"), "{err}");
    let err = indolm_fails(&[
        "eval",
        "indommlu",
        "--model",
        reference_model().to_str().unwrap(),
        "--data",
        dir.join("none.csv").to_str().unwrap(),
    ]);
    assert!(err.contains("none.csv") && err.contains("indolm download indommlu"), "{err}");
}

/// A tiny causal LM of `family` built by transformers with 1,024 positions (two-shot prompts
/// run to about 300 tokens with the tiny tokenizers); the Llama's tokenizer adds `<s>` to every
/// text as Llama's does, BLOOM's adds nothing.
fn causal_model(family: &'static str) -> PathBuf {
    static DIRS: OnceLock<std::sync::Mutex<std::collections::BTreeMap<&'static str, PathBuf>>> = OnceLock::new();
    let dirs = DIRS.get_or_init(Default::default);
    let mut dirs = dirs.lock().unwrap_or_else(|e| e.into_inner());
    dirs.entry(family)
        .or_insert_with(|| {
            let dir = scratch(&format!("indommlu-{family}"));
            reference(&["make-decoder", family, dir.to_str().unwrap(), "1024"]);
            if family == "llama" {
                reference(&["bos-template", dir.to_str().unwrap()]);
            }
            dir
        })
        .clone()
}

/// `eval indommlu` on a causal LM against IndoMMLU's evaluate.py (in Python, one question at a
/// time): the prompt's token ids, every option's score within 1e-4 relative, the prediction,
/// the confidence, the calibration error overall and per area, and the paper's breakdowns
/// computed in Python from evaluate.py's predictions (Tables 3, 4 and 5, Figs. 5 and 8).
/// `questions`: `held-out` or `all` (evaluate.py's own zero-shot run: every row).
fn causal_parity(family: &'static str, mode: &str, shots: usize, questions: &str) {
    causal_parity_of(&causal_model(family), family, mode, shots, questions);
}

/// [`causal_parity`] on the causal LM (or PEFT adapter) folder `model`, named `family`.
fn causal_parity_of(model: &Path, family: &str, mode: &str, shots: usize, questions: &str) -> IndommluReport {
    let questions_arg = questions;
    let work = scratch(&format!("indommlu-{family}-{mode}-{shots}-{questions}"));
    let (fixture, shots_arg) = (fixture(), shots.to_string());
    reference(&[
        "indommlu-causal",
        model.to_str().unwrap(),
        fixture.to_str().unwrap(),
        mode,
        &shots_arg,
        work.join("ref.json").to_str().unwrap(),
        questions,
    ]);
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(work.join("ref.json")).unwrap()).unwrap();
    let out = work.join("eval");
    let mut args = vec!["--threads", "1", "eval", "indommlu", "--model", model.to_str().unwrap()];
    args.extend([
        "--data",
        fixture.to_str().unwrap(),
        "--mode",
        mode,
        "--shots",
        &shots_arg,
        "--out",
        out.to_str().unwrap(),
        "--questions",
        questions,
    ]);
    let (printed, _) = indolm_ok(&args);
    assert!(printed.contains(&format!("causal LM, {shots}-shot")), "{printed}");
    let records = read_question_records(&out.join("indommlu_questions.csv")).unwrap();
    let report: IndommluReport =
        serde_json::from_str(&std::fs::read_to_string(out.join("indommlu.json")).unwrap()).unwrap();
    let setting = Setting { mode: report.mode, causal: true, shots };
    let lm = indolm_torch::model::decoder::load_causal_lm(model, Device::Cpu).unwrap();
    let template = PromptTemplate::of(&lm);
    let mut aggregate = aggregate_records(&records, setting, None);
    aggregate.demonstrations_included = questions == "all";
    aggregate.template = template;
    assert_eq!(report, aggregate, "the report is the records' aggregate");
    assert_eq!(report.mode.to_string(), mode);

    // The prompts' ids as transformers' tokenizer(prompt) gives them, special tokens included.
    let data = load_all(&fixture).unwrap();
    let questions = expected["questions"].as_array().unwrap();
    assert_eq!(questions.len(), records.len());
    let (mut worst_score, mut worst_confidence) = (0f64, 0f64);
    let mut shots_seen = Vec::new();
    // The questions scored, in CSV order: with `all`, the demonstrations too.
    let mut scored: Vec<&Question> = data.questions.iter().collect();
    if questions_arg == "all" {
        scored.extend(&data.examples);
        scored.sort_by_key(|q| q.row);
    }
    assert_eq!(scored.len(), records.len());
    for ((e, r), q) in questions.iter().zip(&records).zip(scored) {
        assert_eq!(e["row"].as_u64().unwrap() as usize, r.row);
        let shown = indolm_eval::indommlu::causal::fewshot_examples(q, &data.examples, shots);
        shots_seen.push(shown.len());
        assert_eq!(e["shots"].as_u64().unwrap() as usize, shown.len(), "row {}", r.row);
        let mut text = indolm_eval::indommlu::causal::prompt_in(q, &shown, template);
        if mode == "full-answer" {
            text.push_str(q.jawaban.lines().next().unwrap());
        }
        let ids: Vec<i64> = e["ids"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
        assert_eq!(lm.tokenizer.encode_with_special_tokens(&text).unwrap(), ids, "row {}", r.row);
        let scores: Vec<f64> = e["scores"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        assert_eq!(scores.len(), r.scores.len());
        for (a, b) in r.scores.iter().zip(&scores) {
            worst_score = worst_score.max((a - b).abs() / b.abs().max(1e-9));
        }
        assert_eq!(r.prediction, e["pred"].as_u64().unwrap() as usize, "row {}: {:?} vs {scores:?}", r.row, r.scores);
        worst_confidence = worst_confidence.max((r.confidence() - e["confidence"].as_f64().unwrap()).abs());
    }
    let ece_gap = (report.ece - expected["ece"].as_f64().unwrap()).abs();
    breakdowns_match(&report, &expected["breakdowns"]);
    for a in &report.areas {
        let theirs = expected["areas"][&a.area].as_f64().unwrap();
        assert!((a.ece - theirs).abs() < 1e-3, "{}: ECE {} vs {theirs}", a.area, a.ece);
    }
    println!(
        "{family} {mode} {shots}-shot: {} questions (demonstrations per prompt {:?}), accuracy {:.1}, ECE {:.2} (theirs {:.2}); max relative score difference {worst_score:.2e}, max confidence difference {worst_confidence:.2e}",
        records.len(),
        shots_seen,
        report.average,
        report.ece,
        expected["ece"].as_f64().unwrap()
    );
    assert!(
        worst_score < 1e-4 && worst_confidence < 1e-4 && ece_gap < 1e-3,
        "{worst_score} {worst_confidence} {ece_gap}"
    );
    report
}

/// The paper's breakdowns in `report` equal those the Python port computes from evaluate.py's
/// predictions: accuracy per subject/level (Table 4) and per area with their average (Table 3),
/// with and without negation per area (Table 5), Indonesian language by grade (Fig. 5), and the
/// subject/levels' mean confidence and its correlation with accuracy (Fig. 8).
fn breakdowns_match(report: &IndommluReport, theirs: &serde_json::Value) {
    let close = |a: f64, b: f64, what: &str| assert!((a - b).abs() < 1e-3, "{what}: {a} vs {b}");
    let cells = theirs["subject_level"].as_object().unwrap();
    assert_eq!(cells.len(), report.subject_level.len());
    for (key, cell) in &report.subject_level {
        let t = &cells[key];
        assert_eq!(cell.questions as u64, t["questions"].as_u64().unwrap(), "{key}");
        close(cell.accuracy(), t["accuracy"].as_f64().unwrap(), key);
        close(cell.mean_confidence(), t["confidence"].as_f64().unwrap(), key);
    }
    for a in &report.areas {
        close(a.accuracy, theirs["areas"][&a.area].as_f64().unwrap(), &a.area);
    }
    assert_eq!(report.areas.len(), theirs["areas"].as_object().unwrap().len());
    close(report.average, theirs["average"].as_f64().unwrap(), "average");
    assert_eq!(report.negation_by_area.len(), theirs["negation"].as_object().unwrap().len());
    for n in &report.negation_by_area {
        let t = &theirs["negation"][&n.area];
        for (cell, side) in [(&n.negated, "with"), (&n.not_negated, "without")] {
            assert_eq!(cell.questions as u64, t[side][1].as_u64().unwrap(), "{} {side}", n.area);
            close(cell.accuracy(), t[side][0].as_f64().unwrap(), &n.area);
        }
    }
    let grades = theirs["grades"].as_object().unwrap();
    assert_eq!(report.indonesian_by_grade.len(), grades.len());
    for g in &report.indonesian_by_grade {
        assert_eq!(g.cell.questions as u64, grades[&g.grade][1].as_u64().unwrap(), "grade {}", g.grade);
        close(g.cell.accuracy(), grades[&g.grade][0].as_f64().unwrap(), &g.grade);
    }
    close(report.confidence_accuracy_r.unwrap(), theirs["confidence_accuracy_r"].as_f64().unwrap(), "r");
}

#[test]
fn causal_letter_zero_and_two_shot_match_indommlu_evaluate_py() {
    causal_parity("llama", "letter", 0, "held-out");
    causal_parity("llama", "letter", 2, "held-out");
    // The bf16 path CUDA runs, here on the CPU: the same letter scores to bf16's precision.
    let (model, data) = (causal_model("llama"), load_all(&fixture()).unwrap());
    let score = |kind| {
        let lm = indolm_torch::model::decoder::load_causal_lm_as(&model, Device::Cpu, kind).unwrap();
        let scorer = indolm_eval::causal::CausalScorer::new(&lm).unwrap();
        let setting = Setting { mode: IndommluMode::Letter, causal: true, shots: 2 };
        scorer.option_scores(&data.questions, &data.examples, setting).unwrap()
    };
    let (fp32, bf16) = (score(tch::Kind::Float), score(tch::Kind::BFloat16));
    let worst =
        fp32.iter().flatten().zip(bf16.iter().flatten()).map(|(a, b)| (a - b).abs() / a.abs()).fold(0f64, f64::max);
    println!("llama letter 2-shot in bf16: max relative difference of the letter scores from fp32 {worst:.2e}");
    assert!(worst < 0.05, "{worst}");
}

#[test]
fn causal_full_answer_matches_indommlu_evaluate_py_with_and_without_bos() {
    causal_parity("llama", "full-answer", 1, "held-out");
    causal_parity("bloom", "full-answer", 0, "held-out");
    causal_parity("bloom", "letter", 2, "held-out");
}

/// evaluate.py's own run, as the paper's tables were made: zero-shot on every row (the
/// demonstrations included), with the per-level, negation, per-grade and confidence breakdowns.
#[test]
fn causal_zero_shot_on_every_row_matches_evaluate_py_and_its_breakdowns() {
    causal_parity("bloom", "letter", 0, "all");
}

/// A PEFT LoRA adapter (Bactrian-X's kind) as evaluate.py runs `--lora_weights`: PeftModel over
/// its base, with the script's `### Input:` … `### Output:` prompt; indolm merges it at load.
#[test]
fn a_lora_adapter_is_scored_as_evaluate_py_scores_bactrian_x() {
    let adapter = scratch("indommlu-lora");
    reference(&["make-lora", causal_model("llama").to_str().unwrap(), adapter.to_str().unwrap()]);
    let report = causal_parity_of(&adapter, "llama+lora", "letter", 0, "held-out");
    assert_eq!(report.template, PromptTemplate::LoraInstruct);
    assert!(report.markdown().contains("causal LM, 0-shot, LoRA instruction prompt"), "{}", report.markdown());
}

/// Modes and flags that do not fit the model are refused, naming what would.
#[test]
fn mode_and_shots_that_do_not_fit_the_model_are_refused() {
    let fixture = fixture();
    let data = fixture.to_str().unwrap();
    let llama = causal_model("llama");
    let mlm = reference_model().to_str().unwrap().to_string();
    let err =
        indolm_fails(&["eval", "indommlu", "--model", llama.to_str().unwrap(), "--data", data, "--mode", "option-pll"]);
    assert!(err.contains("--mode") && err.contains("letter or full-answer"), "{err}");
    let err = indolm_fails(&["eval", "indommlu", "--model", &mlm, "--data", data, "--mode", "full-answer"]);
    assert!(err.contains("option-pll or letter"), "{err}");
    let err = indolm_fails(&["eval", "indommlu", "--model", &mlm, "--data", data, "--shots", "2"]);
    assert!(err.contains("--shots") && err.contains("causal"), "{err}");
    // Few-shot needs the demonstrations' column.
    let dir = scratch("indommlu-no-fewshot-column");
    let csv = dir.join("q.csv");
    std::fs::write(&csv, "subject,level,kelas,soal,jawaban,kunci\nIPA,SD,4,Soal?,\"A. satu\nB. dua\",A\n").unwrap();
    let err = indolm_fails(&[
        "eval",
        "indommlu",
        "--model",
        llama.to_str().unwrap(),
        "--data",
        csv.to_str().unwrap(),
        "--shots",
        "1",
    ]);
    assert!(err.contains("is_for_fewshot") && err.contains("q.csv"), "{err}");
    // A prompt longer than the model's positions is refused before anything is scored.
    let short = scratch("indommlu-short-llama");
    reference(&["make-decoder", "llama", short.to_str().unwrap(), "64"]);
    let err = indolm_fails(&["eval", "indommlu", "--model", short.to_str().unwrap(), "--data", data]);
    assert!(err.contains("IndoMMLU row ") && err.contains("more than the model's 64 positions"), "{err}");
}

/// `report indommlu-table` lays evaluations side by side: each row's figures are its report's,
/// the random row is the first's, and a model that scored other questions is pointed out.
#[test]
fn the_table_puts_models_side_by_side_and_flags_other_questions() {
    use indolm_eval::indommlu::write_evaluation;
    let questions = load(&fixture()).unwrap();
    let work = scratch("indommlu-table");
    // Model A answers A everywhere, B the key except in Bahasa subjects (Budaya Alam Minangkabau,
    // the one local subject that is not, is right: 20%); C saw 20 questions.
    let evaluate = |name: &str, pick: &dyn Fn(&indolm_eval::indommlu::Question) -> usize, n: usize, causal: bool| {
        let records: Vec<QuestionRecord> = questions[..n]
            .iter()
            .map(|q| {
                let chosen = pick(q);
                QuestionRecord::new(q, (0..q.options.len()).map(|i| if i == chosen { 0.5 } else { -0.5 }).collect())
            })
            .collect::<indolm_torch::error::Result<_>>()
            .unwrap();
        let setting = Setting { mode: IndommluMode::Letter, causal, shots: if causal { 2 } else { 0 } };
        let report = aggregate_records(&records, setting, None);
        let dir = work.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        write_evaluation(&dir, &report, &records).unwrap();
        report
    };
    let a = evaluate("a", &|_| 0, 30, false);
    let b = evaluate(
        "b",
        &|q| if q.subject.starts_with("Bahasa") { (q.answer + 1) % q.options.len() } else { q.answer },
        30,
        true,
    );
    evaluate("c", &|_| 0, 20, false);
    let json = work.join("table.json");
    let (table, _) = indolm_ok(&[
        "report",
        "indommlu-table",
        &format!("IndoBERT={}", work.join("a").display()),
        work.join("b/indommlu.json").to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    println!("{table}");
    let area = |r: &IndommluReport, name: &str| r.areas.iter().find(|x| x.area == name).unwrap().accuracy;
    assert!(table.contains(&format!(
        "| IndoBERT | masked LM, letter | 30 | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | **{:.1}** | {:.1} |",
        area(&a, "STEM"),
        area(&a, "Social science"),
        area(&a, "Humanities"),
        area(&a, "Indonesian language"),
        area(&a, "Local languages and cultures"),
        a.average,
        a.ece
    )));
    assert!(table.contains(&format!(
        "| b | causal LM, letter, 2-shot | 30 | 100.0 | 100.0 | 100.0 | 0.0 | 20.0 | **{:.1}** |",
        b.average
    )));
    assert!(table.contains(&format!("| random | (by option counts) | 30 | {:.1} |", a.areas[0].random)));
    assert!(!table.contains("Not the same questions"));
    let rows: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!((rows[0]["model"].as_str(), rows[1]["model"].as_str()), (Some("IndoBERT"), Some("b")));
    assert_eq!(rows[1]["average"].as_f64().unwrap(), b.average);
    let (table, _) =
        indolm_ok(&["report", "indommlu-table", work.join("a").to_str().unwrap(), work.join("c").to_str().unwrap()]);
    assert!(table.contains("Not the same questions as a: c"), "{table}");
    let err = indolm_fails(&["report", "indommlu-table", work.to_str().unwrap()]);
    assert!(err.contains("indommlu.json") && err.contains("eval indommlu --out"), "{err}");
}
