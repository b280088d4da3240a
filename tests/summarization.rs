//! Liputan6 extractive baselines: the layout, Oracle labels and Lead-N with hand-checked
//! values, articles built from UD Indonesian sentences, and bad input.
mod common;

use common::*;
use indolm::tasks::summarization::data::{load_article, load_split};
use indolm::tasks::summarization::oracle::{lead, oracle_liputan6, oracle_presumm};
use indolm::tasks::summarization::{baselines, Row};
use std::path::Path;

fn toks(sentences: &[&str]) -> Vec<Vec<String>> {
    sentences.iter().map(|s| s.split_whitespace().map(String::from).collect()).collect()
}

fn write_article(dir: &Path, name: &str, article: &[Vec<String>], summary: &[Vec<String>], extractive: Option<&[usize]>) {
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
    // Ties go to the earliest seed.
    assert_eq!(oracle_liputan6(&toks(&["x y", "x y"]), &toks(&["x y"])), vec![0]);
    assert_eq!(lead(&article, 2), vec![0, 1]);
    assert_eq!(lead(&article, 9), vec![0, 1, 2, 3]);

    // Lead-2 = "a b c d e" vs "d e f g": R1 P 2/5 R 2/4 -> F 44.44; R2 1 of 4 and 3 bigrams -> 2/7
    // = 28.57; LCS 2 -> 44.44. Oracle = the reference: 100.
    let dir = scratch("lip-hand");
    write_article(&dir.join("test"), "1", &article, &summary, None);
    let rows = baselines(&load_split(&dir, "test").unwrap());
    let get = |name: &str| -> &Row { rows.iter().find(|r| r.system == name).unwrap() };
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert!(close(get("Lead-2").rouge1, 100.0 * 4.0 / 9.0) && close(get("Lead-2").rouge2, 100.0 * 2.0 / 7.0) && close(get("Lead-2").rouge_l, 100.0 * 4.0 / 9.0), "{rows:?}");
    assert!(close(get("Oracle").rouge1, 100.0) && close(get("Oracle").rouge2, 100.0) && close(get("Oracle").rouge_l, 100.0));
}

#[test]
fn articles_from_ud_sentences_recover_their_summary_sentences() {
    let ud = std::fs::read_to_string(shared_data().join("ud-indonesian/id_gsd-ud-test.conllu")).unwrap();
    let sentences: Vec<String> = ud.lines().filter_map(|l| l.strip_prefix("# text = ")).map(|s| s.to_lowercase()).collect();
    let dir = scratch("lip-ud");
    let mut expected = Vec::new();
    for a in 0..6 {
        let article: Vec<Vec<String>> = sentences[a * 7..a * 7 + 7].iter().map(|s| s.split_whitespace().map(String::from).collect()).collect();
        let picks = [1 + a % 3, 4 + a % 3];
        let summary: Vec<Vec<String>> = picks.iter().map(|&i| article[i].clone()).collect();
        write_article(&dir.join("test"), &format!("{a}"), &article, &summary, if a == 0 { Some(&picks[..]) } else { None });
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
    std::fs::write(dir.join("range.json"), r#"{"id": 1, "clean_article": [["a"], ["b"]], "clean_summary": [["a"]], "extractive_summary": [0, 5]}"#).unwrap();
    let err = load_article(&dir.join("range.json")).unwrap_err().to_string();
    assert!(err.contains("range.json") && err.contains("index 5 is out of range") && err.contains("2 sentences"), "{err}");
}

#[test]
fn shipped_summarization_recipe_parses_with_the_papers_settings() {
    let r = indolm::tasks::summarization::train::SummarizeRecipe::load(&root().join("recipes/finetune/liputan6-bertext.toml")).unwrap();
    assert_eq!((r.optimizer.lr, r.optimizer.warmup_steps, r.optimizer.max_steps), (2e-3, 10_000, 50_000));
    assert_eq!((r.ext.layers, r.ext.heads, r.ext.ff, r.ext.min_sentences, r.ext.min_words), (2, 8, 2048, 2, 15));
    let abs = scratch("abs-recipe").join("abs.toml");
    std::fs::write(&abs, std::fs::read_to_string(root().join("recipes/finetune/liputan6-bertext.toml")).unwrap().replace("task = \"ext\"", "task = \"abs\"")).unwrap();
    let err = indolm_fails(&["finetune", "summarize", abs.to_str().unwrap()]);
    assert!(err.contains("not built yet"), "{err}");
}
