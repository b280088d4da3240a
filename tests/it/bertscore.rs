//! BERTScore against the `bert-score` package (0.3.13, `hf_reference.py bertscore`) on the shared
//! tiny random BERT and a tiny random XLM-R encoder without an MLM head (multilingual-E5's shape):
//! the tokens every text is scored as, and per-pair precision, recall and F1 within 1e-5 at two
//! layers each, with and without idf, and rescaled by a baseline file; batching never changes a
//! score, nor does CUDA (where present); `eval bertscore` prints the means and writes every pair's
//! scores, and refuses a layer beyond the model's (or none, for a model bert-score has no default
//! for) in one line; a long text is tokenized by prefixes into the tokens of the whole text, and
//! one past the cap refused by line.
use crate::common::*;
use indolm_eval::bertscore::{mean, BertScore, Scorer, MAX_TEXT_BYTES};
use indolm_torch::data::tokenizer::TextTokenizer;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use tch::Device;

/// Sets `model_max_length` in `dir`'s tokenizer_config.json to `tokens`, as real models declare
/// theirs (mBERT and XLM-R: 512, their positions): bert-score's truncation overflows in
/// transformers 5 on the fixtures' unset value (1e30), and would run past their positions.
fn set_max_length(dir: &Path, tokens: usize) {
    let path = dir.join("tokenizer_config.json");
    let mut config: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    config["model_max_length"] = tokens.into();
    std::fs::write(&path, config.to_string()).unwrap();
}

/// The shared tiny BERT (3 layers, 64 positions, uncased WordPiece), copied with
/// `model_max_length` 64.
fn bert() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = copy_dir(reference_model(), "bertscore-bert");
        set_max_length(&dir, 64);
        dir
    })
}

/// A tiny random XLM-R encoder without an MLM head (2 layers, 128 positions, SentencePiece
/// Unigram), with `model_max_length` 128.
fn xlmr() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = scratch("bertscore-xlmr");
        reference(&["make-xlmr", dir.to_str().unwrap(), "0"]);
        set_max_length(&dir, 128);
        dir
    })
}

/// Candidate–reference pairs on UD Indonesian sentences: the reference itself, half of it
/// reversed, its neighbour, a mix of the two, an empty candidate or the reference upper-cased in
/// whitespace; then an empty reference and a blank candidate. Several texts are longer than the
/// models' positions (cut).
fn pairs() -> Vec<(String, String)> {
    let ud = std::fs::read_to_string(test_data().join("ud-indonesian/id_csui-ud-train.conllu")).unwrap();
    let sentences: Vec<String> =
        ud.lines().filter_map(|l| l.strip_prefix("# text = ")).map(String::from).take(40).collect();
    let mut pairs: Vec<(String, String)> = Vec::new();
    for (i, s) in sentences.iter().enumerate() {
        let words: Vec<&str> = s.split_whitespace().collect();
        let next = &sentences[(i + 1) % sentences.len()];
        let candidate = match i % 5 {
            0 => s.clone(),
            1 => words.iter().rev().take(words.len() / 2 + 1).cloned().collect::<Vec<_>>().join(" "),
            2 => next.clone(),
            3 => format!("{} {}", words[..words.len() / 2].join(" "), next),
            _ if i % 10 == 4 => String::new(),
            _ => format!("  {}\t", s.to_uppercase()),
        };
        pairs.push((candidate, s.clone()));
    }
    pairs.push(("Ibu kota Indonesia adalah Jakarta.".into(), String::new()));
    pairs.push((" \t ".into(), "Jakarta adalah ibu kota Indonesia.".into()));
    pairs
}

/// A path as a command-line argument.
fn text(path: &Path) -> String {
    path.to_str().unwrap().to_string()
}

