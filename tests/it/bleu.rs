//! Corpus BLEU and chrF against the sacrebleu package itself
//! (`tests/reference/indolm_reference/sacrebleu_ref.py`): NusaX's 500 parallel sentences scored
//! as translations of each other (one and two reference streams), and corpora of the lines the
//! 13a tokenizer and Python's whitespace treat specially, each with several option sets. Every
//! score is sacrebleu's to 1e-9, and the counts, lengths, printouts and signatures are its own.
use crate::common::*;
use indolm_metrics::bleu::{corpus_bleu, BleuOptions, BleuScore, Smoothing, Tokenize};
use indolm_metrics::chrf::{corpus_chrf, ChrfOptions};
use serde_json::{json, Value};

/// One corpus: its name, hypotheses and reference streams.
struct Case {
    name: String,
    hyps: Vec<String>,
    refs: Vec<Vec<String>>,
}

/// The indonesian, sundanese and javanese columns of NusaX's MT training file, row by row.
fn nusax_mt() -> Vec<[String; 3]> {
    let mut reader = csv::Reader::from_path(test_data().join("nusax/mt/train.csv")).unwrap();
    let headers = reader.headers().unwrap().clone();
    let column = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let (id, su, jv) = (column("indonesian"), column("sundanese"), column("javanese"));
    reader
        .records()
        .map(|r| {
            let r = r.unwrap();
            [r[id].to_string(), r[su].to_string(), r[jv].to_string()]
        })
        .collect()
}

/// Lines 13a and Python read specially, each with its reference: empty lines, a hypothesis
/// longer than its reference, Unicode punctuation, escapes, `<skipped>`, numbers, the \x1c–\x1f
/// separators, tabs, trailing spaces, punctuation alone.
fn edge_pairs() -> Vec<(&'static str, &'static str)> {
    vec![
        ("", "Saya makan nasi."),
        ("Saya makan nasi.", ""),
        ("", ""),
        ("saya makan nasi goreng di warung dekat rumah kemarin sore bersama teman-teman", "saya makan nasi goreng."),
        ("“Kita harus pergi,” katanya… — «sekarang»!", "\"Kita harus pergi,\" katanya... - sekarang!"),
        ("AT&amp;T dan &quot;Google&quot; &lt;b&gt; &amp;quot;", "AT&T dan \"Google\" <b> &quot;"),
        ("kata <skipped> hilang <skipped>", "kata hilang"),
        ("infor-\nmasi baru\nbaris", "informasi baru baris"),
        (
            "Harga Rp1,000.5 naik 3-4 persen, 2.5% dari 1.000.000.",
            "Harga Rp1.000,5 naik 3 - 4 persen , 2.5 % dari 1,000,000 .",
        ),
        ("a... b,, .5 5. ,5 5, x-1 1-x 1--2 -3", "a . . . b , , .5 5 . ,5 5 , x-1 1 - x 1 - -2 -3"),
        ("satu\u{1c}dua\u{1d}tiga\u{1e}empat\u{1f}lima", "satu dua tiga empat lima"),
        ("pakai\ttab\t\tdan  spasi   ", "pakai tab dan spasi"),
        ("spasi di akhir \u{1e}\u{85}\u{a0}\u{3000} ", "spasi di akhir"),
        ("?!... ,;:", "?!..."),
        ("(kurung) [siku] {kurawal} a/b c@d #tag $5 100% x+y=z ~`^_|\\", "( kurung ) [ siku ] { kurawal } a / b"),
        ("Jum'at 'kutip' O'Brien", "Jum'at ' kutip ' O'Brien"),
        ("Angka Arab ٣.٤ dan ３．４", "Angka Arab ٣ . ٤ dan ３．４"),
        ("İSTANBUL ΣΟΦΟΣ Straße ǅemal", "istanbul σοφος strasse ǆemal"),
        ("zero\u{200b}width no\u{a0}break", "zero width no break"),
        ("kue-kue, anak-anak. Rp.5,- 10.000,00", "kue-kue , anak-anak . Rp.5,- 10.000,00"),
    ]
}

