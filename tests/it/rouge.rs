//! ROUGE on pairs built from real Indonesian sentences (UD Indonesian-CSUI): the rouge-score
//! variant against Google's rouge-score package, and the official variant against ROUGE-1.5.5.pl
//! itself (`tests/reference/indolm_reference/rouge155.py`, run as PreSumm's pyrouge runs it):
//! every per-pair figure, every average and interval, and the script's stems of a word list.
use crate::common::*;
use indolm_metrics::rouge::official::format5;
use indolm_metrics::rouge::porter::script_stem;
use indolm_metrics::rouge::{evaluate, score, Figure, RougeOptions, RougeScores, Scorer};

/// The first `n` sentences (`# text = ` lines) of the UD Indonesian-CSUI training file.
fn ud_sentences(n: usize) -> Vec<String> {
    let ud = std::fs::read_to_string(test_data().join("ud-indonesian/id_csui-ud-train.conllu")).unwrap();
    ud.lines().filter_map(|l| l.strip_prefix("# text = ")).map(String::from).take(n).collect()
}

#[test]
fn rouge_equals_rouge_score_on_ud_sentences() {
    let sentences = ud_sentences(320);
    // Candidates of every kind: the sentence itself, a shuffled half, a neighbour, a mix, empty.
    let mut pairs: Vec<(String, String)> = Vec::new();
    for (i, s) in sentences.iter().enumerate() {
        let words: Vec<&str> = s.split_whitespace().collect();
        let next = &sentences[(i + 1) % sentences.len()];
        let candidate = match i % 5 {
            0 => s.clone(),
            1 => words.iter().rev().take(words.len() / 2 + 1).cloned().collect::<Vec<_>>().join(" "),
            2 => next.clone(),
            3 => format!("{} {}", words[..words.len() / 2].join(" "), next),
            _ => {
                if i % 10 == 4 {
                    String::new()
                } else {
                    s.to_uppercase()
                }
            }
        };
        pairs.push((candidate, s.clone()));
    }
    let dir = scratch("rouge");
    std::fs::write(dir.join("pairs.json"), serde_json::to_string(&pairs).unwrap()).unwrap();
    reference(&["rouge", dir.join("pairs.json").to_str().unwrap(), dir.join("ref.json").to_str().unwrap()]);
    let expected: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("ref.json")).unwrap()).unwrap();
    let mut worst: f64 = 0.0;
    for ((pred, reference), e) in pairs.iter().zip(&expected) {
        let s = score(pred, reference);
        for (ours, key) in [(s.rouge1, "rouge1"), (s.rouge2, "rouge2"), (s.rouge_l, "rougeL")] {
            let theirs: Vec<f64> = e[key].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
            for (a, b) in [ours.precision, ours.recall, ours.f1].iter().zip(&theirs) {
                worst = worst.max((a - b).abs());
            }
        }
    }
    println!("{} pairs: max |indolm - rouge-score| over P, R, F of ROUGE-1/2/L: {worst:.2e}", pairs.len());
    assert!(worst < 1e-12);

    // `eval rouge --rouge rouge-score` prints the mean F1 of the same scores.
    let (p, r) = (dir.join("pred.txt"), dir.join("ref.txt"));
    std::fs::write(&p, pairs.iter().map(|x| x.0.replace('\n', " ")).collect::<Vec<_>>().join("\n")).unwrap();
    std::fs::write(&r, pairs.iter().map(|x| x.1.clone()).collect::<Vec<_>>().join("\n")).unwrap();
    let mean_r1 = 100.0 * pairs.iter().map(|(a, b)| score(a, b).rouge1.f1).sum::<f64>() / pairs.len() as f64;
    let args = ["eval", "rouge", "--pred", p.to_str().unwrap(), "--ref", r.to_str().unwrap()];
    let (stdout, _) = indolm_ok(&[&args[..], &["--rouge", "rouge-score"]].concat());
    assert!(stdout.contains(&format!("| 320 | {mean_r1:.2} |")), "{stdout}");
    let (stdout, _) = indolm_ok(&args);
    assert!(stdout.contains("| 320 |") && stdout.contains("ROUGE-1.5.5 -c 95 -m -r 1000 -n 2 -a"), "{stdout}");
    std::fs::write(&r, "satu\n").unwrap();
    let err = indolm_fails(&args);
    assert!(err.contains("320 predictions but 1 references"), "{err}");
}

