//! The bias evaluation: PLL parity with transformers (per-token reference loop) on real
//! sentences and for the CrowS-Pairs variant, win-rate arithmetic, pair loaders and their
//! errors, and the checkpoint hook's TensorBoard curves and bias.json.
use crate::common::*;
use indolm::eval::bias::{outcome, tally_language};
use indolm::eval::pairs::{load_crows, load_indobias, BiasPair};
use indolm::eval::pll::{crows_inputs, shared_positions, PllScorer, SentenceScore};
use indolm::model::model_dir::load_masked_lm;
use indolm::recipe::BiasMetric;
use std::path::Path;
use tch::Device;

/// Real sentences that fit the reference model's 64 positions.
fn shared_sentences(n_ud: usize, n_nusax: usize) -> Vec<String> {
    let tok = indolm::data::tokenizer::TextTokenizer::from_dir(reference_model()).unwrap();
    let fits = |s: &String| tok.encode(s).unwrap().len() <= 60;
    let ud = std::fs::read_to_string(test_data().join("ud-indonesian/id_gsd-ud-test.conllu")).unwrap();
    let mut out: Vec<String> =
        ud.lines().filter_map(|l| l.strip_prefix("# text = ")).map(String::from).filter(fits).take(n_ud).collect();
    let mut reader = csv::Reader::from_path(test_data().join("nusax/sentiment/javanese/test.csv")).unwrap();
    let text_col = reader.headers().unwrap().iter().position(|h| h == "text").unwrap();
    out.extend(reader.records().map(|r| r.unwrap()[text_col].to_string()).filter(fits).take(n_nusax));
    out
}

#[test]
fn pll_matches_transformers_per_token_loop() {
    let model_dir = reference_model();
    let work = scratch("pll-parity");
    let sentences = shared_sentences(12, 8);
    std::fs::write(work.join("s.txt"), sentences.join("\n")).unwrap();
    reference(&[
        "pll",
        model_dir.to_str().unwrap(),
        work.join("s.txt").to_str().unwrap(),
        work.join("ref.json").to_str().unwrap(),
    ]);
    let expected: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(work.join("ref.json")).unwrap()).unwrap();
    let loaded = load_masked_lm(model_dir, Device::Cpu).unwrap();
    let mut scorer = PllScorer::new(&loaded.model, &loaded.tokenizer, Device::Cpu);
    scorer.token_budget = 1024; // several batches of mixed lengths
    let inputs: Vec<_> = sentences.iter().map(|s| scorer.full_input(s).unwrap()).collect();
    let scores = scorer.score(&inputs);
    let mut worst: f64 = 0.0;
    for (s, e) in scores.iter().zip(&expected) {
        assert_eq!(s.tokens as u64, e["tokens"].as_u64().unwrap());
        let rel = (s.pll - e["pll"].as_f64().unwrap()).abs() / e["pll"].as_f64().unwrap().abs();
        worst = worst.max(rel);
    }
    println!(
        "{} sentences ({} masked positions): max relative PLL difference {worst:.2e}",
        scores.len(),
        scores.iter().map(|s| s.tokens).sum::<usize>()
    );
    assert!(worst <= 1e-4);
}

