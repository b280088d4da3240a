//! IndoMMLU: option-PLL and letter scores against transformers on the same checkpoint, the
//! aggregation arithmetic on the fixture (hand-computed), and bad CSV input.
use crate::common::*;
use indolm::eval::indommlu::{aggregate, load, score_questions};
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
