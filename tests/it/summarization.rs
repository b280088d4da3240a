//! Liputan6 extractive baselines: the layout, Oracle labels and Lead-N with hand-checked
//! values, articles built from UD Indonesian sentences, and bad input.
use crate::common::*;
use indolm_tasks::summarization::data::{load_article, load_split};
use indolm_tasks::summarization::oracle::{lead, oracle_liputan6, oracle_presumm};
use indolm_tasks::summarization::{baselines, Row};
use std::path::Path;

fn toks(sentences: &[&str]) -> Vec<Vec<String>> {
    sentences.iter().map(|s| s.split_whitespace().map(String::from).collect()).collect()
}

fn write_article(
    dir: &Path,
    name: &str,
    article: &[Vec<String>],
    summary: &[Vec<String>],
    extractive: Option<&[usize]>,
) {
    let mut value = serde_json::json!({"id": name, "url": format!("https://liputan6.com/{name}"), "clean_article": article, "clean_summary": summary});
    if let Some(e) = extractive {
        value["extractive_summary"] = serde_json::json!(e);
    }
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(format!("{name}.json")), value.to_string()).unwrap();
}

#[test]
fn oracle_and_lead_with_hand_checked_values() {
    // Seeds by hand (ROUGE-1 F, clipped counts) against "d e f g":
    //  seed 1 {d e}: 0.667, + s2 -> {d e f g}: 1.0, + anything lowers it -> [1, 2] with 1.0;
    //  seed 0 {a b c}: 0, + s1: 0.444, + s2: 0.727, + s3: 0.615 (stop) -> 0.727. Best: [1, 2].
    let article = toks(&["a b c", "d e", "f g", "a d"]);
    let summary = toks(&["d e f g"]);
    assert_eq!(oracle_liputan6(&article, &summary), vec![1, 2]);
    assert_eq!(oracle_presumm(&article, &summary, 3), vec![1, 2]);
    assert_eq!(oracle_liputan6(&toks(&["satu kalimat saja"]), &summary), vec![0]);
    // A seed is never scored alone: a two-sentence document's label has both.
    assert_eq!(oracle_liputan6(&toks(&["x y", "x y"]), &toks(&["x y"])), vec![0, 1]);
    assert_eq!(lead(&article, 2), vec![0, 1]);
    assert_eq!(lead(&article, 9), vec![0, 1, 2, 3]);

    // Lead-2 = "a b c<q>d e" vs "d e f g", as ROUGE-1.5.5 prints it (five decimals, F from the
    // rounded P and R): R1 P 2/5 R 2/4 -> F 0.44444; R2 1 of 4 and 3 bigrams -> P 0.25000, R
    // 0.33333, F 0.28571; LCS of the reference sentence with each predicted one: d e -> 0.44444.
    // Oracle = the reference: 100. One article: every interval is the figure itself.
    let dir = scratch("lip-hand");
    write_article(&dir.join("test"), "1", &article, &summary, None);
    let rows = baselines(&load_split(&dir, "test").unwrap());
    let get = |name: &str| -> &Row { rows.iter().find(|r| r.system == name).unwrap() };
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    let lead2 = get("Lead-2");
    assert!(close(lead2.rouge1, 44.444) && close(lead2.rouge2, 28.571) && close(lead2.rouge_l, 44.444), "{rows:?}");
    let ci = lead2.intervals.expect("official rows carry intervals");
    assert!(close(ci.rouge2.low, 28.571) && close(ci.rouge2.high, 28.571), "{ci:?}");
    assert!(lead2.rouge.as_deref().is_some_and(|r| r.contains("-c 95 -m -r 1000 -n 2 -a")), "{lead2:?}");
    assert!(
        close(get("Oracle").rouge1, 100.0) && close(get("Oracle").rouge2, 100.0) && close(get("Oracle").rouge_l, 100.0)
    );
}

