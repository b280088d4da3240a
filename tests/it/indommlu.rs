//! IndoMMLU: option-PLL and letter scores against transformers on the same checkpoint, the
//! aggregation arithmetic on the fixture (hand-computed), and bad CSV input.
use crate::common::*;
use indolm::eval::indommlu::{aggregate, aggregate_records, load, score_questions, IndommluReport};
use indolm::eval::indommlu_records::read_question_records;
use indolm::model::model_dir::load_masked_lm;
use indolm::recipe::IndommluMode;
use std::path::PathBuf;
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
    let ours = score_questions(&loaded.model, &loaded.tokenizer, &questions, mode, Device::Cpu).unwrap();
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
    assert_eq!(aggregate_records(&records, IndommluMode::Letter, None), written);
}

#[test]
fn aggregation_on_the_fixture_with_hand_computed_values() {
    let questions = load(&fixture()).unwrap();
    assert_eq!(questions.len(), 30);
    // Answer "A" everywhere. By hand: STEM = mean(Kimia 0, Biologi 50, IPA 0, Fisika 0) = 12.5,
    // its random baseline mean(1/5, 1/5, 1/4, 1/5) = 21.25; Social science 50.0 (random 24.67);
    // Humanities 50.0 (26.17); Indonesian language 50.0 (24.58); Local languages 80.0 (28.33);
    // average of the five areas 48.5, random 25.0. Four negated questions, none keyed A.
    let report = aggregate(&questions, &vec![0; questions.len()], IndommluMode::Letter, None);
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
    let cell = &report.subject_level["Bahasa Indonesia / Seleksi PTN"];
    assert_eq!((cell.questions, cell.correct), (1, 1));
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