/// bert-score's output for `pairs` with `dir`'s hidden states after `layer` layers: `plain`,
/// `idf` and (with `baseline`) `rescaled` scores, and the token `ids` of each pair's texts.
fn bert_score(dir: &Path, layer: usize, pairs: &[(String, String)], baseline: Option<&Path>) -> serde_json::Value {
    let work = scratch("bertscore-reference");
    let (input, out) = (work.join("pairs.json"), work.join("scores.json"));
    std::fs::write(&input, serde_json::to_string(pairs).unwrap()).unwrap();
    let layer = layer.to_string();
    let mut args =
        vec!["bertscore", input.to_str().unwrap(), dir.to_str().unwrap(), layer.as_str(), out.to_str().unwrap()];
    args.extend(baseline.map(|b| b.to_str().unwrap()));
    reference(&args);
    serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap()
}

/// The indices of the pairs whose two texts indolm encodes into the tokens bert-score does
/// (`expected["ids"]`).
fn same_tokens(scorer: &Scorer, pairs: &[(String, String)], expected: &serde_json::Value) -> Vec<usize> {
    let ids = |v: &serde_json::Value| v.as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect::<Vec<_>>();
    (0..pairs.len())
        .filter(|&i| {
            let theirs = &expected["ids"][i];
            scorer.token_ids(&pairs[i].0).unwrap() == ids(&theirs[0])
                && scorer.token_ids(&pairs[i].1).unwrap() == ids(&theirs[1])
        })
        .collect()
}

/// The largest difference between `ours` and bert-score's scores (`{"P", "R", "F"}` lists).
fn worst(ours: &[BertScore], theirs: &serde_json::Value) -> f64 {
    let column = |k: &str| theirs[k].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect::<Vec<_>>();
    let (p, r, f) = (column("P"), column("R"), column("F"));
    assert_eq!((p.len(), r.len(), f.len()), (ours.len(), ours.len(), ours.len()));
    ours.iter()
        .enumerate()
        .map(|(i, s)| (s.precision - p[i]).abs().max((s.recall - r[i]).abs()).max((s.f1 - f[i]).abs()))
        .fold(0.0, f64::max)
}

/// The largest difference between two lists of scores, over precision, recall and F1.
fn largest_difference(a: &[BertScore], b: &[BertScore]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x.precision - y.precision).abs().max((x.recall - y.recall).abs()).max((x.f1 - y.f1).abs()))
        .fold(0.0, f64::max)
}

/// indolm's BERTScore of [`pairs`] on `dir` equals bert-score's at each of `layers`, with and
/// without idf (and rescaled by `baseline` when given). Pairs with a text indolm tokenizes
/// otherwise are left out, after a first run finds them; returns how many were.
fn equals_bert_score(dir: &Path, layers: &[usize], baseline: Option<&Path>) -> usize {
    let all = pairs();
    let probe = bert_score(dir, layers[0], &all, baseline);
    let keep = same_tokens(&Scorer::new(dir, Some(layers[0]), Device::Cpu).unwrap(), &all, &probe);
    let pairs: Vec<(String, String)> = keep.iter().map(|&i| all[i].clone()).collect();
    let left_out = all.len() - pairs.len();
    let differ: Vec<usize> = (0..all.len()).filter(|i| !keep.contains(i)).collect();
    println!("{}: pairs tokenized otherwise than by bert-score, left out: {differ:?}", dir.display());
    for (n, &layer) in layers.iter().enumerate() {
        let expected = if n == 0 && left_out == 0 { probe.clone() } else { bert_score(dir, layer, &pairs, baseline) };
        let scorer = Scorer::new(dir, Some(layer), Device::Cpu).unwrap();
        assert_eq!(same_tokens(&scorer, &pairs, &expected).len(), pairs.len(), "the tokens of every text");
        let plain = scorer.score(&pairs).unwrap();
        let plain_gap = worst(&plain, &expected["plain"]);
        let rescaled_gap = baseline.map(|file| {
            let rescaled = Scorer::new(dir, Some(layer), Device::Cpu).unwrap().with_baseline(file).unwrap();
            worst(&rescaled.score(&pairs).unwrap(), &expected["rescaled"])
        });
        let idf_gap = worst(&scorer.with_idf(true).score(&pairs).unwrap(), &expected["idf"]);
        let rescaled_text = rescaled_gap.map_or("not run (no baseline file)".to_string(), |g| format!("{g:.2e}"));
        println!(
            "{} layer {layer}: {} pairs, max |indolm - bert-score| over P, R, F: {plain_gap:.2e}, with idf {idf_gap:.2e}, rescaled {rescaled_text}",
            dir.display(),
            pairs.len()
        );
        assert!(plain_gap < 1e-5 && idf_gap < 1e-5 && rescaled_gap.unwrap_or(0.0) < 1e-5);
        // A text scored against itself matches every token to itself.
        for (s, (c, r)) in plain.iter().zip(&pairs) {
            if c == r {
                assert!((s.f1 - 1.0).abs() < 1e-5, "{s:?} for {c:?}");
            }
        }
    }
    left_out
}