/// Summary-like pairs (PreSumm lines, sentences separated by `<q>`) from consecutive UD
/// sentences: references of two or three sentences; candidates of eight kinds (`i % 8`): the
/// reference, its sentences reversed, one shared sentence and an unrelated one, half a sentence
/// reversed and the next in capitals, the reference as one sentence, an unrelated summary, a
/// summary full of what the script's reading treats specially (PTB brackets, `<` and `<Q>`, an
/// empty sentence, İ and the Kelvin sign, padding), and nothing. Every 64th reference is blank
/// (PreSumm leaves such a pair out).
fn summary_pairs() -> Vec<(String, String)> {
    let s = ud_sentences(480);
    (0..320)
        .map(|i| {
            let mut sentences = vec![s[i].clone(), s[i + 1].clone()];
            if i % 3 == 0 {
                sentences.push(s[i + 2].clone());
            }
            let reference = sentences.join("<q>");
            let words: Vec<&str> = s[i].split_whitespace().collect();
            let candidate = match i % 8 {
                0 => reference.clone(),
                1 => sentences.iter().rev().cloned().collect::<Vec<_>>().join("<q>"),
                2 => format!("{}<q>{}", s[i], s[i + 40]),
                3 => {
                    let half: Vec<&str> = words[..words.len() / 2 + 1].iter().rev().copied().collect();
                    format!("{}<q>{}", half.join(" "), s[i + 1].to_uppercase())
                }
                4 => sentences.join(" "),
                5 => format!("{}<q>{}", s[i + 150], s[i + 151]),
                6 => format!(
                    "  -LRB- {} -RRB- <q><q>\u{130}stanbul \u{212a}-9 ``x'' a<b {}<Q>{} ",
                    s[i + 1],
                    s[i],
                    s[i + 2]
                ),
                _ => (if i % 16 == 7 { "" } else { "<q>  <q>" }).to_string(),
            };
            (candidate, if i % 64 == 13 { "  ".to_string() } else { reference })
        })
        .collect()
}

/// The script's `[Average, CI low, CI high]` of one figure in the reference's JSON.
fn script_average(out: &serde_json::Value, variant: &str, measure: &str) -> [f64; 3] {
    let v = &out["averages"][variant][measure];
    [0, 1, 2].map(|k| v[k].as_f64().unwrap_or_else(|| panic!("{variant} {measure}: {v}")))
}

/// Each variant's recall, precision and F1 figures with the script's names for them.
fn figures(report: &indolm_metrics::rouge::Report) -> Vec<(&'static str, &'static str, Figure)> {
    let mut out = Vec::new();
    for (variant, m) in [("rouge1", report.rouge1), ("rouge2", report.rouge2), ("rougeL", report.rouge_l)] {
        out.extend([(variant, "recall", m.recall), (variant, "precision", m.precision), (variant, "f1", m.f1)]);
    }
    out
}

/// Words whose stems the script is asked for: every token of more than three characters of the
/// pairs (lowercased, split at anything but a-z and 0-9), and English words that exercise each
/// Porter rule and the exception lists.
fn probe_words(pairs: &[(String, String)]) -> Vec<String> {
    let mut words = std::collections::BTreeSet::new();
    for (a, b) in pairs {
        for text in [a, b] {
            let lower = text.to_lowercase();
            let tokens = lower.split(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit()));
            words.extend(tokens.filter(|t| !t.is_empty()).map(String::from));
        }
    }
    let english = "caresses ponies cats feed agreed plastered bled motoring sing conflated troubled sized hopping \
                   tanned falling hissing fizzed failing filing happy sky yyyy yellow relational conditional \
                   rational valenci hesitanci digitizer conformabli radicalli differentli vileli analogousli \
                   vietnamization predication operator feudalism decisiveness hopefulness callousness formaliti \
                   sensitiviti sensibiliti triplicate formative formalize electriciti electrical hopeful goodness \
                   revival allowance inference airliner gyroscopic adjustable defensible irritant replacement \
                   adjustment dependent adoption homologou communism activate angulariti homologous effective \
                   bowdlerize probate rate cease controll roll data media went children best offer testes said";
    words.extend(english.split_whitespace().map(String::from));
    words.into_iter().collect()
}

