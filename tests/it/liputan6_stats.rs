//! The Liputan6 paper's statistics as reports (`indolm report liputan6-stats` and `indolm report
//! extraction-positions`, `crates/tasks/src/report/liputan6_stats.rs`) against an independent Python
//! reference (`tests/reference/indolm_reference/liputan6_stats.py`) on the same files: the
//! repository's sample in the Liputan6 layout (corpora/liputan6-sample) and a generated release
//! layout with both variants (canonical/{train,dev,test}, xtreme/{dev,test}), abstractive and
//! copied summaries, empty and very short summaries, numeric ids (one a JSON number), tokens with
//! spaces and capitals, and articles with and without Oracle labels. Every figure of the JSON
//! equals the reference's; the histograms of the Oracle labels and of `.candidate` files equal
//! the reference's and the picks the files were written from; the charts are PNGs of the stated
//! size; bad input is refused in one line.
use crate::common::{indolm_fails, indolm_ok, reference, root, scratch};
use indolm_tasks::report::liputan6_stats::CHART_SIZE;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Asserts that every key of `reference` is in `ours` with the same value: numbers within 1e-9,
/// everything else equal; `at` names the place for the message. Returns the numbers compared.
fn assert_same(ours: &Value, reference: &Value, at: &str) -> usize {
    match (ours, reference) {
        (Value::Object(a), Value::Object(b)) => b
            .iter()
            .map(|(k, v)| {
                let mine = a.get(k).unwrap_or_else(|| panic!("{at}: indolm's JSON has no `{k}`"));
                assert_same(mine, v, &format!("{at}.{k}"))
            })
            .sum(),
        (Value::Array(a), Value::Array(b)) => {
            assert_eq!(a.len(), b.len(), "{at}: lengths");
            a.iter().zip(b).enumerate().map(|(i, (x, y))| assert_same(x, y, &format!("{at}[{i}]"))).sum()
        }
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            assert!((x - y).abs() <= 1e-9, "{at}: indolm {x}, reference {y}");
            1
        }
        _ => {
            assert_eq!(ours, reference, "{at}");
            0
        }
    }
}

/// Reads a JSON file.
fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Checks that `path` is a PNG (signature, IHDR first) of the bar charts' size.
fn assert_chart_png(path: &Path) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{}: not a PNG", path.display());
    assert_eq!(&bytes[12..16], b"IHDR", "{}: the first chunk is not IHDR", path.display());
    let size =
        (u32::from_be_bytes(bytes[16..20].try_into().unwrap()), u32::from_be_bytes(bytes[20..24].try_into().unwrap()));
    assert_eq!(size, CHART_SIZE, "{}: width and height", path.display());
    assert!(bytes.len() > 1_000, "{}: {} bytes, too few for a drawn chart", path.display(), bytes.len());
}

/// An article or summary: sentences of tokens.
type Sentences = Vec<Vec<String>>;

/// One generated article file.
struct Generated {
    id: Value,
    article: Sentences,
    summary: Sentences,
    label: Option<Vec<usize>>,
}

/// `count` seeded articles: 1 to 20 sentences of 2 to 8 words from a small vocabulary (some
/// capitalized, one a token holding a space), each sentence ending with "."; summaries copied,
/// copied with fresh words, fresh, very short or empty; Oracle labels for two articles in three.
fn generate(count: usize, first_id: usize, rng: &mut rand::rngs::StdRng) -> Vec<Generated> {
    const WORDS: &str = "pasar kota warga hujan pagi sore jalan rumah sekolah anak guru petani padi sawah \
        sungai jembatan kereta stasiun harga beras naik turun Jakarta Bandung baru lama besar kecil";
    const FRESH: &str = "banjir melanda ibu kota menurut laporan resmi pemerintah daerah setempat";
    let vocab: Vec<&str> = WORDS.split_whitespace().chain(["dua puluh"]).collect();
    let fresh: Vec<&str> = FRESH.split_whitespace().collect();
    let mut ids: Vec<usize> = (first_id..first_id + count).collect();
    ids.shuffle(&mut *rng);
    (0..count)
        .map(|a| {
            let n = rng.random_range(1..=20);
            let article: Sentences = (0..n)
                .map(|_| {
                    let len = rng.random_range(2..=8);
                    let mut s: Vec<String> =
                        (0..len).map(|_| vocab[rng.random_range(0..vocab.len())].to_string()).collect();
                    s.push(".".into());
                    s
                })
                .collect();
            let pick = |rng: &mut rand::rngs::StdRng| article[rng.random_range(0..n)].clone();
            let summary: Sentences = match a % 6 {
                0 => (0..rng.random_range(1..=3)).map(|_| pick(&mut *rng)).collect(),
                1 => {
                    let mut s = pick(&mut *rng);
                    s.insert(1, fresh[rng.random_range(0..fresh.len())].to_string());
                    vec![s, pick(&mut *rng)]
                }
                2 | 3 => {
                    let len = rng.random_range(6..=14);
                    vec![(0..len).map(|_| fresh[rng.random_range(0..fresh.len())].to_string()).collect()]
                }
                4 => vec![vec!["Hujan".into(), ".".into()]],
                _ if a % 12 == 5 => Vec::new(),
                _ => vec![pick(&mut *rng).into_iter().chain(["lagi".to_string()]).collect()],
            };
            // No label for every third article (the release script's is computed; it cannot score an
            // empty summary, which gets one).
            let label = (a % 3 != 2 || summary.is_empty()).then(|| {
                let mut l: Vec<usize> = (0..n).filter(|_| rng.random_bool(0.3)).collect();
                if l.is_empty() {
                    l.push(n - 1);
                }
                l.reverse(); // labels are in selection order, not sorted
                l
            });
            // One id a JSON number, the rest strings of digits.
            let id = if a == 0 { json!(ids[a]) } else { json!(ids[a].to_string()) };
            Generated { id, article, summary, label }
        })
        .collect()
}