#[test]
fn bertscore_equals_bert_score_on_a_tiny_bert() {
    let work = scratch("bertscore-baseline");
    let baseline = work.join("baseline.tsv");
    std::fs::write(&baseline, "LAYER,P,R,F\n0,0.5,0.51,0.52\n1,0.6,0.61,0.62\n2,0.3,0.31,0.32\n3,0.7,0.71,0.72\n")
        .unwrap();
    assert_eq!(
        equals_bert_score(bert(), &[1, 3], Some(baseline.as_path())),
        0,
        "every text tokenized as bert-score does"
    );
}

#[test]
fn bertscore_equals_bert_score_on_a_tiny_xlmr_encoder() {
    // The fixture's Unigram vocabulary scores "0" + "00" and "00" + "0" exactly alike, a tie
    // transformers' tokenizer breaks the other way on one sentence ("2.000.", in 2 pairs): pairs
    // tokenized otherwise are left out, and must stay few.
    let left_out = equals_bert_score(xlmr(), &[1, 2], None);
    assert!(left_out * 10 <= pairs().len(), "{left_out} pairs tokenized otherwise than by bert-score");
    let scorer = Scorer::new(xlmr(), Some(0), Device::Cpu).unwrap();
    assert!(scorer.notes().iter().all(|n| !n.contains("MLM head")), "{:?}", scorer.notes());
}

#[test]
fn batching_never_changes_a_score() {
    let pairs = pairs();
    for idf in [false, true] {
        let scorer = Scorer::new(bert(), Some(2), Device::Cpu).unwrap().with_idf(idf);
        let together = scorer.score(&pairs).unwrap();
        let reversed: Vec<(String, String)> = pairs.iter().rev().cloned().collect();
        let scorer = scorer.with_token_budget(300);
        let mut in_small_batches = scorer.score(&reversed).unwrap();
        in_small_batches.reverse();
        let alone = scorer.with_token_budget(1).score(&pairs).unwrap();
        let (small, one) = (largest_difference(&together, &in_small_batches), largest_difference(&together, &alone));
        println!("idf {idf}: max difference in batches of 300 tokens {small:.2e}, each pair alone {one:.2e}");
        assert!(small < 1e-6 && one < 1e-6);
        // Empty texts score 0, whatever they are batched with.
        let empty: Vec<&BertScore> = pairs
            .iter()
            .zip(&together)
            .filter(|((c, r), _)| c.trim().is_empty() || r.is_empty())
            .map(|p| p.1)
            .collect();
        assert_eq!(empty.len(), 6);
        assert!(empty.iter().all(|s| **s == BertScore::default()), "{empty:?}");
    }
}

