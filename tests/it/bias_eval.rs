//! The bias evaluation: PLL parity with transformers (per-token reference loop) on real
//! sentences and for the CrowS-Pairs variant, win-rate arithmetic, pair loaders and their
//! errors, and the checkpoint hook's TensorBoard curves and bias.json.
use crate::common::*;
use indolm_eval::bias::{aggregate, outcome, Bootstrap, PairRecord, Preference::*};
use indolm_eval::pairs::{load_crows, load_indobias, BiasPair};
use indolm_eval::pll::{crows_inputs, shared_positions, PllScorer, SentenceScore};
use indolm_eval::BiasMetric;
use indolm_torch::model::model_dir::load_masked_lm;
use std::path::Path;
use tch::Device;

/// Real sentences that fit the reference model's 64 positions.
fn shared_sentences(n_ud: usize, n_nusax: usize) -> Vec<String> {
    let tok = indolm_torch::data::tokenizer::TextTokenizer::from_dir(reference_model()).unwrap();
    let fits = |s: &String| tok.encode(s).unwrap().len() <= 60;
    let ud = std::fs::read_to_string(test_data().join("ud-indonesian/id_gsd-ud-test.conllu")).unwrap();
    let mut out: Vec<String> =
        ud.lines().filter_map(|l| l.strip_prefix("# text = ")).map(String::from).filter(fits).take(n_ud).collect();
    let mut reader = csv::Reader::from_path(test_data().join("nusax/sentiment/javanese/test.csv")).unwrap();
    let text_col = reader.headers().unwrap().iter().position(|h| h == "text").unwrap();
    out.extend(reader.records().map(|r| r.unwrap()[text_col].to_string()).filter(fits).take(n_nusax));
    out
}

/// The reference's per-sentence scores (`hf_reference.py COMMAND MODEL SENTENCES OUT`) of
/// `sentences` on the reference model, one JSON object a sentence.
fn reference_scores(command: &str, work: &Path, sentences: &[String]) -> Vec<serde_json::Value> {
    std::fs::write(work.join("s.txt"), sentences.join("\n")).unwrap();
    reference(&[
        command,
        reference_model().to_str().unwrap(),
        work.join("s.txt").to_str().unwrap(),
        work.join("ref.json").to_str().unwrap(),
    ]);
    serde_json::from_str(&std::fs::read_to_string(work.join("ref.json")).unwrap()).unwrap()
}