#[test]
fn articles_from_ud_sentences_recover_their_summary_sentences() {
    let ud = std::fs::read_to_string(test_data().join("ud-indonesian/id_gsd-ud-test.conllu")).unwrap();
    let sentences: Vec<String> =
        ud.lines().filter_map(|l| l.strip_prefix("# text = ")).map(|s| s.to_lowercase()).collect();
    let dir = scratch("lip-ud");
    let mut expected = Vec::new();
    for a in 0..6 {
        let article: Vec<Vec<String>> =
            sentences[a * 7..a * 7 + 7].iter().map(|s| s.split_whitespace().map(String::from).collect()).collect();
        let picks = [1 + a % 3, 4 + a % 3];
        let summary: Vec<Vec<String>> = picks.iter().map(|&i| article[i].clone()).collect();
        write_article(
            &dir.join("test"),
            &format!("{a}"),
            &article,
            &summary,
            if a == 0 { Some(&picks[..]) } else { None },
        );
        expected.push(picks.to_vec());
    }
    let articles = load_split(&dir, "test").unwrap();
    for (art, picks) in articles.iter().zip(&expected) {
        assert_eq!(oracle_liputan6(&art.article, &art.summary), *picks, "{}", art.path.display());
    }
    let (stdout, _) = indolm_ok(&["eval", "summarization-baselines", "--data", dir.to_str().unwrap()]);
    println!("{stdout}");
    assert!(stdout.contains("| Oracle | 100.00 | 100.00 | 100.00 |"), "{stdout}");
    assert!(stdout.contains("| Lead-1 |") && stdout.contains("test (6 articles)"));
    assert!(!stdout.contains(" BS |"), "{stdout}");
    // With a BERTScore model: the BS column, Oracle's summaries (the references) scoring 100.
    let data = dir.to_str().unwrap();
    let model = reference_model().to_str().unwrap();
    let with_bs = ["eval", "summarization-baselines", "--data", data, "--bertscore-model", model];
    let (stdout, _) = indolm_ok(&[&with_bs[..], &["--bertscore-layer", "2"][..]].concat());
    println!("{stdout}");
    assert!(stdout.contains("| ROUGE-L | BS | R1 95% CI |"), "{stdout}");
    assert!(stdout.contains("| Oracle | 100.00 | 100.00 | 100.00 | 100.00 |"), "{stdout}");
    assert!(stdout.contains("BS: BERTScore F1 ×100 as bert-score computes it") && stdout.contains("at layer 2"));
    let err = indolm_fails(&[&with_bs[..], &["--bertscore-layer", "9"][..]].concat());
    assert!(err.contains("--bertscore-layer") && err.contains("beyond the model's 3 layers"), "{err}");
}

