//! NusaX translation without a model: `indolm baseline nusax-mt`'s Copy rows equal the paper's
//! Tables 4 and 6 on the split they were computed on, its word-substitution translations are
//! scored by the sacrebleu package itself to the same figures, and `indolm eval bleu` gives the
//! same numbers from the files the command writes.
use crate::common::*;
use serde_json::Value;

/// `baseline nusax-mt --split train` on tests/data/nusax, once for every test of this file: the
/// output folder and its JSON report.
fn train_split_report() -> &'static (std::path::PathBuf, Value) {
    static REPORT: std::sync::OnceLock<(std::path::PathBuf, Value)> = std::sync::OnceLock::new();
    REPORT.get_or_init(|| {
        let out = scratch("nusax-mt-baselines");
        let data = test_data().join("nusax");
        let (stdout, _) = indolm_ok(&[
            "baseline",
            "nusax-mt",
            "--data",
            data.to_str().unwrap(),
            "--split",
            "train",
            "--out",
            out.to_str().unwrap(),
        ]);
        println!("{stdout}");
        assert!(stdout.contains("| Copy (paper) | 5.88 | 9.99 |"), "{stdout}");
        let report =
            serde_json::from_str(&std::fs::read_to_string(out.join("nusax_mt_baselines.json")).unwrap()).unwrap();
        (out, report)
    })
}