/// The corpora: NusaX (Sundanese and Javanese as hypotheses for the Indonesian, and both as two
/// references), the edge pairs together, one at a time where they are read alone, and all
/// hypotheses empty.
fn cases() -> Vec<Case> {
    let rows = nusax_mt();
    assert_eq!(rows.len(), 500);
    let col = |k: usize| rows.iter().map(|r| r[k].clone()).collect::<Vec<_>>();
    let (id, su, jv) = (col(0), col(1), col(2));
    let edges = edge_pairs();
    let strings = |v: Vec<&str>| v.into_iter().map(String::from).collect::<Vec<_>>();
    let edge_hyps = strings(edges.iter().map(|p| p.0).collect());
    let edge_refs = strings(edges.iter().map(|p| p.1).collect());
    let mut cases = vec![
        Case { name: "nusax su->id".into(), hyps: su.clone(), refs: vec![id.clone()] },
        Case { name: "nusax jv->id".into(), hyps: jv.clone(), refs: vec![id.clone()] },
        Case { name: "nusax id->id".into(), hyps: id.clone(), refs: vec![id.clone()] },
        Case { name: "nusax jv->id,su".into(), hyps: jv.clone(), refs: vec![id.clone(), su.clone()] },
        Case { name: "nusax id->jv,su (swapped)".into(), hyps: id.clone(), refs: vec![jv, su.clone()] },
        Case { name: "edges".into(), hyps: edge_hyps.clone(), refs: vec![edge_refs.clone()] },
        Case {
            name: "edges reversed".into(),
            hyps: edge_refs.clone(),
            refs: vec![edge_hyps.clone(), edge_refs.clone()],
        },
        Case { name: "all empty".into(), hyps: vec![String::new(); 3], refs: vec![strings(vec!["a b c", "", "d e"])] },
        Case { name: "empty against empty".into(), hyps: vec![String::new(); 2], refs: vec![vec![String::new(); 2]] },
        Case {
            name: "nusax su->id, edges".into(),
            hyps: [su, edge_hyps].concat(),
            refs: vec![[id, edge_refs].concat()],
        },
    ];
    for (i, (hyp, reference)) in edges.iter().enumerate() {
        cases.push(Case {
            name: format!("edge {i}"),
            hyps: vec![hyp.to_string()],
            refs: vec![vec![reference.to_string()]],
        });
    }
    cases
}

/// The BLEU option sets: name, sacrebleu's `BLEU(...)` keyword arguments, ours.
fn bleu_options() -> Vec<(&'static str, Value, BleuOptions)> {
    let d = BleuOptions::default();
    vec![
        ("default", json!({}), d),
        ("lowercase", json!({"lowercase": true}), BleuOptions { lowercase: true, ..d }),
        ("tokenize none", json!({"tokenize": "none"}), BleuOptions { tokenize: Tokenize::None, ..d }),
        ("smooth floor", json!({"smooth_method": "floor"}), BleuOptions { smoothing: Smoothing::Floor, ..d }),
        (
            "smooth floor 0.5",
            json!({"smooth_method": "floor", "smooth_value": 0.5}),
            BleuOptions { smoothing: Smoothing::Floor, smooth_value: Some(0.5), ..d },
        ),
        ("smooth none", json!({"smooth_method": "none"}), BleuOptions { smoothing: Smoothing::None, ..d }),
        ("smooth add-k", json!({"smooth_method": "add-k"}), BleuOptions { smoothing: Smoothing::AddK, ..d }),
        ("effective order", json!({"effective_order": true}), BleuOptions { effective_order: true, ..d }),
    ]
}

/// The chrF option sets: name, sacrebleu's `CHRF(...)` keyword arguments, ours.
fn chrf_options() -> Vec<(&'static str, Value, ChrfOptions)> {
    let d = ChrfOptions::default();
    vec![
        ("default", json!({}), d),
        ("chrF++", json!({"word_order": 2}), ChrfOptions::plus_plus()),
        ("lowercase", json!({"lowercase": true}), ChrfOptions { lowercase: true, ..d }),
        ("whitespace", json!({"whitespace": true}), ChrfOptions { whitespace: true, ..d }),
        ("eps smoothing", json!({"eps_smoothing": true}), ChrfOptions { eps_smoothing: true, ..d }),
        ("beta 1, word order 1", json!({"beta": 1, "word_order": 1}), ChrfOptions { beta: 1, word_order: 1, ..d }),
    ]
}

/// `value` (a JSON list of numbers) as u64s; sacrebleu's add-k counts, which hold its value,
/// less it again for orders 2 and up.
fn integers(value: &Value, less_from_order_2: f64) -> Vec<u64> {
    let numbers = value.as_array().unwrap().iter().map(|v| v.as_f64().unwrap());
    numbers.enumerate().map(|(n, x)| if n == 0 { x } else { x - less_from_order_2 }).map(|x| x as u64).collect()
}