#[test]
fn eval_bertscore_prints_the_means_and_writes_every_pair() {
    let pairs = pairs();
    let work = scratch("bertscore-cli");
    let (pred, reference, json) = (work.join("pred.txt"), work.join("ref.txt"), work.join("bertscore.json"));
    std::fs::write(&pred, pairs.iter().map(|p| p.0.as_str()).collect::<Vec<_>>().join("\n")).unwrap();
    std::fs::write(&reference, pairs.iter().map(|p| p.1.as_str()).collect::<Vec<_>>().join("\n")).unwrap();
    let (model, p, r, j) = (text(bert()), text(&pred), text(&reference), text(&json));
    let common = ["eval", "bertscore", "--model", model.as_str(), "--pred", p.as_str(), "--ref", r.as_str()];
    let args: Vec<&str> = common.iter().copied().chain(["--layer", "2", "--idf", "--json", j.as_str()]).collect();
    let (stdout, stderr) = indolm_ok(&args);
    assert!(stdout.contains(&format!("| {} | 2 | yes | no |", pairs.len())), "{stdout}");
    assert!(stderr.contains("6 pair(s) with an empty prediction or reference"), "{stderr}");
    let written: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let expected = Scorer::new(bert(), Some(2), Device::Cpu).unwrap().with_idf(true).score(&pairs).unwrap();
    let scores: Vec<BertScore> = written["scores"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| BertScore {
            precision: v["precision"].as_f64().unwrap(),
            recall: v["recall"].as_f64().unwrap(),
            f1: v["f1"].as_f64().unwrap(),
        })
        .collect();
    assert_eq!(scores.len(), pairs.len());
    for (a, b) in scores.iter().zip(&expected) {
        assert!(largest_difference(&[*a], &[*b]) < 1e-6, "{a:?} vs {b:?}");
    }
    let written_f1 = written["mean"]["f1"].as_f64().unwrap();
    assert!((written_f1 - mean(&expected).f1).abs() < 1e-6);
    assert!(stdout.contains(&format!("{:.2} |", 100.0 * written_f1)), "{stdout}");
    assert_eq!((written["settings"]["layer"].as_u64(), written["settings"]["idf"].as_bool()), (Some(2), Some(true)));

    // Refused, each in one line: a layer beyond the model's 3, no layer for a model bert-score
    // has no default for, files of different lengths, a baseline without the layer's row.
    let one_line = |extra: &[&str]| {
        let args: Vec<&str> = common.iter().chain(extra).copied().collect();
        let err = indolm_fails(&args);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        err
    };
    let err = one_line(&["--layer", "4"]);
    assert!(err.contains("--layer: layer 4 is beyond the model's 3 layers"), "{err}");
    let err = one_line(&[]);
    assert!(err.contains("bert-score has no default layer for this model"), "{err}");
    let short = work.join("baseline.tsv");
    std::fs::write(&short, "LAYER,P,R,F\n0,0.5,0.5,0.5\n1,0.6,0.6,0.6\n").unwrap();
    let err = one_line(&["--layer", "3", "--baseline", text(&short).as_str()]);
    assert!(err.contains("no baseline for layer 3: the file has rows for layers 0 to 1"), "{err}");
    std::fs::write(&reference, "satu\n").unwrap();
    let err = one_line(&["--layer", "2"]);
    assert!(err.contains(&format!("{} predictions but 1 references", pairs.len())), "{err}");
    let err = Scorer::new(bert(), Some(4), Device::Cpu).err().expect("layer 4 of 3 refused").to_string();
    assert!(err.contains("layer 4 is beyond the model's 3 layers"), "{err}");
}

#[test]
fn bertscore_on_cuda_equals_the_cpu() {
    if !tch::Cuda::is_available() {
        // Straight to the stderr handle, so that the skip shows in `make test`'s output.
        use std::io::Write;
        let _ = std::io::stderr()
            .write_all(b"SKIPPED: no CUDA device on this machine; this test runs only where one is present\n");
        return;
    }
    let pairs = pairs();
    for idf in [false, true] {
        let on = |device| Scorer::new(bert(), Some(3), device).unwrap().with_idf(idf).score(&pairs).unwrap();
        let (cpu, gpu) = (on(Device::Cpu), on(Device::Cuda(0)));
        let gap = largest_difference(&cpu, &gpu);
        println!("idf {idf}: max |CUDA - CPU| over P, R, F (fp32 both): {gap:.2e}");
        assert!(gap < 1e-5);
    }
}