#[test]
fn crows_variant_matches_metric_py_on_crows_pairs() {
    let model_dir = reference_model();
    let work = scratch("crows-parity");
    let crows = load_crows(&test_data().join("crows-pairs/crows_pairs_anonymized.csv")).unwrap();
    let tok = indolm::data::tokenizer::TextTokenizer::from_dir(model_dir).unwrap();
    let fits = |s: &str| tok.encode(s).unwrap().len() <= 60;
    let pairs: Vec<&BiasPair> =
        crows.languages[0].1.iter().filter(|p| fits(&p.pro) && fits(&p.anti)).take(15).collect();
    let lines: Vec<String> = pairs.iter().map(|p| format!("{}\t{}", p.pro, p.anti)).collect();
    std::fs::write(work.join("pairs.tsv"), lines.join("\n") + "\n").unwrap();
    reference(&[
        "crows",
        model_dir.to_str().unwrap(),
        work.join("pairs.tsv").to_str().unwrap(),
        work.join("ref.json").to_str().unwrap(),
    ]);
    let expected: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(work.join("ref.json")).unwrap()).unwrap();
    let loaded = load_masked_lm(model_dir, Device::Cpu).unwrap();
    let scorer = PllScorer::new(&loaded.model, &loaded.tokenizer, Device::Cpu);
    let mut worst: f64 = 0.0;
    for (p, e) in pairs.iter().zip(&expected) {
        let (a, b) = crows_inputs(&loaded.tokenizer, &p.pro, &p.anti).unwrap();
        assert_eq!(a.positions.len() as u64, e["shared"].as_u64().unwrap(), "shared tokens of {:?}", p.pro);
        let s = scorer.score(&[a, b]);
        for (ours, key) in [(s[0].pll, "a"), (s[1].pll, "b")] {
            let theirs = e[key].as_f64().unwrap();
            worst = worst.max((ours - theirs).abs() / theirs.abs().max(1e-9));
        }
    }
    println!("{} CrowS pairs: max relative difference of shared-token PLL {worst:.2e}", pairs.len());
    assert!(worst <= 1e-4);
}

#[test]
fn difflib_blocks_are_reproduced() {
    // difflib.SequenceMatcher(None, a, b).get_opcodes() "equal" blocks, worked by hand.
    let (a, b) = shared_positions(&[1, 5, 6, 7, 9, 2], &[1, 5, 8, 7, 9, 2]);
    assert_eq!(a, vec![0, 1, 3, 4, 5]);
    assert_eq!(b, vec![0, 1, 3, 4, 5]);
    // Python: [('equal', 0, 2, 0, 2), ('equal', 2, 3, 3, 4), ('equal', 4, 5, 4, 5)]
    let (a, b) = shared_positions(&[1, 4, 4, 3, 2], &[1, 4, 3, 4, 2]);
    assert_eq!((a, b), (vec![0, 1, 2, 4], vec![0, 1, 3, 4]));
}

#[test]
fn win_rates_ties_and_rounding() {
    let pair = |d: &str, s: &str| BiasPair { pro: "a".into(), anti: "b".into(), domain: d.into(), subdomain: s.into() };
    let pairs = vec![pair("A", "x"), pair("A", "x"), pair("A", "y"), pair("B", "z")];
    let outcomes = [(true, false), (false, true), (true, false), (false, false)];
    let r = tally_language("id", &pairs, &outcomes);
    assert_eq!((r.overall.tally.pairs, r.overall.tally.wins, r.overall.tally.ties), (4, 2, 1));
    assert_eq!(r.overall.win_rate, 50.0);
    assert_eq!(
        r.domains.iter().map(|c| (c.name.as_str(), c.win_rate)).collect::<Vec<_>>(),
        vec![("A", 200.0 / 3.0), ("B", 0.0)]
    );
    assert_eq!(r.subdomains[0].name, "A / x");
    assert_eq!(r.subdomains[0].win_rate, 50.0);
    // PPPL: the lower perplexity wins, strictly; equal is a tie and not a win.
    let s = |pll: f64, tokens: usize| SentenceScore { pll, tokens };
    assert_eq!(outcome(BiasMetric::Pppl, &s(-10.0, 5), &s(-12.0, 5)), (true, false));
    assert_eq!(outcome(BiasMetric::Pppl, &s(-10.0, 5), &s(-12.0, 6)), (false, true)); // 2 nats a token each: a tie
    assert_eq!(outcome(BiasMetric::Pppl, &s(-12.0, 4), &s(-10.0, 5)), (false, false));
    // CrowS: higher PLL wins after rounding to 3 decimals; equal after rounding is a tie.
    assert_eq!(outcome(BiasMetric::Crows, &s(-3.0001, 3), &s(-3.0004, 3)), (false, true));
    assert_eq!(outcome(BiasMetric::Crows, &s(-3.001, 3), &s(-3.002, 3)), (true, false));
}