#[test]
fn pll_matches_transformers_per_token_loop() {
    let model_dir = reference_model();
    let work = scratch("pll-parity");
    let sentences = shared_sentences(12, 8);
    let expected = reference_scores("pll", &work, &sentences);
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
fn aul_and_aula_match_kaneko_and_bollegala_on_transformers() {
    use indolm_eval::aul::UnmaskedScorer;
    let model_dir = reference_model();
    let work = scratch("aul-parity");
    let sentences = shared_sentences(12, 8);
    let expected = reference_scores("aul", &work, &sentences);
    let loaded = load_masked_lm(model_dir, Device::Cpu).unwrap();
    let mut scorer = UnmaskedScorer::new(&loaded.model, &loaded.tokenizer, Device::Cpu);
    scorer.token_budget = 256; // several padded batches of mixed lengths
    let inputs: Vec<Vec<i64>> = sentences.iter().map(|s| scorer.input(s).unwrap()).collect();
    let scores = scorer.score(&inputs);
    let (mut worst_aul, mut worst_aula): (f64, f64) = (0.0, 0.0);
    for (s, e) in scores.iter().zip(&expected) {
        assert_eq!(s.aul.tokens as u64, e["tokens"].as_u64().unwrap());
        assert_eq!(s.aul.correct as u64, e["correct"].as_u64().unwrap(), "rank-1 hits");
        worst_aul = worst_aul.max((s.aul.mean() - e["aul"].as_f64().unwrap()).abs());
        worst_aula = worst_aula.max((s.aula.mean() - e["aula"].as_f64().unwrap()).abs());
    }
    println!(
        "{} sentences, padded batches: max |AUL − reference| {worst_aul:.2e}, max |AULA − reference| {worst_aula:.2e}",
        scores.len()
    );
    assert!(worst_aul <= 1e-5 && worst_aula <= 1e-5);
}

#[test]
fn pll_word_l2r_matches_a_reference_masking_by_word_ids() {
    let model_dir = reference_model();
    let work = scratch("pll-word-l2r-parity");
    let sentences = shared_sentences(8, 6);
    let expected = reference_scores("pll-word-l2r", &work, &sentences);
    let loaded = load_masked_lm(model_dir, Device::Cpu).unwrap();
    let mut scorer = PllScorer::new(&loaded.model, &loaded.tokenizer, Device::Cpu);
    scorer.token_budget = 1024;
    let inputs: Vec<_> = sentences.iter().map(|s| scorer.word_l2r_input(s).unwrap()).collect();
    let multi_piece = inputs.iter().flat_map(|i| &i.also_masked).filter(|m| !m.is_empty()).count();
    assert!(multi_piece > 10, "the sentences have words of several pieces ({multi_piece} positions mask others)");
    let scores = scorer.score(&inputs);
    let plain = scorer.score(&sentences.iter().map(|s| scorer.full_input(s).unwrap()).collect::<Vec<_>>());
    let mut worst: f64 = 0.0;
    for (((s, e), p), input) in scores.iter().zip(&expected).zip(&plain).zip(&inputs) {
        assert_eq!(s.tokens as u64, e["tokens"].as_u64().unwrap());
        assert_eq!(s.correct as u64, e["correct"].as_u64().unwrap(), "rank-1 hits");
        worst = worst.max((s.pll - e["pll"].as_f64().unwrap()).abs() / e["pll"].as_f64().unwrap().abs());
        if input.also_masked.iter().any(|m| !m.is_empty()) {
            assert_ne!(s.pll, p.pll, "a sentence with words of several pieces scores differently from plain PLL");
        } else {
            assert_eq!(s.pll, p.pll, "a sentence of one-piece words scores as plain PLL");
        }
    }
    println!(
        "{} sentences ({multi_piece} pieces masked with later pieces): max relative difference {worst:.2e}",
        scores.len()
    );
    assert!(worst <= 1e-5);
}

#[test]
fn crows_variant_matches_metric_py_on_crows_pairs() {
    let model_dir = reference_model();
    let work = scratch("crows-parity");
    let crows = load_crows(&test_data().join("crows-pairs/crows_pairs_anonymized.csv")).unwrap();
    let tok = indolm_torch::data::tokenizer::TextTokenizer::from_dir(model_dir).unwrap();
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
    let s = |pll: f64, tokens: usize| SentenceScore { pll, tokens, correct: 0 };
    let pair =
        |d: &str, sub: &str| BiasPair { pro: "a".into(), anti: "b".into(), domain: d.into(), subdomain: sub.into() };
    // PPPL: the lower perplexity wins, strictly; equal is a tie and not a win.
    let scored = [
        (pair("A", "x"), s(-10.0, 5), s(-12.0, 5)),
        (pair("A", "x"), s(-10.0, 5), s(-12.0, 6)), // 2 nats a token each: a tie
        (pair("A", "y"), s(-6.0, 3), s(-9.0, 3)),
        (pair("B", "z"), s(-12.0, 4), s(-10.0, 5)),
    ];
    let records: Vec<PairRecord> =
        scored.iter().enumerate().map(|(i, (p, a, b))| PairRecord::new(BiasMetric::Pppl, "id", i, p, a, b)).collect();
    assert_eq!(records.iter().map(|r| r.preferred).collect::<Vec<_>>(), vec![Pro, Tie, Pro, Anti]);
    let report = aggregate(BiasMetric::Pppl, None, &records, Bootstrap::standard());
    let r = &report.languages[0];
    assert_eq!((r.overall.tally.pairs, r.overall.tally.wins, r.overall.tally.ties), (4, 2, 1));
    assert_eq!(r.overall.win_rate, 50.0);
    assert_eq!(
        r.domains.iter().map(|c| (c.name.as_str(), c.win_rate)).collect::<Vec<_>>(),
        vec![("A", 200.0 / 3.0), ("B", 0.0)]
    );
    assert_eq!(r.subdomains[0].name, "A / x");
    assert_eq!(r.subdomains[0].win_rate, 50.0);
    // CrowS: higher PLL wins after rounding to 3 decimals; equal after rounding is a tie.
    assert_eq!(outcome(BiasMetric::Crows, &s(-3.0001, 3), &s(-3.0004, 3)), Tie);
    assert_eq!(outcome(BiasMetric::Crows, &s(-3.001, 3), &s(-3.002, 3)), Pro);
}

/// Wilson intervals, exact McNemar p-values and Holm's adjustment equal statsmodels'
/// (`proportion_confint(method="wilson")`, `mcnemar(exact=True)`, `multipletests(method="holm")`)
/// within 1e-9 on generated tables, small and IndoBias-sized.
#[test]
fn interval_and_test_statistics_match_statsmodels() {
    use indolm_metrics::stats::{holm, mcnemar_exact, wilson};
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(15);
    let mut proportions: Vec<(usize, usize)> = vec![(0, 1), (1, 1), (0, 40), (40, 40), (299, 544), (272, 544), (3, 7)];
    proportions.extend((0..200).map(|_| {
        let n = rng.random_range(1..3000);
        (rng.random_range(0..=n), n)
    }));
    let mut discordant: Vec<(usize, usize)> = vec![(0, 0), (0, 1), (5, 5), (1, 4), (0, 30), (120, 80)];
    discordant.extend((0..200).map(|_| (rng.random_range(0..600), rng.random_range(0..600))));
    let families: Vec<Vec<f64>> =
        (0..50).map(|_| (0..rng.random_range(1..30)).map(|_| rng.random::<f64>().powi(3)).collect()).collect();
    let work = scratch("statsmodels");
    let tables = serde_json::json!({"wilson": proportions, "mcnemar": discordant, "holm": families});
    std::fs::write(work.join("tables.json"), tables.to_string()).unwrap();
    reference(&["stats", work.join("tables.json").to_str().unwrap(), work.join("out.json").to_str().unwrap()]);
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(work.join("out.json")).unwrap()).unwrap();
    let mut worst = [0f64; 3];
    for (&(k, n), e) in proportions.iter().zip(expected["wilson"].as_array().unwrap()) {
        let w = wilson(k, n);
        for (ours, theirs) in [(w.low, &e[0]), (w.high, &e[1])] {
            worst[0] = worst[0].max((ours - theirs.as_f64().unwrap()).abs());
        }
    }
    for (&(b, c), e) in discordant.iter().zip(expected["mcnemar"].as_array().unwrap()) {
        worst[1] = worst[1].max((mcnemar_exact(b, c) - e.as_f64().unwrap()).abs());
    }
    for (family, e) in families.iter().zip(expected["holm"].as_array().unwrap()) {
        for (ours, theirs) in holm(family).iter().zip(e.as_array().unwrap()) {
            worst[2] = worst[2].max((ours - theirs.as_f64().unwrap()).abs());
        }
    }
    println!(
        "max |ours − statsmodels|: Wilson {:.1e} ({} tables), McNemar {:.1e} ({} tables), Holm {:.1e} ({} families)",
        worst[0],
        proportions.len(),
        worst[1],
        discordant.len(),
        worst[2],
        families.len()
    );
    assert!(worst.iter().all(|w| *w <= 1e-9), "{worst:?}");
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

/// A tiny pretraining recipe with the bias hook (two languages) and IndoMMLU; `extra_bias`
/// goes into `[eval.bias]`.
pub(crate) fn hook_recipe(work: &Path, name: &str, seed: u64, extra_bias: &str) -> std::path::PathBuf {
    let bias = format!(
        "pairs = \"{}\"\nlanguages = [\"indonesian\", \"jv\"]\n{extra_bias}",
        root().join("tests/fixtures/indobias").display()
    );
    let indommlu = format!(
        "[eval.indommlu]\ndata = \"{}\"\nmode = \"letter\"\nsubsample = 12",
        root().join("tests/fixtures/indommlu/indoMMLU-fixture.csv").display()
    );
    tiny_bias_recipe(work, name, &format!("seed = {seed}"), reference_model(), &bias, &indommlu)
}

/// A tiny pretraining recipe over one UD split, 6 steps with checkpoints at 3 and 6: `head`
/// holds the seed lines, `bias` the `[eval.bias]` keys, `sections` any further sections.
pub(crate) fn tiny_bias_recipe(
    work: &Path,
    name: &str,
    head: &str,
    tokenizer: &Path,
    bias: &str,
    sections: &str,
) -> std::path::PathBuf {
    let recipe = format!(
        r#"kind = "pretrain"
name = "{name}"
{head}
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
{bias}
{sections}
[logging]
tensorboard = "{runs}"
every = 3
"#,
        out = work.join("ck").display(),
        tok = tokenizer.display(),
        corpora = work.join("corpora").display(),
        ud = test_data().join("ud-indonesian/id_gsd-ud-dev.conllu").display(),
        runs = work.join("runs").display()
    );
    let path = work.join(format!("{name}.toml"));
    std::fs::write(&path, recipe).unwrap();
    path
}

/// The steps of a TensorBoard tag as `tb-bias` / `tb-scalars` print it.
fn steps_of(points: &serde_json::Value) -> Vec<u64> {
    points.as_array().unwrap().iter().map(|e| e[0].as_u64().unwrap()).collect()
}

#[test]
fn hook_writes_records_curves_and_dense_evaluations() {
    use indolm_eval::bias::records::run_evaluations;
    let work = scratch("bias-hook");
    let recipe = hook_recipe(&work, "hook", 3407, "every = 2");
    let (stdout, _) = indolm_ok(&["train", recipe.to_str().unwrap()]);
    assert!(
        stdout.contains("step 3: bias evaluation took") && stdout.contains("step 6: bias evaluation took"),
        "{stdout}"
    );
    assert!(stdout.contains("2 evaluations between checkpoints took"), "{stdout}");
    let run = work.join("ck/hook");
    // Checkpoints at 3 and 6, evaluations between them at 2 and 4 (6 is a checkpoint).
    let evaluations = run_evaluations(&run).unwrap();
    let found: Vec<(u64, String)> =
        evaluations.iter().map(|e| (e.step, e.dir.strip_prefix(&run).unwrap().display().to_string())).collect();
    assert_eq!(
        found,
        vec![(2, "evals/step-2".into()), (3, "step-3".into()), (4, "evals/step-4".into()), (6, "step-6".into())]
    );
    assert!(!run.join("evals/step-6").exists());
    for e in &evaluations {
        let report = e.report().unwrap();
        assert_eq!(report.step, Some(e.step));
        assert_eq!(report.languages.len(), 2);
        assert_eq!(report.bootstrap, Bootstrap::standard(), "the recipe's seed and the default resamples");
        // The per-pair records re-aggregate to exactly the report written beside them, which
        // names their checksum.
        let (read_report, records) = e.read().unwrap();
        assert_eq!(read_report, report);
        assert_eq!(records.len(), 80);
        let sha = report.records_sha256.clone().expect("the report binds its records");
        assert_eq!(indolm_core::files::sha256_file(&e.dir.join("bias_pairs.csv")).unwrap(), sha);
        let reaggregated = aggregate(report.metric, report.step, &records, report.bootstrap);
        assert_eq!(
            indolm_eval::bias::BiasReport { records_sha256: Some(sha), ..reaggregated },
            report,
            "step {}",
            e.step
        );
        let all = report.all_languages.as_ref().expect("id and jv are row-aligned");
        let mean = (report.languages[0].overall.win_rate + report.languages[1].overall.win_rate) / 2.0;
        assert!((all.win_rate - mean).abs() < 1e-9);
    }
    // The older checkpoint's weights are pruned, its evaluation kept.
    assert!(!run.join("step-3/model.safetensors").exists());

    // TensorBoard, read by its own backend: one run per language (and the average), the
    // languages sharing tags, descriptions on every tag, and the custom-scalars layout.
    let boards: serde_json::Value =
        serde_json::from_str(reference(&["tb-bias", work.join("runs/hook").to_str().unwrap()]).trim()).unwrap();
    let runs: Vec<&String> = boards.as_object().unwrap().keys().collect();
    assert_eq!(runs, vec!["bias-all", "bias-id", "bias-jv"]);
    let final_report = evaluations.last().unwrap().report().unwrap();
    for (i, lang) in ["id", "jv"].iter().enumerate() {
        let board = &boards[format!("bias-{lang}")];
        for tag in [
            "bias/overall",
            "bias/Identity_and_Demographics",
            "bias_interval/overall/low",
            "bias_gap/Ideology_and_Religion",
        ] {
            assert_eq!(steps_of(&board["scalars"][tag]), vec![2, 3, 4, 6], "{lang} {tag}");
            assert!(!board["descriptions"][tag].as_str().unwrap().is_empty(), "{lang} {tag} has no description");
        }
        let last = board["scalars"]["bias/overall"].as_array().unwrap().last().unwrap()[1].as_f64().unwrap();
        assert!((last - final_report.languages[i].overall.win_rate).abs() < 1e-4);
        let high =
            board["scalars"]["bias_interval/overall/high"].as_array().unwrap().last().unwrap()[1].as_f64().unwrap();
        assert!((high - final_report.languages[i].overall.interval.high).abs() < 1e-4);
        let description = board["descriptions"]["bias/overall"].as_str().unwrap();
        assert!(
            description.contains("pseudo-perplexity") && description.contains("50 = no preference"),
            "{description}"
        );
        let categories = board["layout"]["category"].as_array().unwrap();
        assert_eq!(categories.len(), 3);
        let margin = &categories[0]["chart"][0]["margin"]["series"][0];
        assert_eq!(
            (margin["value"].as_str(), margin["lower"].as_str(), margin["upper"].as_str()),
            (Some("bias/overall"), Some("bias_interval/overall/low"), Some("bias_interval/overall/high"))
        );
        assert_eq!(categories[1]["chart"][0]["multiline"]["tag"][0], "^bias/overall$");
        assert_eq!(categories[0]["chart"].as_array().unwrap().len(), 6, "overall and 5 domains");
    }
    assert_eq!(steps_of(&boards["bias-all"]["scalars"]["bias/overall"]), vec![2, 3, 4, 6]);
    // The training run's own curves carry no bias tags any more; IndoMMLU stays there.
    let scalars: serde_json::Value =
        serde_json::from_str(reference(&["tb-scalars", work.join("runs/hook").to_str().unwrap()]).trim()).unwrap();
    assert!(scalars.as_object().unwrap().keys().all(|t| !t.starts_with("bias")));
    assert_eq!(steps_of(&scalars["indommlu/average"]), vec![3, 6]);
    assert_eq!(steps_of(&scalars["indommlu/ece"]), vec![3, 6]);
    let mmlu: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("step-6/indommlu.json")).unwrap()).unwrap();
    assert_eq!(mmlu["questions"], 12);
    // The hook keeps the per-question records beside it, and they aggregate to it.
    let records = indolm_eval::indommlu::read_question_records(&run.join("step-6/indommlu_questions.csv")).unwrap();
    let written: indolm_eval::indommlu::IndommluReport = serde_json::from_value(mmlu.clone()).unwrap();
    assert_eq!(records.len(), 12);
    assert_eq!(
        indolm_eval::indommlu::aggregate_records(
            &records,
            indolm_eval::indommlu::Setting::masked(written.mode),
            Some(6)
        ),
        written
    );
    assert!(stdout.contains("step 6: IndoMMLU average"), "{stdout}");

    // The same curves as a picture, without TensorBoard.
    let (svg_out, png_out) = (work.join("curve.svg"), work.join("curve.png"));
    let (stdout, _) =
        indolm_ok(&["report", "bias-curve", "--run", run.to_str().unwrap(), "--out", svg_out.to_str().unwrap()]);
    assert!(stdout.contains("plotted 4 evaluation(s)"), "{stdout}");
    let svg = std::fs::read_to_string(&svg_out).unwrap();
    assert!(
        svg.starts_with("<svg")
            && svg.contains("Ideology and Religion")
            && svg.contains("jv")
            && svg.contains("overall")
            && svg.contains("<polygon"),
        "no interval band"
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

/// The reports built on the per-pair records: a paired diff of two checkpoints, `eval bias
/// --model --out` agreeing with the hook pair by pair, two runs compared, flips over a run,
/// and `eval bias --run` writing the same TensorBoard layout.
#[test]
fn paired_diff_compare_flips_and_retro_evaluation() {
    use indolm_eval::bias::records::read_records;
    let work = scratch("bias-reports");
    let (a, b) = (hook_recipe(&work, "seed-a", 3407, "every = 2"), hook_recipe(&work, "seed-b", 11, ""));
    // seed-a keeps every checkpoint's weights (not its optimizer state) for good.
    let text = std::fs::read_to_string(&a).unwrap();
    std::fs::write(&a, text.replace("keep_last = 1\n", "keep_last = 1\nkeep_weights_every = 1\n")).unwrap();
    indolm_ok(&["train", a.to_str().unwrap()]);
    indolm_ok(&["train", b.to_str().unwrap()]);
    let (run_a, run_b) = (work.join("ck/seed-a"), work.join("ck/seed-b"));

    let json = work.join("diff.json");
    let (stdout, _) = indolm_ok(&[
        "report",
        "bias-diff",
        run_a.join("evals/step-2").to_str().unwrap(),
        run_a.join("step-6/bias_pairs.csv").to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(stdout.contains("| language | group | pairs | A | B | change [95% interval] |"), "{stdout}");
    let diff: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(diff["metric"], "pppl");
    assert!(stdout.contains("metric pppl: each sentence's pseudo-perplexity"), "{stdout}");
    let rows = diff["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 12, "2 languages × (overall + 5 domains)");
    let report_2 = indolm_eval::bias::records::read_checked(&run_a.join("evals/step-2")).unwrap().0;
    let report_6 = indolm_eval::bias::records::read_checked(&run_a.join("step-6")).unwrap().0;
    assert_eq!(rows[0]["rate_a"].as_f64().unwrap(), report_2.languages[0].overall.win_rate);
    assert_eq!(rows[0]["rate_b"].as_f64().unwrap(), report_6.languages[0].overall.win_rate);
    for r in rows {
        let (became, stopped) = (r["became_wins"].as_u64().unwrap(), r["stopped_being_wins"].as_u64().unwrap());
        let n = r["pairs"].as_f64().unwrap();
        let change = r["change"].as_f64().unwrap();
        assert!((change - 100.0 * (became as f64 - stopped as f64) / n).abs() < 1e-9);
        assert!(r["p_holm"].as_f64().unwrap() >= r["p_value"].as_f64().unwrap());
    }

    // The same checkpoint scored again from its folder: the same records, no change.
    let again = work.join("again");
    let (stdout, _) = indolm_ok(&[
        "eval",
        "bias",
        "--model",
        run_a.join("step-6").to_str().unwrap(),
        "--pairs",
        root().join("tests/fixtures/indobias").to_str().unwrap(),
        "--languages",
        "id",
        "jv",
        "--out",
        again.to_str().unwrap(),
    ]);
    assert!(stdout.contains("wrote") && stdout.contains("bias_pairs.csv"), "{stdout}");
    let (hook_records, cli_records) = (
        read_records(&run_a.join("step-6/bias_pairs.csv")).unwrap(),
        read_records(&again.join("bias_pairs.csv")).unwrap(),
    );
    assert_eq!(hook_records.len(), cli_records.len());
    for (h, c) in hook_records.iter().zip(&cli_records) {
        assert_eq!((h.preferred, &h.protrope), (c.preferred, &c.protrope));
        assert!((h.gap - c.gap).abs() < 1e-9);
    }
    let (stdout, _) =
        indolm_ok(&["report", "bias-diff", run_a.join("step-6").to_str().unwrap(), again.to_str().unwrap()]);
    assert!(
        stdout.contains("| id | overall | 40 |") && stdout.contains("| +0.0 [+0.0, +0.0] | 0 | 0 | 1.0000 | 1.0000 |"),
        "{stdout}"
    );
    // Other pairs: refused with the reason.
    let err = indolm_fails(&["report", "bias-diff", run_a.join("step-6").to_str().unwrap(), run_a.to_str().unwrap()]);
    assert!(err.contains("bias_pairs.csv") && err.contains("step-N"), "{err}");

    // Two runs side by side, with a picture.
    let (md, png) = (work.join("compare.md"), work.join("compare.png"));
    let (stdout, _) = indolm_ok(&[
        "report",
        "bias-compare",
        run_a.to_str().unwrap(),
        run_b.to_str().unwrap(),
        "--step",
        "6",
        "--out",
        md.to_str().unwrap(),
        "--plot",
        png.to_str().unwrap(),
    ]);
    assert_eq!(std::fs::read_to_string(&md).unwrap(), stdout);
    assert!(stdout.contains("| seed-a | 6 |") && stdout.contains("| seed-b | 6 |"), "{stdout}");
    assert!(stdout.contains("Holm-adjusted over the 2 comparisons"), "{stdout}");
    assert!(stdout.contains("| id | seed-a | seed-b |") && stdout.contains("| jv | seed-a | seed-b |"), "{stdout}");
    assert_eq!(&std::fs::read(&png).unwrap()[..8], b"\x89PNG\r\n\x1a\n");
    let err =
        indolm_fails(&["report", "bias-compare", run_a.to_str().unwrap(), run_b.to_str().unwrap(), "--step", "2"]);
    assert!(err.contains("no bias evaluation at step 2; it has steps 3, 6"), "{err}");

    // Models side by side in the paper's table layout: an `eval bias --out` folder, a checkpoint
    // and a run folder (its last evaluation); every cell is its bias.json's number.
    let cells_json = work.join("table.json");
    let (stdout, _) = indolm_ok(&[
        "report",
        "bias-table",
        &format!("retro scored={}", again.display()),
        run_a.join("step-6").to_str().unwrap(),
        run_b.to_str().unwrap(),
        "--json",
        cells_json.to_str().unwrap(),
    ]);
    assert!(stdout.contains("| model | overall | "), "{stdout}");
    assert!(stdout.contains("| retro scored | pppl |") && stdout.contains("| seed-b | pppl | 6 |"), "{stdout}");
    let report_b = indolm_eval::bias::records::read_checked(&run_b.join("step-6")).unwrap().0;
    let cells: Vec<serde_json::Value> = serde_json::from_str(&std::fs::read_to_string(&cells_json).unwrap()).unwrap();
    let mut checked = 0;
    for (model, report) in [("retro scored", &report_6), ("step-6", &report_6), ("seed-b", &report_b)] {
        for l in &report.languages {
            for c in std::iter::once(&l.overall).chain(&l.domains) {
                let category = if std::ptr::eq(c, &l.overall) { "overall" } else { c.name.as_str() };
                let cell = cells
                    .iter()
                    .find(|x| x["model"] == model && x["language"] == l.language.as_str() && x["category"] == category)
                    .unwrap_or_else(|| panic!("no cell for {model} {} {category}", l.language));
                assert_eq!(cell["win_rate"].as_f64().unwrap(), c.win_rate);
                assert_eq!(
                    (cell["low"].as_f64().unwrap(), cell["high"].as_f64().unwrap()),
                    (c.interval.low, c.interval.high)
                );
                assert_eq!(cell["pairs"].as_u64().unwrap() as usize, c.tally.pairs);
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 3 * 2 * 6, "3 models x 2 languages x (overall + 5 domains)");
    let row =
        format!("| seed-b | {} ({}) |", indolm_eval::bias::rate_with_interval(&report_b.languages[0].overall), 40);
    assert!(stdout.contains(&row), "{row} in {stdout}");
    let err = indolm_fails(&["report", "bias-table", run_b.to_str().unwrap(), run_b.to_str().unwrap()]);
    assert!(err.contains("two models are named \"seed-b\""), "{err}");

    // A run's curves with other models' win rates beside them as flat bands.
    let svg = work.join("with-references.svg");
    let (stdout, _) = indolm_ok(&[
        "report",
        "bias-curve",
        "--run",
        run_a.to_str().unwrap(),
        "--out",
        svg.to_str().unwrap(),
        "--reference",
        &format!("public={}", again.display()),
        run_b.to_str().unwrap(),
    ]);
    assert!(stdout.contains("plotted"), "{stdout}");
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(
        svg.contains("public id") && svg.contains("public jv") && svg.contains("seed-b jv"),
        "legend of {svg:.300}"
    );

    // When preferences settle.
    let svg = work.join("flips.svg");
    let (stdout, _) =
        indolm_ok(&["report", "bias-flips", "--run", run_a.to_str().unwrap(), "--plot", svg.to_str().unwrap()]);
    assert!(stdout.contains("4 evaluations with per-pair records, steps 2…6; 80 pairs (2 languages)"), "{stdout}");
    assert!(stdout.contains("| 2 → 3 |") && stdout.contains("| 4 → 6 |"), "{stdout}");
    assert!(std::fs::read_to_string(&svg).unwrap().contains("Share of pairs that keep their final preference"));

    // After the fact: every checkpoint with weights, curves in the same per-language layout.
    let logdir = work.join("retro");
    let (stdout, _) = indolm_ok(&[
        "eval",
        "bias",
        "--run",
        run_b.to_str().unwrap(),
        "--pairs",
        root().join("tests/fixtures/indobias").to_str().unwrap(),
        "--languages",
        "id",
        "--logdir",
        logdir.to_str().unwrap(),
        "--overwrite",
    ]);
    assert!(stdout.contains("step 6 (pppl): id ") && stdout.contains("bias-<lang>"), "{stdout}");
    let boards: serde_json::Value =
        serde_json::from_str(reference(&["tb-bias", logdir.to_str().unwrap()]).trim()).unwrap();
    assert_eq!(boards.as_object().unwrap().keys().collect::<Vec<_>>(), vec!["bias-id"]);
    assert_eq!(steps_of(&boards["bias-id"]["scalars"]["bias/overall"]), vec![6], "step 3's weights were pruned");
    assert_eq!(boards["bias-id"]["layout"]["category"][0]["chart"][0]["margin"]["series"][0]["value"], "bias/overall");

    // seed-a kept every checkpoint's weights (`keep_weights_every = 1`, `keep_last = 1`): step 3
    // lost its optimizer state, not its weights, is a model directory, and the whole run is
    // rescored under another metric after the fact.
    let step_3 = run_a.join("step-3");
    assert!(step_3.join("model.safetensors").exists() && !step_3.join("optimizer.safetensors").exists());
    let (stdout, _) = indolm_ok(&["fill-mask", "--model", step_3.to_str().unwrap(), "--text", "Saya [MASK] nasi."]);
    assert!(!stdout.trim().is_empty());
    let (stdout, _) = indolm_ok(&[
        "eval",
        "bias",
        "--run",
        run_a.to_str().unwrap(),
        "--pairs",
        root().join("tests/fixtures/indobias").to_str().unwrap(),
        "--languages",
        "id",
        "--metric",
        "aul",
        "--logdir",
        work.join("retro-aul").to_str().unwrap(),
        "--overwrite",
    ]);
    assert!(stdout.contains("step 3 (aul): id ") && stdout.contains("step 6 (aul): id "), "{stdout}");
    let rescored = indolm_eval::bias::records::read_checked(&step_3).unwrap().0;
    assert_eq!(rescored.metric.to_string(), "aul");
}

/// `--languages` takes `id jv` or `id,jv` alike, and a language the pairs do not hold is refused
/// in one line naming what they hold, before the model is read (here, a model that is not there).
/// Before, each printed empty tables and exited 0.
#[test]
fn a_language_filter_that_selects_nothing_is_refused_before_the_work() {
    let work = scratch("bias-language-filter");
    let pairs = root().join("tests/fixtures/indobias");
    let crows = work.join("crows.csv");
    std::fs::write(&crows, "sent_more,sent_less,stereo_antistereo,bias_type\nA is kind.,B is kind.,stereo,age\n")
        .unwrap();
    let missing_model = work.join("no-model");
    for (pairs, languages, holds) in [
        (&pairs, "klingon", "which hold id, jv, su, mak"),
        (&pairs, "id,klingon", "which hold id, jv, su, mak"),
        (&crows, "id", "which hold en"),
    ] {
        let stderr = indolm_fails(&[
            "eval",
            "bias",
            "--model",
            missing_model.to_str().unwrap(),
            "--pairs",
            pairs.to_str().unwrap(),
            "--languages",
            languages,
        ]);
        assert_eq!(stderr.trim_end().lines().count(), 1, "{languages}: {stderr}");
        assert!(
            stderr.contains("--languages") && stderr.contains("names no language") && stderr.contains(holds),
            "{stderr}"
        );
    }
    // The comma form selects as the spaced form does.
    let model = reference_model().to_str().unwrap();
    let tables = |languages: &[&str]| {
        let mut args = vec!["eval", "bias", "--model", model, "--pairs", pairs.to_str().unwrap(), "--languages"];
        args.extend_from_slice(languages);
        indolm_ok(&args).0
    };
    let (spaced, commas) = (tables(&["id", "jv"]), tables(&["id,jv"]));
    assert_eq!(spaced, commas);
    assert!(spaced.contains("jv"), "{spaced}");
}
