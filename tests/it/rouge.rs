//! ROUGE against Google's rouge-score package on pairs built from real Indonesian sentences.
use crate::common::*;
use indolm::eval::rouge::score;

#[test]
fn rouge_equals_rouge_score_on_ud_sentences() {
    let ud = std::fs::read_to_string(test_data().join("ud-indonesian/id_csui-ud-train.conllu")).unwrap();
    let sentences: Vec<String> =
        ud.lines().filter_map(|l| l.strip_prefix("# text = ")).map(String::from).take(320).collect();
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

    let (p, r) = (dir.join("pred.txt"), dir.join("ref.txt"));
    std::fs::write(&p, pairs.iter().map(|x| x.0.replace('\n', " ")).collect::<Vec<_>>().join("\n")).unwrap();
    std::fs::write(&r, pairs.iter().map(|x| x.1.clone()).collect::<Vec<_>>().join("\n")).unwrap();
    let (stdout, _) = indolm_ok(&["eval", "rouge", "--pred", p.to_str().unwrap(), "--ref", r.to_str().unwrap()]);
    assert!(stdout.contains("| 320 |"), "{stdout}");
    std::fs::write(&r, "satu\n").unwrap();
    let err = indolm_fails(&["eval", "rouge", "--pred", p.to_str().unwrap(), "--ref", r.to_str().unwrap()]);
    assert!(err.contains("320 predictions but 1 references"), "{err}");
}