#[test]
fn long_texts_are_tokenized_by_prefixes_as_whole_and_refused_past_the_cap() {
    // Texts of 1 to 150 UD sentences (up to 20 KB), joined by every kind of white space, a run
    // without a space longer than the first prefix, and words before such a run: the tokens of
    // their prefixes are the first tokens of the whole text, for WordPiece and SentencePiece.
    let ud = std::fs::read_to_string(test_data().join("ud-indonesian/id_csui-ud-train.conllu")).unwrap();
    let sentences: Vec<&str> =
        ud.lines().filter_map(|l| l.strip_prefix("# text = ")).map(str::trim).take(150).collect();
    let separators = [" ", "  ", "\t", "\n", " \u{a0} ", "\u{3000}", " \t ", ". "];
    let mut texts: Vec<String> = (1..=sentences.len())
        .step_by(7)
        .map(|k| {
            let mut text = sentences[0].to_string();
            for (i, s) in sentences[1..k].iter().enumerate() {
                text.push_str(separators[i % separators.len()]);
                text.push_str(s);
            }
            text
        })
        .collect();
    texts.push(format!("{} {}", "x".repeat(5_000), sentences.join(" ")));
    texts.push(format!("{}{}", "kata ".repeat(100), "y".repeat(5_000)));
    // Just under the cap: tokenized by a prefix of a few KB, not the whole MB.
    let mut big = sentences.join(" ").repeat(MAX_TEXT_BYTES / sentences.join(" ").len());
    big.truncate(big.trim_end().len());
    for dir in [bert(), xlmr()] {
        let scorer = Scorer::new(dir, Some(1), Device::Cpu).unwrap();
        let tokenizer = TextTokenizer::from_dir(dir).unwrap();
        let (max, ends) = (scorer.settings().max_tokens, scorer.token_ids("").unwrap());
        let whole = |text: &str| -> Vec<i64> {
            let pieces = tokenizer.encode_plain(text).unwrap();
            let cut = pieces.iter().take(max - 2).map(|&id| i64::from(id));
            std::iter::once(ends[0]).chain(cut).chain(std::iter::once(ends[1])).collect()
        };
        for text in &texts {
            assert_eq!(scorer.token_ids(text).unwrap(), whole(text), "{}: {text:?}", dir.display());
        }
        let start = std::time::Instant::now();
        let ids = scorer.token_ids(&big).unwrap();
        let prefixed = start.elapsed();
        let start = std::time::Instant::now();
        assert_eq!(ids, whole(&big));
        println!(
            "{}: a text of {} bytes tokenized in {prefixed:?} by prefixes, {:?} whole",
            dir.display(),
            big.len(),
            start.elapsed()
        );
        assert!(prefixed < start.elapsed(), "{prefixed:?}");
    }

    // Past the cap (a 100 MB line grew past 8 GB in the tokenizer): refused by line, in one line
    // naming the file.
    let work = scratch("bertscore-long-line");
    let (pred, reference) = (work.join("pred.txt"), work.join("ref.txt"));
    let long = "kata ".repeat(400_000);
    std::fs::write(&pred, format!("satu\ndua\n{long}\n")).unwrap();
    std::fs::write(&reference, "satu\ndua\ntiga\n").unwrap();
    let (model, p, r) = (text(bert()), text(&pred), text(&reference));
    let args =
        ["eval", "bertscore", "--model", model.as_str(), "--pred", p.as_str(), "--ref", r.as_str(), "--layer", "2"];
    let err = indolm_fails(&args);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains(&p) && err.contains("line 3: a text of 2000000 bytes, more than the 1 MiB"), "{err}");
    let pairs = [("satu", long.as_str())];
    let err = Scorer::new(bert(), Some(1), Device::Cpu).unwrap().score(&pairs).unwrap_err().to_string();
    assert!(err.contains("line 1: a text of 2000000 bytes"), "{err}");
}