/// Writes articles into `dir` as `<id>.json`, in the release's keys.
fn write_articles(dir: &Path, articles: &[&Generated]) {
    std::fs::create_dir_all(dir).unwrap();
    for g in articles {
        let id = g.id.as_str().map(String::from).unwrap_or_else(|| g.id.to_string());
        let mut value = json!({
            "id": g.id, "url": format!("https://www.liputan6.com/news/read/{id}"),
            "clean_article": g.article, "clean_summary": g.summary,
        });
        if let Some(label) = &g.label {
            value["extractive_summary"] = json!(label);
        }
        std::fs::write(dir.join(format!("{id}.json")), value.to_string()).unwrap();
    }
}

/// A release layout under a scratch folder: canonical train/dev/test and the Xtreme dev and test
/// sets copied out of canonical dev and test (every other article), with the articles of
/// canonical test (in file-name order, as indolm reads a split).
fn release_layout() -> (PathBuf, Vec<Generated>) {
    let dir = scratch("lip-stats-release");
    let mut rng = rand::rngs::StdRng::seed_from_u64(39);
    let train = generate(24, 1000, &mut rng);
    let dev = generate(12, 100, &mut rng);
    let test = generate(14, 200, &mut rng);
    write_articles(&dir.join("canonical/train"), &train.iter().collect::<Vec<_>>());
    write_articles(&dir.join("canonical/dev"), &dev.iter().collect::<Vec<_>>());
    write_articles(&dir.join("canonical/test"), &test.iter().collect::<Vec<_>>());
    write_articles(&dir.join("xtreme/dev"), &dev.iter().step_by(2).collect::<Vec<_>>());
    write_articles(&dir.join("xtreme/test"), &test.iter().step_by(2).collect::<Vec<_>>());
    // File-name order: the ids are three-digit strings (and one number) of the same length.
    let mut test = test;
    test.sort_by_key(|g| g.id.as_str().map(String::from).unwrap_or_else(|| g.id.to_string()));
    (dir, test)
}

/// Runs `report liputan6-stats` with `--json` and `--png` and the reference on the same splits;
/// compares them and returns indolm's JSON and its Markdown.
fn stats_against_reference(data: &Path, splits: &[&str], name: &str) -> (Value, String) {
    let out = scratch(name);
    let (json_path, png, md) = (out.join("stats.json"), out.join("fig2.png"), out.join("stats.md"));
    let mut args = vec!["report", "liputan6-stats", "--data", data.to_str().unwrap()];
    args.extend(["--json", json_path.to_str().unwrap(), "--png", png.to_str().unwrap(), "--out", md.to_str().unwrap()]);
    let (stdout, _) = indolm_ok(&args);
    println!("{stdout}");
    let ours = read_json(&json_path);
    let expected: Value =
        serde_json::from_str(&reference(&["liputan6-stats", data.to_str().unwrap(), &splits.join(",")])).unwrap();
    let names: Vec<&str> = ours["splits"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, splits, "the splits found");
    let compared = assert_same(&ours, &expected, "stats");
    println!("{compared} figures equal the reference's");
    assert_chart_png(&png);
    assert!(stdout.starts_with(&std::fs::read_to_string(&md).unwrap()), "--out holds the printed tables");
    assert!(!stdout.contains("| paper,"), "not the release: no paper rows\n{stdout}");
    (ours, stdout)
}