/// The differences of `ours` from sacrebleu's `theirs` (score and brevity penalty), after
/// asserting that the counts, lengths, printout and signature are the same.
fn bleu_difference(context: &str, ours: &BleuScore, theirs: &Value) -> f64 {
    // sacrebleu adds k (1) only once some n-gram matches: without, it stops before.
    let added = ours.options.smoothing == Smoothing::AddK && ours.counts.iter().any(|&c| c > 0);
    let k = if added { 1.0 } else { 0.0 };
    assert_eq!(ours.counts, integers(&theirs["counts"], k), "{context}: counts");
    assert_eq!(ours.totals, integers(&theirs["totals"], k), "{context}: totals");
    assert_eq!(
        (ours.sys_len, ours.ref_len),
        (theirs["sys_len"].as_u64().unwrap(), theirs["ref_len"].as_u64().unwrap())
    );
    assert_eq!(ours.to_string(), theirs["str"].as_str().unwrap(), "{context}: str()");
    assert_eq!(ours.signature(), theirs["signature"].as_str().unwrap(), "{context}: signature");
    let precisions: Vec<f64> = theirs["precisions"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    let mut worst = (ours.score - theirs["score"].as_f64().unwrap()).abs();
    worst = worst.max((ours.bp - theirs["bp"].as_f64().unwrap()).abs());
    for (a, b) in ours.precisions.iter().zip(&precisions) {
        worst = worst.max((a - b).abs());
    }
    worst
}

#[test]
fn bleu_and_chrf_equal_sacrebleu() {
    let cases = cases();
    let (bleu_sets, chrf_sets) = (bleu_options(), chrf_options());
    let spec = json!({
        "bleu_options": bleu_sets.iter().map(|(n, k, _)| (n.to_string(), k.clone())).collect::<serde_json::Map<_, _>>(),
        "chrf_options": chrf_sets.iter().map(|(n, k, _)| (n.to_string(), k.clone())).collect::<serde_json::Map<_, _>>(),
        "cases": cases.iter().map(|c| json!({"name": c.name, "hyps": c.hyps, "refs": c.refs})).collect::<Vec<_>>(),
    });
    let dir = scratch("sacrebleu");
    let (spec_path, out_path) = (dir.join("cases.json"), dir.join("sacrebleu.json"));
    std::fs::write(&spec_path, serde_json::to_string(&spec).unwrap()).unwrap();
    reference(&["sacrebleu", spec_path.to_str().unwrap(), out_path.to_str().unwrap()]);
    let expected: Value = serde_json::from_str(&std::fs::read_to_string(&out_path).unwrap()).unwrap();

    let (mut worst_bleu, mut worst_chrf) = ((0.0f64, String::new()), (0.0f64, String::new()));
    for case in &cases {
        let theirs = &expected[&case.name];
        for (name, _, options) in &bleu_sets {
            let context = format!("{} / BLEU {name}", case.name);
            let ours = corpus_bleu(&case.hyps, &case.refs, options).unwrap();
            let difference = bleu_difference(&context, &ours, &theirs["bleu"][name]);
            if difference >= worst_bleu.0 {
                worst_bleu = (difference, context);
            }
        }
        for (name, _, options) in &chrf_sets {
            let context = format!("{} / chrF {name}", case.name);
            let ours = corpus_chrf(&case.hyps, &case.refs, options).unwrap();
            let theirs = &theirs["chrf"][name];
            assert_eq!(ours.to_string(), theirs["str"].as_str().unwrap(), "{context}: str()");
            assert_eq!(ours.signature(), theirs["signature"].as_str().unwrap(), "{context}: signature");
            let difference = (ours.score - theirs["score"].as_f64().unwrap()).abs();
            if difference >= worst_chrf.0 {
                worst_chrf = (difference, context);
            }
        }
    }
    println!(
        "{} corpora × {} BLEU and {} chrF option sets: max |indolm - sacrebleu| BLEU (score, BP, precisions) \
         {:.2e} ({}), chrF {:.2e} ({})",
        cases.len(),
        bleu_sets.len(),
        chrf_sets.len(),
        worst_bleu.0,
        worst_bleu.1,
        worst_chrf.0,
        worst_chrf.1
    );
    assert!(worst_bleu.0 < 1e-9 && worst_chrf.0 < 1e-9);

    // The headline figures of the NusaX corpora, as sacrebleu prints them.
    let su = &expected["nusax su->id"];
    println!("nusax su->id: {} | {}", su["bleu"]["default"]["str"], su["chrf"]["default"]["str"]);
}