/// The official variant equals ROUGE-1.5.5.pl run as PreSumm runs it (-c 95 -m -r 1000 -n 2 -a,
/// pyrouge's files), figure for figure: every pair's R, P and F of ROUGE-1, -2 and -L, and every
/// printed Average with its 95% interval (the script's own resampling seeds, emulated with perl's
/// drand48), to the five decimals it prints. With other seeds the intervals move by Monte-Carlo
/// noise only. The script's -m stems equal `script_stem` on the pairs' words and an English list.
#[test]
fn official_rouge_equals_rouge_1_5_5_on_ud_summaries() {
    let pairs = summary_pairs();
    let dir = scratch("rouge155");
    let words = probe_words(&pairs);
    std::fs::write(dir.join("pairs.json"), serde_json::to_string(&pairs).unwrap()).unwrap();
    std::fs::write(dir.join("words.json"), serde_json::to_string(&words).unwrap()).unwrap();
    let started = std::time::Instant::now();
    reference(&[
        "rouge155",
        dir.join("pairs.json").to_str().unwrap(),
        dir.join("out.json").to_str().unwrap(),
        dir.join("words.json").to_str().unwrap(),
    ]);
    println!(
        "ROUGE-1.5.5.pl on {} pairs and {} words: {:.1}s",
        pairs.len(),
        words.len(),
        started.elapsed().as_secs_f64()
    );
    let out: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("out.json")).unwrap()).unwrap();

    // Stems: the script's token for each word, ours with its length rule.
    let stems = out["stems"].as_object().unwrap();
    assert_eq!(stems.len(), words.len());
    let wrong: Vec<String> = words
        .iter()
        .filter(|w| stems[w.as_str()].as_str() != Some(script_stem(w).as_str()))
        .map(|w| format!("{w}: script {}, indolm {}", stems[w.as_str()], script_stem(w)))
        .collect();
    assert!(wrong.is_empty(), "{} of {} stems differ: {wrong:?}", wrong.len(), words.len());

    // Every pair's figures.
    let report = evaluate(&pairs, &RougeOptions::default()).unwrap();
    let documents = out["documents"].as_array().unwrap();
    assert_eq!((report.pairs, report.scored), (320, 315));
    for (i, (ours, theirs)) in report.documents.iter().zip(documents).enumerate() {
        let Some(ours) = ours else {
            assert!(theirs.is_null(), "pair {i}: the script scored it, indolm left it out");
            continue;
        };
        let RougeScores { rouge1, rouge2, rouge_l } = *ours;
        for (key, prf) in [("rouge1", rouge1), ("rouge2", rouge2), ("rougeL", rouge_l)] {
            let script: Vec<f64> = theirs[key].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
            assert_eq!([prf.recall, prf.precision, prf.f1].to_vec(), script, "pair {i} {key}: {:?}", pairs[i]);
        }
    }

    // Every Average and interval, exactly; other seeds within Monte-Carlo noise.
    for (variant, measure, f) in figures(&report) {
        let [value, low, high] = script_average(&out, variant, measure);
        let ours = [f.value, f.interval.low, f.interval.high];
        assert_eq!(ours, [value, low, high], "{variant} {measure}: indolm {ours:?}, script {:?}", [value, low, high]);
    }
    // The 2.5% and 97.5% points of 1,000 resample means move by about 0.002 between seeds
    // on these pairs (their per-pair F spread from 0 to 1); 0.015 is some six times that.
    const INTERVAL_NOISE: f64 = 0.015;
    const AVERAGE_NOISE: f64 = 0.005;
    let (mut worst_end, mut worst_value): (f64, f64) = (0.0, 0.0);
    for seed in 1..=5 {
        let other = evaluate(&pairs, &RougeOptions { seed, ..RougeOptions::default() }).unwrap();
        for (variant, measure, f) in figures(&other) {
            let [value, low, high] = script_average(&out, variant, measure);
            worst_value = worst_value.max((f.value - value).abs());
            worst_end = worst_end.max((f.interval.low - low).abs()).max((f.interval.high - high).abs());
        }
    }
    let widest = figures(&report).iter().map(|(_, _, f)| f.interval.high - f.interval.low).fold(0.0, f64::max);
    println!(
        "seeds 1-5 against the script's: interval ends within {worst_end:.5}, Averages within {worst_value:.5} \
         (widest interval {widest:.5})"
    );
    assert!(worst_end <= INTERVAL_NOISE && worst_value <= AVERAGE_NOISE, "{worst_end} {worst_value}");

    // How far rouge-score is from the script on these pairs: F1 ×100, all pairs and the pairs of
    // ordinary text (kinds 0-5, non-blank reference).
    let ordinary: Vec<(String, String)> =
        pairs.iter().enumerate().filter(|(i, _)| i % 8 < 6 && i % 64 != 13).map(|(_, p)| p.clone()).collect();
    for (name, list) in [("all 320 pairs", pairs.clone()), ("the 235 ordinary pairs", ordinary)] {
        let official = evaluate(&list, &RougeOptions::default()).unwrap();
        let google = evaluate(&list, &RougeOptions { scorer: Scorer::RougeScore, ..RougeOptions::default() }).unwrap();
        let both = [
            ("R1", official.rouge1.f1.value, google.rouge1.f1.value),
            ("R2", official.rouge2.f1.value, google.rouge2.f1.value),
            ("RL", official.rouge_l.f1.value, google.rouge_l.f1.value),
        ];
        let line: Vec<String> = both
            .iter()
            .map(|(v, o, g)| format!("{v} {:.2} vs {:.2} ({:+.2})", 100.0 * o, 100.0 * g, 100.0 * (o - g)))
            .collect();
        println!("official vs rouge-score F1 ×100 on {name}: {}", line.join(", "));
    }

    // `eval rouge` prints and writes the same figures.
    let (p, r, j) = (dir.join("pred.txt"), dir.join("ref.txt"), dir.join("rouge.json"));
    std::fs::write(&p, pairs.iter().map(|x| format!("{}\n", x.0)).collect::<String>()).unwrap();
    std::fs::write(&r, pairs.iter().map(|x| format!("{}\n", x.1)).collect::<String>()).unwrap();
    let args = ["eval", "rouge", "--pred", p.to_str().unwrap(), "--ref", r.to_str().unwrap()];
    let (stdout, stderr) = indolm_ok(&[&args[..], &["--json", j.to_str().unwrap()]].concat());
    println!("{stdout}");
    assert!(stderr.contains("5 of 320 pairs have an empty reference"), "{stderr}");
    let [value, low, high] = script_average(&out, "rouge1", "f1").map(|x| report.percent(x));
    assert!(stdout.contains(&format!("| 315 | {value:.2} | {low:.2}–{high:.2} |")), "{stdout}");
    let [value, low, high] = script_average(&out, "rougeL", "recall");
    assert!(stdout.contains(&format!("| ROUGE-L | {} | {} - {} |", format5(value), format5(low), format5(high))));
    let written: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&j).unwrap()).unwrap();
    assert_eq!(written["rouge_l"]["f1"]["value"].as_f64(), Some(report.rouge_l.f1.value));
    assert_eq!(written["documents"].as_array().unwrap().len(), 320);
    assert!(written["documents"][13].is_null());
    // A reference file with nothing to score, and a bad resample count, are errors.
    std::fs::write(&r, "\n".repeat(320)).unwrap();
    assert!(indolm_fails(&args).contains("every reference line is empty"));
    let err = indolm_fails(&[&args[..], &["--resamples", "0"]].concat());
    assert!(err.contains("--resamples"), "{err}");
}

#[test]
fn eval_rouge_refuses_a_pair_past_its_lcs_bound_by_line() {
    // Two lines of 1 MB (200,000 tokens each) on line 2: official ROUGE-L allocated a 28.9 GB
    // table and aborted, rouge-score's LCS ran for hours; now one line naming the file and line.
    let dir = scratch("rouge-long-lines");
    let long = "kata ".repeat(200_000);
    let (p, r) = (dir.join("pred.txt"), dir.join("ref.txt"));
    std::fs::write(&p, format!("satu dua\n{long}\n")).unwrap();
    std::fs::write(&r, format!("satu dua\n{long}\n")).unwrap();
    for scorer in ["official", "rouge-score"] {
        let start = std::time::Instant::now();
        let args = ["eval", "rouge", "--pred", p.to_str().unwrap(), "--ref", r.to_str().unwrap(), "--rouge", scorer];
        let err = indolm_fails(&args);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(p.to_str().unwrap()), "{err}");
        assert!(
            err.contains("line 2: 200000 predicted × 200000 reference tokens make 40000000000 ROUGE-L LCS cells"),
            "{err}"
        );
        assert!(start.elapsed().as_secs() < 5, "{scorer}: {:?}", start.elapsed());
    }
}