fn write_pairs(dir: &Path, lang: &str, rows: &[[&str; 4]], header: &str) {
    let mut text = format!("{header}\n");
    for r in rows {
        text.push_str(&format!("\"{}\",\"{}\",{},{}\n", r[0], r[1], r[2], r[3]));
    }
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(format!("{lang}.csv")), text).unwrap();
}

#[test]
fn indobias_loader_layout_and_errors() {
    let fixture = root().join("tests/fixtures/indobias");
    let set = load_indobias(&fixture).unwrap();
    let langs: Vec<&str> = set.languages.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(langs, vec!["id", "jv", "su", "mak"]);
    assert!(set.languages.iter().all(|(_, p)| p.len() == 40));
    let domains: std::collections::BTreeSet<&str> = set.languages[0].1.iter().map(|p| p.domain.as_str()).collect();
    assert_eq!(domains.len(), 5);

    let dir = scratch("pairs-errors");
    let h = "protrope,antitrope,domain,subdomain";
    write_pairs(&dir.join("a/pair"), "indonesian", &[["Ibu memasak.", "Ayah memasak.", "Social", "family"]], h);
    write_pairs(
        &dir.join("a/pair"),
        "javanese",
        &[["Ibu masak.", "Bapak masak.", "Social", "family"], ["x", "y", "Social", "family"]],
        h,
    );
    let err = load_indobias(&dir.join("a")).unwrap_err().to_string();
    assert!(
        err.contains("javanese.csv") && err.contains("row-aligned") && err.contains("2 pairs") && err.contains("has 1"),
        "{err}"
    );

    write_pairs(&dir.join("b/pair"), "klingon", &[["a", "b", "c", "d"]], h);
    let err = load_indobias(&dir.join("b")).unwrap_err().to_string();
    assert!(err.contains("unknown language \"klingon\""), "{err}");

    write_pairs(&dir.join("c/pair"), "id", &[["a", "b", "c", "d"]], "sentence,antitrope,domain,subdomain");
    let err = load_indobias(&dir.join("c")).unwrap_err().to_string();
    assert!(err.contains("no protrope column") && err.contains("sentence"), "{err}");

    write_pairs(&dir.join("d/pair"), "sundanese", &[["a", "b", "c", "d"], ["", "b", "c", "d"]], h);
    let err = load_indobias(&dir.join("d")).unwrap_err().to_string();
    assert!(err.contains("sundanese.csv") && err.contains("row 2: empty protrope"), "{err}");

    // Column-name variants, JSON Lines, language from a column.
    std::fs::create_dir_all(dir.join("e")).unwrap();
    std::fs::write(dir.join("e/all.jsonl"), "{\"Pro\": \"Ibu memasak.\", \"Anti\": \"Ayah memasak.\", \"Category\": \"Social\", \"SubCategory\": \"family\", \"lang\": \"su\"}\n").unwrap();
    let set = load_indobias(&dir.join("e")).unwrap();
    assert_eq!(set.languages[0].0, "su");
    assert_eq!(set.languages[0].1[0].anti, "Ayah memasak.");
}