#[test]
fn sample_statistics_equal_the_python_reference() {
    let data = root().join("corpora/liputan6-sample");
    let (ours, stdout) = stats_against_reference(&data, &["train", "dev", "test"], "lip-stats-sample");
    let combined: Vec<&str> =
        ours["combined"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(combined, ["dev+test", "train+dev+test"]);
    assert_eq!(ours["combined"][1]["articles"], 50);
    // The sample's summaries are two of the article's sentences: every word and bigram is in it.
    assert_eq!(ours["combined"][1]["novel"]["mean"][0], 0.0);
    assert!(stdout.contains("| train+dev+test | 50 |") && stdout.contains("ordered by id as text"), "{stdout}");
}

#[test]
fn release_layout_statistics_equal_the_python_reference() {
    let (data, _) = release_layout();
    let splits = ["canonical/train", "canonical/dev", "canonical/test", "xtreme/dev", "xtreme/test"];
    let (ours, stdout) = stats_against_reference(&data, &splits, "lip-stats-layout");
    let combined: Vec<&str> =
        ours["combined"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(combined, ["canonical dev+test", "canonical train+dev+test", "xtreme dev+test"]);
    // Each id once in Fig. 2 (the Xtreme articles are copies), ordered as numbers.
    assert_eq!(ours["chronology"]["articles"], 50);
    assert_eq!(ours["chronology"]["numeric_ids"], true);
    assert_eq!(ours["chronology"]["fifths"][0]["first_id"], "100");
    // Empty and short summaries have no 4-gram: the mean is over the others.
    let train = &ours["splits"][0]["novel"];
    assert!(train["summaries"][3].as_u64().unwrap() < 24 && train["summaries"][0].as_u64().unwrap() < 24, "{train}");
    assert!(stdout.contains("| canonical dev+test | 26 |"), "{stdout}");
    // Named splits, in the order given.
    let (stdout, _) =
        indolm_ok(&["report", "liputan6-stats", "--data", data.to_str().unwrap(), "--split", "xtreme/test"]);
    assert!(stdout.contains("| xtreme/test | 7 |") && !stdout.contains("dev+test"), "{stdout}");
}

/// Picks for each article of `articles`: sentences (by index, increasing) whose text is unique in
/// the article, so that matching them back is unambiguous; none for some.
fn unique_picks(articles: &[Generated], rng: &mut rand::rngs::StdRng) -> Vec<Vec<usize>> {
    articles
        .iter()
        .map(|g| {
            let unique: Vec<usize> = (0..g.article.len())
                .filter(|&i| g.article.iter().filter(|s| **s == g.article[i]).count() == 1)
                .collect();
            unique.into_iter().filter(|_| rng.random_bool(0.35)).take(4).collect()
        })
        .collect()
}

/// The `<q>` line of `picks` of an article (its tokens lowercased, as indolm reads them).
fn candidate_line(article: &Sentences, picks: &[usize]) -> String {
    picks.iter().map(|&i| article[i].join(" ").to_lowercase()).collect::<Vec<_>>().join("<q>")
}

#[test]
fn oracle_and_candidate_positions_equal_the_python_reference() {
    let (data, test) = release_layout();
    let mut rng = rand::rngs::StdRng::seed_from_u64(4);
    let out = scratch("lip-positions");
    // A run folder with its canonical_test.candidate, and a file of its own (with a sentence that
    // repeats an earlier one: matched to the earliest after the previous pick).
    let run = out.join("run-a");
    std::fs::create_dir_all(&run).unwrap();
    let a_picks = unique_picks(&test, &mut rng);
    let lines: String = test.iter().zip(&a_picks).map(|(g, p)| candidate_line(&g.article, p) + "\n").collect();
    std::fs::write(run.join("canonical_test.candidate"), lines).unwrap();
    let b_file = out.join("lead.candidate");
    let lines: String = test
        .iter()
        .map(|g| {
            let lead: Vec<usize> = (0..g.article.len().min(3)).collect();
            candidate_line(&g.article, &lead) + "\r\n"
        })
        .collect();
    std::fs::write(&b_file, lines).unwrap();
    let (json_path, png) = (out.join("positions.json"), out.join("fig4.png"));
    let b_arg = format!("Lead-3={}", b_file.display());
    let data_arg = data.to_str().unwrap();
    let (stdout, _) = indolm_ok(&[
        "report",
        "extraction-positions",
        run.to_str().unwrap(),
        &b_arg,
        "--data",
        data_arg,
        "--split",
        "canonical/test",
        "--positions",
        "5",
        "--json",
        json_path.to_str().unwrap(),
        "--png",
        png.to_str().unwrap(),
    ]);
    println!("{stdout}");
    let ours = read_json(&json_path);
    let a_arg = format!("run-a={}", run.join("canonical_test.candidate").display());
    let expected: Value =
        serde_json::from_str(&reference(&["liputan6-positions", data_arg, "canonical/test", "5", &a_arg, &b_arg]))
            .unwrap();
    let compared = assert_same(&ours, &expected, "positions");
    println!("{compared} figures equal the reference's");
    let names: Vec<&str> = ours["systems"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["Oracle", "run-a", "Lead-3"]);
    // The counts are those of the picks the files were written from.
    let mut counts = vec![0u64; 6];
    for &j in a_picks.iter().flatten() {
        counts[j.min(5)] += 1;
    }
    assert_eq!(ours["systems"][1]["counts"], json!(counts));
    // The Oracle: the released labels and, where absent, the release script's (recomputed).
    let recomputed = test.iter().filter(|g| g.label.is_none()).count();
    assert!(recomputed > 0 && recomputed < test.len());
    assert_eq!(ours["oracle_recomputed"], recomputed);
    assert_chart_png(&png);
    assert!(stdout.contains("| Position | Oracle | run-a | Lead-3 |") && stdout.contains("| >5 |"), "{stdout}");

    // The Oracle alone, on the sample's test split (every label released).
    let sample = root().join("corpora/liputan6-sample");
    let json_path = out.join("sample.json");
    let args =
        ["report", "extraction-positions", "--data", sample.to_str().unwrap(), "--json", json_path.to_str().unwrap()];
    indolm_ok(&args);
    let expected: Value =
        serde_json::from_str(&reference(&["liputan6-positions", sample.to_str().unwrap(), "test", "10"])).unwrap();
    assert_same(&read_json(&json_path), &expected, "sample positions");
    assert_eq!(read_json(&json_path)["oracle_recomputed"], 0);
}

#[test]
fn bad_input_is_refused_in_one_line() {
    let (data, test) = release_layout();
    let out = scratch("lip-stats-bad");
    let one_line = |args: &[&str], wanted: &[&str]| {
        let err = indolm_fails(args);
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: more than one line:\n{err}");
        for w in wanted {
            assert!(err.contains(w), "{args:?}: expected {w:?} in:\n{err}");
        }
    };
    let d = data.to_str().unwrap();
    let missing = out.join("nowhere");
    one_line(&["report", "liputan6-stats", "--data", missing.to_str().unwrap()], &["nowhere", "not found"]);
    one_line(&["report", "liputan6-stats", "--data", out.to_str().unwrap()], &["no split folders"]);
    one_line(&["report", "liputan6-stats", "--data", d, "--split", "canonical/none"], &["canonical/none"]);
    one_line(&["report", "liputan6-stats", "--data", d, "--split", "xtreme/dev", "xtreme/dev"], &["--split", "twice"]);
    let gif = out.join("fig.gif");
    one_line(&["report", "liputan6-stats", "--data", d, "--png", gif.to_str().unwrap()], &["--png", ".png or .svg"]);
    // Fewer than 5 articles: no fifths to draw.
    let small = out.join("small");
    std::fs::create_dir_all(small.join("test")).unwrap();
    for f in std::fs::read_dir(data.join("xtreme/test")).unwrap().take(3) {
        let f = f.unwrap();
        std::fs::copy(f.path(), small.join("test").join(f.file_name())).unwrap();
    }
    let png = out.join("fig2.png");
    let args = ["report", "liputan6-stats", "--data", small.to_str().unwrap(), "--png", png.to_str().unwrap()];
    one_line(&args, &["at least 5 articles"]);
    // A broken article file is named.
    std::fs::write(small.join("test/zz.json"), r#"{"id": "9", "clean_summary": [["a"]]}"#).unwrap();
    one_line(&["report", "liputan6-stats", "--data", small.to_str().unwrap()], &["zz.json", "clean_article"]);

    let positions = |extra: &[&str]| -> Vec<String> {
        let mut args = vec!["report", "extraction-positions", "--data", d, "--split", "canonical/test"];
        args.extend_from_slice(extra);
        args.into_iter().map(String::from).collect()
    };
    let run =
        |args: Vec<String>, wanted: &[&str]| one_line(&args.iter().map(String::as_str).collect::<Vec<_>>(), wanted);
    run(positions(&["--positions", "0"]), &["--positions", "at least 1"]);
    run(positions(&[out.to_str().unwrap()]), &["canonical_test.candidate", "not found"]);
    let short = out.join("short.candidate");
    std::fs::write(&short, "a b .\n").unwrap();
    run(positions(&[short.to_str().unwrap()]), &["1 summary lines for the 14 articles"]);
    // An abstractive summary: its sentence is none of the article's.
    let lines: String = test.iter().map(|g| candidate_line(&g.article, &[0]) + "\n").collect();
    let abstractive = out.join("abs.candidate");
    std::fs::write(&abstractive, lines.replacen('\n', " banjir\n", 1)).unwrap();
    run(
        positions(&[abstractive.to_str().unwrap()]),
        &["abs.candidate", "line 1", "not one of the article's sentences"],
    );
    run(positions(&[&format!("Oracle={}", abstractive.display())]), &["Oracle", "NAME=PATH"]);
}