#[test]
fn bad_liputan6_files_are_named() {
    let dir = scratch("lip-bad");
    std::fs::write(dir.join("nokey.json"), r#"{"id": 1, "clean_summary": [["a"]]}"#).unwrap();
    let err = load_article(&dir.join("nokey.json")).unwrap_err().to_string();
    assert!(err.contains("nokey.json") && err.contains("`clean_article`"), "{err}");
    std::fs::write(dir.join("empty.json"), r#"{"id": 1, "clean_article": [], "clean_summary": [["a"]]}"#).unwrap();
    let err = load_article(&dir.join("empty.json")).unwrap_err().to_string();
    assert!(err.contains("empty.json") && err.contains("empty article"), "{err}");
    std::fs::write(
        dir.join("range.json"),
        r#"{"id": 1, "clean_article": [["a"], ["b"]], "clean_summary": [["a"]], "extractive_summary": [0, 5]}"#,
    )
    .unwrap();
    let err = load_article(&dir.join("range.json")).unwrap_err().to_string();
    assert!(
        err.contains("range.json") && err.contains("index 5 is out of range") && err.contains("2 sentences"),
        "{err}"
    );
}

#[test]
fn shipped_summarization_recipes_parse_with_the_papers_settings() {
    use indolm_tasks::summarization::train::{SummarizeRecipe, Task};
    let load = |name: &str| SummarizeRecipe::load(&root().join("recipes/finetune").join(name)).unwrap();
    let ext = load("liputan6-bertext.toml");
    assert_eq!((ext.optimizer.lr, ext.optimizer.warmup_steps, ext.optimizer.max_steps), (2e-3, 10_000, Some(50_000)));
    assert_eq!((ext.optimizer.schedule, ext.optimizer.eps), (indolm_core::recipe::ScheduleKind::Noam, 1e-9));
    assert_eq!(
        (ext.ext.layers, ext.ext.heads, ext.ext.ff, ext.ext.min_sentences, ext.ext.min_words),
        (2, 8, 2048, 2, 15)
    );
    assert_eq!(ext.data.test_splits, vec!["canonical/test".to_string(), "xtreme/test".to_string()]);
    // Each test set's weights are the best on its own dev set; BS with mBERT at layer 9 (Table 4).
    for name in ["liputan6-bertext.toml", "liputan6-bertabs.toml", "liputan6-bertextabs.toml"] {
        let r = load(name);
        let pairs = [("canonical/test", "canonical/dev"), ("xtreme/test", "xtreme/dev")];
        assert_eq!(r.data.selection(), pairs, "{name}");
        assert_eq!(r.data.dev_splits(), ["canonical/dev", "xtreme/dev"], "{name}");
        let model = r.eval.bertscore_model.as_deref().and_then(|p| p.file_name()).and_then(|n| n.to_str());
        assert_eq!((model, r.eval.bertscore_layer), (Some("bert-base-multilingual-cased"), Some(9)), "{name}");
    }
    for (name, task) in [("liputan6-bertabs.toml", Task::Abs), ("liputan6-bertextabs.toml", Task::Extabs)] {
        let r = load(name);
        assert_eq!(r.task, task);
        let o = &r.optimizer;
        assert_eq!(
            (o.lr, o.warmup_steps, o.lr_dec, o.warmup_dec, o.max_steps),
            (2e-3, 20_000, Some(0.1), Some(10_000), Some(200_000)),
            "{name}"
        );
        let a = &r.abs;
        assert_eq!((a.layers, a.heads, a.ff, a.dropout, a.label_smoothing), (6, 8, 2048, 0.2, 0.1), "{name}");
        assert_eq!(
            (a.beam, a.alpha, a.min_length, a.max_length, a.min_sentences, a.block_trigrams),
            (5, 0.6, 15, 150, 2, true),
            "{name}"
        );
    }
    assert_eq!(
        load("liputan6-bertextabs.toml").init.unwrap(),
        std::path::PathBuf::from("checkpoints/liputan6-bertext/best")
    );
    for tiny in ["liputan6-bertext-tiny.toml", "liputan6-bertabs-tiny.toml", "liputan6-bertextabs-tiny.toml"] {
        let r = load(tiny);
        assert!(root().join(&r.data.root).join(&r.data.train_split).is_dir(), "{tiny}: the sample split is shipped");
        // Without select_on every test split selects on dev_split, as before.
        assert_eq!(r.data.selection(), [("test", "dev")], "{tiny}");
    }
    // An unknown key is refused with its line.
    let bad = scratch("abs-recipe").join("abs.toml");
    std::fs::write(
        &bad,
        std::fs::read_to_string(root().join("recipes/finetune/liputan6-bertabs.toml"))
            .unwrap()
            .replace("label_smoothing = 0.1", "label_smothing = 0.1"),
    )
    .unwrap();
    let err = indolm_fails(&["finetune", "summarize", bad.to_str().unwrap()]);
    assert!(err.contains("label_smothing") && err.contains("line"), "{err}");
}

#[test]
fn table_four_joins_runs_and_splits() {
    let dir = scratch("table4");
    let row = |s: &str, v: f64| serde_json::json!({"system": s, "rouge1": v, "rouge2": v / 2.0, "rouge_l": v - 1.0});
    let run = |system: &str, v: f64, lead: f64| {
        serde_json::json!({"system": system, "best_step": 1, "dev_before": row(system, 0.0), "dev_best": row(system, v), "test": [
            ["canonical/test", [row("Lead-1", lead), row("Oracle", 60.0), row(system, v)]],
            ["xtreme/test", [row("Lead-1", lead - 10.0), row("Oracle", 50.0), row(system, v - 5.0)]]]})
    };
    std::fs::write(dir.join("ext.json"), run("BertExt", 40.0, 30.0).to_string()).unwrap();
    // The second run's baselines are the same articles' and are not repeated.
    std::fs::write(dir.join("abs.json"), run("BertAbs", 41.0, 99.0).to_string()).unwrap();
    let out = dir.join("table4.md");
    let (stdout, _) = indolm_ok(&[
        "report",
        "summarization",
        dir.join("ext.json").to_str().unwrap(),
        dir.join("abs.json").to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    println!("{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "| System | canonical/test R1 | R2 | RL | xtreme/test R1 | R2 | RL |");
    assert_eq!(lines[2], "| Lead-1 | 30.00 | 15.00 | 29.00 | 20.00 | 10.00 | 19.00 |");
    assert_eq!(lines[3], "| Oracle | 60.00 | 30.00 | 59.00 | 50.00 | 25.00 | 49.00 |");
    assert_eq!(lines[4], "| BertExt | 40.00 | 20.00 | 39.00 | 35.00 | 17.50 | 34.00 |");
    assert_eq!(lines[5], "| BertAbs | 41.00 | 20.50 | 40.00 | 36.00 | 18.00 | 35.00 |");
    assert_eq!(lines.len(), 6);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), stdout);
    let err = indolm_fails(&["report", "summarization", dir.join("missing.json").to_str().unwrap()]);
    assert!(err.contains("missing.json"), "{err}");

    // Results with BERTScore (on the canonical rows only): a BS column for that split.
    let mut with_bs = run("BertExt", 40.0, 30.0);
    for row in with_bs["test"][0][1].as_array_mut().unwrap() {
        let f1 = row["rouge1"].as_f64().unwrap() + 35.0;
        row["bertscore"] = serde_json::json!({"precision": f1, "recall": f1, "f1": f1, "how": "×100 by a test"});
    }
    std::fs::write(dir.join("bs.json"), with_bs.to_string()).unwrap();
    let (stdout, _) = indolm_ok(&["report", "summarization", dir.join("bs.json").to_str().unwrap()]);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "| System | canonical/test R1 | R2 | RL | BS | xtreme/test R1 | R2 | RL |", "{stdout}");
    assert_eq!(lines[2], "| Lead-1 | 30.00 | 15.00 | 29.00 | 65.00 | 20.00 | 10.00 | 19.00 |");
    assert_eq!(lines[4], "| BertExt | 40.00 | 20.00 | 39.00 | 75.00 | 35.00 | 17.50 | 34.00 |");
    assert!(stdout.contains("\nBS: BERTScore F1 ×100 by a test.\n"), "{stdout}");
}

/// An article or summary: sentences of tokens.
type Sentences = Vec<Vec<String>>;

/// Runs `tests/reference/liputan6_oracle.py` on `args`; returns its JSON output.
fn release_oracle_reference(args: &[&str]) -> serde_json::Value {
    let out = std::process::Command::new(python())
        .arg(root().join("tests/reference/liputan6_oracle.py"))
        .args(args)
        .output()
        .expect("run python");
    assert!(out.status.success(), "liputan6_oracle.py {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Articles in the Liputan6 layout, seeded: 1 to 40 sentences (a few of 101 to 110, past the
/// script's limit) of 2 to 9 words from a 30-word vocabulary (so that scores tie), and summaries
/// of every kind: copied sentences, copies with other words, fresh words, or most of the
/// article (selections that grow long, where CPython's set order decides ties).
fn generated_articles(count: usize, seed: u64) -> Vec<(Sentences, Sentences)> {
    use rand::{Rng, SeedableRng};
    const WORDS: &str = "pasar kota warga hujan pagi sore jalan rumah sekolah anak guru petani padi sawah \
        sungai jembatan kereta stasiun harga beras naik turun ramai sepi baru lama besar kecil cerah teduh";
    let vocab: Vec<&str> = WORDS.split_whitespace().collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let sentence = |rng: &mut rand::rngs::StdRng, len: usize| -> Vec<String> {
        (0..len).map(|_| vocab[rng.random_range(0..vocab.len())].to_string()).collect()
    };
    (0..count)
        .map(|a| {
            // Kind 3 (most of the article) grows long selections: the script's cost is cubic.
            let kind = if a % 100 == 99 { 0 } else { a % 4 };
            let n = match (a % 100, kind) {
                (99, _) => rng.random_range(101..=110),
                (_, 3) => rng.random_range(4..=18),
                _ => rng.random_range(1..=40),
            };
            let max_len = if n > 100 { 4 } else { 9 };
            let article: Vec<Vec<String>> = (0..n)
                .map(|_| {
                    let len = rng.random_range(2..=max_len);
                    sentence(&mut rng, len)
                })
                .collect();
            let summary: Vec<Vec<String>> = match kind {
                0 => (0..rng.random_range(1..=3)).map(|_| article[rng.random_range(0..n)].clone()).collect(),
                1 => {
                    let mut copied = article[rng.random_range(0..n)].clone();
                    copied.extend(sentence(&mut rng, 3));
                    vec![copied]
                }
                2 => {
                    let len = rng.random_range(3..=12);
                    vec![sentence(&mut rng, len)]
                }
                _ => article.iter().filter(|_| rng.random_bool(0.8)).cloned().collect(),
            };
            (article, summary)
        })
        .collect()
}

/// The Oracle labels are the release script's, article by article, on 300 generated articles
/// (against an independent Python reference that follows the script step by step with CPython's
/// own sets), and the candidate order agrees with CPython's on 3,000 random cases.
#[test]
fn liputan6_oracle_labels_match_the_release_script_article_by_article() {
    use rand::{Rng, SeedableRng};
    let dir = scratch("oracle-script");
    let articles = generated_articles(300, 6);
    let lines: String = articles
        .iter()
        .map(|(article, summary)| {
            serde_json::json!({"clean_article": article, "clean_summary": summary}).to_string() + "\n"
        })
        .collect();
    let input = dir.join("articles.jsonl");
    std::fs::write(&input, lines).unwrap();
    let expected: Vec<Vec<usize>> =
        serde_json::from_value(release_oracle_reference(&[input.to_str().unwrap()])).unwrap();
    let mut sizes = std::collections::BTreeMap::new();
    for (i, ((article, summary), want)) in articles.iter().zip(&expected).enumerate() {
        let got = oracle_liputan6(article, summary);
        assert_eq!(&got, want, "article {i} ({} sentences)", article.len());
        *sizes.entry(got.len()).or_insert(0) += 1;
    }
    println!("300 articles, labels identical to the script's; label sizes: {sizes:?}");
    assert!(sizes.get(&1) == Some(&articles.iter().filter(|(a, _)| a.len() == 1).count()));

    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let cases: Vec<(usize, Vec<usize>)> = (0..3000)
        .map(|_| {
            let n = rng.random_range(1..=100);
            let k = rng.random_range(0..=n);
            let mut ids: Vec<usize> = (0..n).collect();
            for i in 0..k {
                let j = rng.random_range(i..n);
                ids.swap(i, j);
            }
            ids.truncate(k);
            (n, ids)
        })
        .collect();
    let path = dir.join("cases.json");
    std::fs::write(&path, serde_json::to_string(&cases).unwrap()).unwrap();
    let orders: Vec<Vec<usize>> =
        serde_json::from_value(release_oracle_reference(&["--set-orders", path.to_str().unwrap()])).unwrap();
    let mut unsorted = 0;
    for ((n, ids), want) in cases.iter().zip(&orders) {
        assert_eq!(&indolm_tasks::summarization::oracle::python_set_difference(*n, ids), want, "n {n}, ids {ids:?}");
        unsorted += want.windows(2).any(|w| w[0] > w[1]) as usize;
    }
    println!("candidate order equals CPython's in 3000 cases, {unsorted} of them not ascending");
    assert!(unsorted > 100);
}