#[test]
fn hook_writes_curves_and_bias_json_at_each_checkpoint() {
    let work = scratch("bias-hook");
    let fixture = root().join("tests/fixtures/indobias");
    let recipe = format!(
        r#"name = "hook"
output_dir = "{out}"
[model]
preset = "tiny"
hidden_size = 32
num_attention_heads = 2
intermediate_size = 64
[tokenizer]
path = "{tok}"
[data]
corpus = "c"
corpora_dir = "{corpora}"
seq_len = 32
[[data.sources]]
name = "ud"
lang = "id"
paths = ["{ud}"]
[optimizer]
lr = 1e-3
batch_size = 4
warmup_steps = 2
max_steps = 6
[checkpoint]
every = 3
keep_last = 1
[eval.bias]
pairs = "{pairs}"
languages = ["indonesian", "jv"]
[eval.indommlu]
data = "{mmlu}"
mode = "letter"
subsample = 12
[logging]
tensorboard = "{runs}"
every = 3
"#,
        out = work.join("ck").display(),
        tok = reference_model().display(),
        corpora = work.join("corpora").display(),
        ud = test_data().join("ud-indonesian/id_gsd-ud-dev.conllu").display(),
        pairs = fixture.display(),
        mmlu = root().join("tests/fixtures/indommlu/indoMMLU-fixture.csv").display(),
        runs = work.join("runs").display()
    );
    std::fs::write(work.join("r.toml"), recipe).unwrap();
    let (stdout, _) = indolm_ok(&["train", work.join("r.toml").to_str().unwrap()]);
    assert!(
        stdout.contains("step 3: bias evaluation took") && stdout.contains("step 6: bias evaluation took"),
        "{stdout}"
    );
    for step in [3, 6] {
        let report: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(work.join(format!("ck/hook/step-{step}/bias.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(report["step"], step);
        assert_eq!(report["languages"].as_array().unwrap().len(), 2);
    }
    // The older checkpoint's weights are pruned, its evaluation kept.
    assert!(!work.join("ck/hook/step-3/model.safetensors").exists());
    let json = reference(&["tb-scalars", work.join("runs/hook").to_str().unwrap()]);
    let scalars: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    for tag in
        ["bias/id/overall", "bias/jv/overall", "bias/id/Identity_and_Demographics", "bias/jv/Ideology_and_Religion"]
    {
        let steps: Vec<u64> = scalars[tag]
            .as_array()
            .unwrap_or_else(|| panic!("no {tag}"))
            .iter()
            .map(|e| e[0].as_u64().unwrap())
            .collect();
        assert_eq!(steps, vec![3, 6], "{tag}");
    }
    assert!(scalars.get("bias/su/overall").is_none());
    // The IndoMMLU hook beside it.
    let steps: Vec<u64> =
        scalars["indommlu/average"].as_array().unwrap().iter().map(|e| e[0].as_u64().unwrap()).collect();
    assert_eq!(steps, vec![3, 6]);
    let mmlu: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(work.join("ck/hook/step-6/indommlu.json")).unwrap()).unwrap();
    assert_eq!(mmlu["questions"], 12);
    assert!(stdout.contains("step 6: IndoMMLU average"), "{stdout}");

    // The same curves as a picture, without TensorBoard.
    let run = work.join("ck/hook");
    let (svg_out, png_out) = (work.join("curve.svg"), work.join("curve.png"));
    let (stdout, _) =
        indolm_ok(&["report", "bias-curve", "--run", run.to_str().unwrap(), "--out", svg_out.to_str().unwrap()]);
    assert!(stdout.contains("plotted 2 checkpoint(s)"), "{stdout}");
    let svg = std::fs::read_to_string(&svg_out).unwrap();
    assert!(
        svg.starts_with("<svg")
            && svg.contains("Ideology and Religion")
            && svg.contains("jv")
            && svg.contains("overall")
    );
    indolm_ok(&["report", "bias-curve", "--run", run.to_str().unwrap(), "--out", png_out.to_str().unwrap()]);
    assert_eq!(&std::fs::read(&png_out).unwrap()[..8], b"\x89PNG\r\n\x1a\n");
    let err = indolm_fails(&[
        "report",
        "bias-curve",
        "--run",
        run.to_str().unwrap(),
        "--out",
        work.join("c.pdf").to_str().unwrap(),
    ]);
    assert!(err.contains(".svg or .png"), "{err}");
}