/// The rows of `table` (`x-ind` or `ind-x`) for `system`, as (direction, ours, paper).
fn row(report: &Value, table: &str, system: &str) -> Vec<(String, f64, f64)> {
    let row = report["rows"].as_array().unwrap().iter().find(|r| r["table"] == table && r["system"] == system).unwrap();
    row["directions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["direction"].as_str().unwrap().to_string(),
                d["bleu"].as_f64().unwrap(),
                d["paper_bleu"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn copy_rows_equal_tables_4_and_6_on_the_train_split_and_word_substitution_improves_on_them() {
    let (_, report) = train_split_report();
    assert_eq!(report["sentences"], 500);
    assert_eq!(report["bleu_signature"], "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0");
    for table in ["x-ind", "ind-x"] {
        let copy = row(report, table, "copy");
        assert_eq!(copy.len(), 11);
        for (direction, ours, paper) in &copy {
            // The paper prints two decimals: ours, rounded, is its figure.
            assert!((ours - paper).abs() <= 0.005 + 1e-9, "{direction}: indolm {ours:.4}, paper {paper}");
        }
        let substitution = row(report, table, "word-substitution");
        let mean = |r: &[(String, f64, f64)]| r.iter().map(|x| x.1).sum::<f64>() / r.len() as f64;
        let gaps: Vec<String> = substitution.iter().map(|(d, o, p)| format!("{d} {o:.2}/{p:.2}")).collect();
        println!("{table} word substitution, indolm/paper: {}", gaps.join(", "));
        // As in the paper, substitution helps on average, and on the languages closest to
        // Indonesian (Javanese, Minangkabau, Sundanese) in both directions.
        assert!(mean(&substitution) > mean(&copy) + 0.5, "{} vs {}", mean(&substitution), mean(&copy));
        for code in ["jav", "min", "sun"] {
            let pick = |r: &[(String, f64, f64)]| r.iter().find(|x| x.0.contains(code)).unwrap().1;
            assert!(pick(&substitution) > pick(&copy), "{table} {code}");
        }
    }
}

#[test]
fn the_written_translations_score_the_same_in_sacrebleu_and_in_eval_bleu() {
    let (out, report) = train_split_report();
    let rows = report["rows"].as_array().unwrap();
    // The corpus's columns, read here with the csv crate (not indolm's reader), are the
    // references; two directions of each table, word substitution's translations as indolm
    // wrote them, scored by sacrebleu.
    let corpus = test_data().join("nusax/mt/train.csv");
    let mut csv = csv::Reader::from_path(&corpus).unwrap();
    let header: Vec<String> = csv.headers().unwrap().iter().map(String::from).collect();
    let records: Vec<csv::StringRecord> = csv.records().map(|r| r.unwrap()).collect();
    let column = |name: &str| {
        let i = header.iter().position(|h| h == name).unwrap();
        records.iter().map(|r| r[i].replace("\r\n", " ").replace(['\n', '\r'], " ")).collect::<Vec<_>>()
    };
    let mut cases = Vec::new();
    let mut expected = Vec::new();
    for (direction, target, table) in [
        ("jav-ind", "indonesian", "x-ind"),
        ("bbc-ind", "indonesian", "x-ind"),
        ("ind-sun", "sundanese", "ind-x"),
        ("ind-min", "minangkabau", "ind-x"),
    ] {
        let hyp_file = out.join(format!("hypotheses/word-substitution/{direction}.txt"));
        let hyps: Vec<String> = std::fs::read_to_string(&hyp_file).unwrap().lines().map(String::from).collect();
        assert_eq!(hyps.len(), 500, "{direction}");
        let refs = column(target);
        let ours = rows.iter().find(|r| r["table"] == table && r["system"] == "word-substitution").unwrap()
            ["directions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["direction"] == direction)
            .unwrap()
            .clone();
        cases.push(serde_json::json!({"name": direction, "hyps": hyps, "refs": [refs.clone()]}));
        expected.push((direction, hyp_file, refs, ours));
    }
    let dir = scratch("nusax-mt-sacrebleu");
    let spec = serde_json::json!({"bleu_options": {"default": {}}, "chrf_options": {"default": {}}, "cases": cases});
    std::fs::write(dir.join("cases.json"), spec.to_string()).unwrap();
    reference(&["sacrebleu", dir.join("cases.json").to_str().unwrap(), dir.join("out.json").to_str().unwrap()]);
    let theirs: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("out.json")).unwrap()).unwrap();
    for (direction, hyp_file, refs, ours) in expected {
        let bleu = &theirs[direction]["bleu"]["default"];
        let chrf = &theirs[direction]["chrf"]["default"];
        println!("{direction}: indolm {} | sacrebleu {}", ours["bleu_detail"], bleu["str"]);
        assert!((ours["bleu"].as_f64().unwrap() - bleu["score"].as_f64().unwrap()).abs() < 1e-9, "{direction}");
        assert_eq!(ours["bleu_detail"], bleu["str"], "{direction}");
        assert!((ours["chrf"].as_f64().unwrap() - chrf["score"].as_f64().unwrap()).abs() < 1e-9, "{direction}");

        // `eval bleu` on the files prints sacrebleu's lines and signatures.
        let ref_file = dir.join(format!("{direction}.ref"));
        std::fs::write(&ref_file, refs.join("\n") + "\n").unwrap();
        let (stdout, _) =
            indolm_ok(&["eval", "bleu", "--pred", hyp_file.to_str().unwrap(), "--ref", ref_file.to_str().unwrap()]);
        assert!(stdout.contains(bleu["str"].as_str().unwrap()), "{stdout}");
        assert!(stdout.contains(chrf["str"].as_str().unwrap()), "{stdout}");
        assert!(
            stdout.contains(bleu["signature"].as_str().unwrap())
                && stdout.contains(chrf["signature"].as_str().unwrap())
        );
    }
}

#[test]
fn eval_bleu_takes_several_references_and_refuses_misaligned_files() {
    let dir = scratch("eval-bleu-args");
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let (pred, r1, r2) = (
        write("pred.txt", "Saya makan nasi goreng.\nDia pergi ke pasar!\n"),
        write("r1.txt", "Saya makan nasi.\nDia ke pasar.\n"),
        write("r2.txt", "Aku makan nasi goreng.\nDia pergi ke pasar.\n"),
    );
    let json = dir.join("bleu.json");
    let (stdout, _) =
        indolm_ok(&["eval", "bleu", "--pred", &pred, "--ref", &r1, &r2, "--json", json.to_str().unwrap()]);
    assert!(stdout.contains("nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"), "{stdout}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["sentences"], 2);
    assert!(report["bleu"]["score"].as_f64().unwrap() > 0.0);
    let (stdout, _) =
        indolm_ok(&["eval", "bleu", "--pred", &pred, "--ref", &r1, "--lowercase", "--chrf-word-order", "2"]);
    assert!(stdout.contains("case:lc") && stdout.contains("chrF2++ = "), "{stdout}");

    let short = write("short.txt", "Saya makan nasi.\n");
    let err = indolm_fails(&["eval", "bleu", "--pred", &pred, "--ref", &short]);
    assert!(err.contains("short.txt") && err.contains("1 references but 2 hypotheses"), "{err}");
    let err = indolm_fails(&["eval", "bleu", "--pred", &write("empty.txt", ""), "--ref", &r1]);
    assert!(err.contains("empty.txt") && err.contains("no translation to score"), "{err}");
    let err = indolm_fails(&["baseline", "nusax-mt", "--data", dir.to_str().unwrap(), "--split", "train"]);
    assert!(err.contains("indolm download nusax"), "{err}");
    let err = indolm_fails(&["baseline", "nusax-mt", "--systems", "pbsmt"]);
    assert!(err.contains("pbsmt needs a trained model"), "{err}");
}
