//! Corpora: tokenizer training on real text (deterministic, the same vocabulary as HF's
//! trainer, loadable by transformers), every source format, prepared shards that decode back
//! to the source tokens, mixture proportions, the resumable cursor, and bad input.
use crate::common::*;
use indolm_torch::data::mixture::Mixture;
use indolm_torch::data::shards::{open_shard, prepare_source, Prepared};
use indolm_torch::data::sources::{Format, SourceSpec};
use indolm_torch::data::tokenizer::TextTokenizer;
use indolm_torch::data::tokenizer_train::{train_vocab, train_wordpiece, TrainOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

fn source(name: &str, paths: &[&Path], format: Option<Format>, field: &str) -> SourceSpec {
    SourceSpec {
        name: name.into(),
        lang: "id".into(),
        paths: paths.iter().map(|p| p.display().to_string()).collect(),
        format,
        text_field: field.into(),
        weight: 1.0,
    }
}

fn documents(spec: &SourceSpec) -> (Vec<Vec<String>>, indolm_torch::data::sources::ReadStats) {
    let mut docs = Vec::new();
    let stats = spec.read_documents(Path::new("."), |d| docs.push(d)).unwrap();
    (docs, stats)
}

/// NusaX Indonesian, Javanese and Sundanese sentiment text plus UD Indonesian.
fn shared_paragraphs() -> Vec<String> {
    let d = test_data();
    let spec = source(
        "shared",
        &[
            &d.join("nusax/sentiment/indonesian/train.csv"),
            &d.join("nusax/sentiment/javanese/train.csv"),
            &d.join("nusax/sentiment/sundanese/train.csv"),
            &d.join("ud-indonesian"),
        ],
        None,
        "text",
    );
    documents(&spec).0.into_iter().flatten().collect()
}

#[test]
fn tokenizer_training_is_deterministic_matches_hf_and_round_trips() {
    let texts = shared_paragraphs();
    let options = TrainOptions { vocab_size: 6000, min_frequency: 2, lowercase: true };
    let a = train_vocab(&texts, &options).unwrap();
    let b = train_vocab(&texts, &options).unwrap();
    assert_eq!(a, b, "two trainings on the same text differ");
    assert_eq!(&a[..5], &["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]);

    // The same vocabulary as HF tokenizers' BertWordPieceTokenizer trainer (as a set: its ids
    // follow hash order).
    let work = scratch("tok-train");
    std::fs::write(work.join("texts.txt"), texts.join("\n")).unwrap();
    reference(&[
        "train-vocab",
        work.join("texts.txt").to_str().unwrap(),
        "6000",
        work.join("hf-vocab.txt").to_str().unwrap(),
    ]);
    let hf: std::collections::BTreeSet<String> =
        std::fs::read_to_string(work.join("hf-vocab.txt")).unwrap().lines().map(String::from).collect();
    let ours: std::collections::BTreeSet<String> = a.iter().cloned().collect();
    let common = hf.intersection(&ours).count();
    println!("vocabulary {} pieces; HF's trainer {}; shared {common}", ours.len(), hf.len());
    assert!(common as f64 >= 0.995 * hf.len() as f64, "only {common} of {} pieces in common", hf.len());

    // Round trip: decoding the ids gives the normalized text back (lowercased, accents stripped,
    // punctuation split off), for every sentence without [UNK].
    let tok = train_wordpiece(&texts, &options).unwrap();
    let mut checked = 0;
    for text in texts.iter().take(3000) {
        let ids = tok.encode(text).unwrap();
        if ids.contains(&(tok.special.unk as u32)) {
            continue;
        }
        let decoded = tok.decode(&ids).unwrap();
        let again = tok.encode(&decoded).unwrap();
        assert_eq!(again, ids, "{text:?} -> {decoded:?}");
        checked += 1;
    }
    println!("{checked} sentences round-trip exactly");
    assert!(checked > 2500);

    // transformers loads the saved files and tokenizes exactly as indolm does.
    let dir = work.join("tok");
    std::fs::create_dir_all(&dir).unwrap();
    tok.save(&dir).unwrap();
    reference(&["tokenize", dir.to_str().unwrap(), work.join("ids.json").to_str().unwrap()]);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(work.join("ids.json")).unwrap()).unwrap();
    let texts: Vec<&str> = json["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    let reloaded = TextTokenizer::from_dir(&dir).unwrap();
    for (name, rows) in json["ids"].as_object().unwrap() {
        let mismatches = texts
            .iter()
            .zip(rows.as_array().unwrap())
            .filter(|(t, r)| {
                reloaded.encode(t).unwrap().iter().map(|&i| i as u64).collect::<Vec<_>>()
                    != r.as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect::<Vec<_>>()
            })
            .count();
        println!("{name}: {mismatches} mismatches on {} sentences", texts.len());
        assert_eq!(mismatches, 0);
    }
}

fn gzip(path: &Path, text: &str) {
    let mut enc = flate2::write::GzEncoder::new(std::fs::File::create(path).unwrap(), flate2::Compression::default());
    enc.write_all(text.as_bytes()).unwrap();
    enc.finish().unwrap();
}

fn xz(path: &Path, text: &str) {
    let mut enc = liblzma::write::XzEncoder::new(std::fs::File::create(path).unwrap(), 6);
    enc.write_all(text.as_bytes()).unwrap();
    enc.finish().unwrap();
}

const CC100: &str = "Paragraf pertama dokumen satu.\nParagraf kedua dokumen satu.\n\nDokumen dua hanya satu paragraf.\n\n\nDokumen tiga.\n";

fn expect_cc100(docs: &[Vec<String>]) {
    assert_eq!(docs.len(), 3, "{docs:?}");
    assert_eq!(docs[0], vec!["Paragraf pertama dokumen satu.", "Paragraf kedua dokumen satu."]);
    assert_eq!(docs[2], vec!["Dokumen tiga."]);
}

#[test]
fn every_source_format_reads_its_documents() {
    let dir = scratch("formats");
    let txt = dir.join("id.txt");
    std::fs::write(&txt, CC100).unwrap();
    expect_cc100(&documents(&source("t", &[&txt], None, "text")).0);
    gzip(&dir.join("id.txt.gz"), CC100);
    expect_cc100(&documents(&source("g", &[&dir.join("id.txt.gz")], None, "text")).0);
    xz(&dir.join("id.txt.xz"), CC100);
    expect_cc100(&documents(&source("x", &[&dir.join("id.txt.xz")], None, "text")).0);

    let jsonl = dir.join("docs.jsonl");
    std::fs::write(
        &jsonl,
        "{\"content\": \"Baris satu.\\nBaris dua.\", \"id\": 1}\n\n{\"content\": \"Dokumen kedua.\"}\n",
    )
    .unwrap();
    let (docs, _) = documents(&source("j", &[&jsonl], None, "content"));
    assert_eq!(
        docs,
        vec![vec!["Baris satu.".to_string(), "Baris dua.".to_string()], vec!["Dokumen kedua.".to_string()]]
    );

    let conllu = dir.join("ud.conllu");
    std::fs::write(&conllu, "# newdoc id = a\n# sent_id = 1\n# text = Kalimat pertama.\n1\tKalimat\n\n# text = Kalimat kedua.\n1\tx\n\n# newdoc id = b\n# text = Dokumen lain.\n").unwrap();
    let (docs, _) = documents(&source("c", &[&conllu], None, "text"));
    assert_eq!(
        docs,
        vec![vec!["Kalimat pertama.".to_string(), "Kalimat kedua.".to_string()], vec!["Dokumen lain.".to_string()]]
    );

    let csv = dir.join("nusax.csv");
    std::fs::write(
        &csv,
        "id,text,label\n1,\"Makanannya enak, harganya murah.\",positive\n2,Pelayanan lambat.,negative\n",
    )
    .unwrap();
    let (docs, _) = documents(&source("s", &[&csv], None, "text"));
    assert_eq!(docs, vec![vec!["Makanannya enak, harganya murah.".to_string()], vec!["Pelayanan lambat.".to_string()]]);

    let lip = dir.join("liputan6/train");
    std::fs::create_dir_all(&lip).unwrap();
    std::fs::write(lip.join("1.json"), r#"{"id": 1, "url": "u", "clean_article": [["liputan6.com", ",", "jakarta", ":", "hujan", "turun", "."], ["warga", "senang", "."]], "clean_summary": [["hujan", "turun", "."]], "extractive_summary": [0]}"#).unwrap();
    let (docs, _) = documents(&source("l", &[&lip], Some(Format::Liputan6), "text"));
    assert_eq!(docs, vec![vec!["liputan6.com , jakarta : hujan turun .".to_string(), "warga senang .".to_string()]]);

    let parquet = dir.join("wiki.parquet");
    let columns = serde_json::json!({"id": ["1", "2"], "title": ["Jakarta", "Bandung"], "text": ["Jakarta adalah ibu kota.\n\nKota ini besar.", "Bandung di Jawa Barat."]});
    std::fs::write(dir.join("cols.json"), columns.to_string()).unwrap();
    reference(&["write-parquet", parquet.to_str().unwrap(), dir.join("cols.json").to_str().unwrap()]);
    let (docs, _) = documents(&source("p", &[&parquet], None, "text"));
    assert_eq!(
        docs,
        vec![
            vec!["Jakarta adalah ibu kota.".to_string(), "Kota ini besar.".to_string()],
            vec!["Bandung di Jawa Barat.".to_string()]
        ]
    );
    let err = source("p", &[&parquet], None, "content").read_documents(Path::new("."), |_| {}).unwrap_err().to_string();
    assert!(err.contains("wiki.parquet") && err.contains("`content`") && err.contains("\"title\""), "{err}");
}

#[test]
fn bad_sources_are_named() {
    let dir = scratch("bad-sources");
    let err = source("s", &[&dir.join("missing.txt")], None, "text")
        .read_documents(Path::new("."), |_| {})
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing.txt") && err.contains("source `s`"), "{err}");
    let err =
        source("s", &[&dir.join("*.xz")], None, "text").read_documents(Path::new("."), |_| {}).unwrap_err().to_string();
    assert!(err.contains("*.xz") && err.contains("matches no file"), "{err}");

    let bad = dir.join("mixed.txt");
    std::fs::write(&bad, b"baris baik\n\xff\xfe rusak\nbaris baik lagi\n").unwrap();
    let (docs, stats) = documents(&source("u", &[&bad], None, "text"));
    assert_eq!(stats.invalid_utf8_lines, 1);
    assert_eq!(docs, vec![vec!["baris baik".to_string(), "baris baik lagi".to_string()]]);

    let long: String = (0..20000).map(|i| format!("Paragraf nomor {i} dari korpus.\n")).collect();
    for (name, write) in [("cut.txt.gz", gzip as fn(&Path, &str)), ("cut.txt.xz", xz)] {
        let path = dir.join(name);
        write(&path, &long);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        let err = source("z", &[&path], None, "text").read_documents(Path::new("."), |_| {}).unwrap_err().to_string();
        assert!(err.contains(name) && err.contains("truncated or corrupt"), "{err}");
    }

    let csv = dir.join("x.csv");
    std::fs::write(&csv, "id,kalimat\n1,a\n").unwrap();
    let err = source("c", &[&csv], None, "text").read_documents(Path::new("."), |_| {}).unwrap_err().to_string();
    assert!(err.contains("x.csv") && err.contains("`text`") && err.contains("kalimat"), "{err}");
}

fn tokenizer_for_tests() -> TextTokenizer {
    TextTokenizer::from_dir(reference_model()).unwrap()
}

#[test]
fn shards_decode_back_to_the_source_tokens_and_skip_when_up_to_date() {
    let tok = tokenizer_for_tests();
    let dir = scratch("shards");
    let spec = source("ud", &[&test_data().join("ud-indonesian/id_gsd-ud-dev.conllu")], None, "text");
    let Prepared::Written(meta) = prepare_source(&spec, Path::new("."), &dir, &tok, None, |_| {}).unwrap() else {
        panic!("expected a fresh shard")
    };
    assert!(matches!(prepare_source(&spec, Path::new("."), &dir, &tok, None, |_| {}).unwrap(), Prepared::UpToDate(_)));
    let shard = open_shard(&dir, "ud", &tok).unwrap();
    assert_eq!(shard.meta, meta);
    assert_eq!(meta.width, indolm_torch::data::shards::IdWidth::U16);
    let offsets = shard.document_offsets().unwrap();
    let (docs, _) = documents(&spec);
    assert_eq!(offsets.len(), docs.len() + 1);
    for (d, doc) in docs.iter().enumerate() {
        let mut expected: Vec<i64> = Vec::new();
        for p in doc {
            expected.extend(tok.encode_plain(p).unwrap().into_iter().map(i64::from));
        }
        expected.push(tok.special.sep);
        let got = shard.slice(offsets[d] as usize, (offsets[d + 1] - offsets[d]) as usize);
        assert_eq!(got, expected, "document {d}");
    }
    println!("{} documents, {} tokens decode back exactly", docs.len(), meta.tokens);

    // A different tokenizer: the shard is refused by name.
    let other = train_wordpiece(
        &["satu dua tiga empat lima".to_string()],
        &TrainOptions { vocab_size: 100, min_frequency: 1, lowercase: true },
    )
    .unwrap();
    let err = open_shard(&dir, "ud", &other).err().unwrap().to_string();
    assert!(err.contains("ud.json") && err.contains("different tokenizer"), "{err}");
}

fn mixture_of(dir: &Path, weights: [f64; 3], seed: u64) -> Mixture {
    let tok = tokenizer_for_tests();
    let d = test_data();
    let sources: Vec<(String, PathBuf)> = vec![
        ("ud".into(), d.join("ud-indonesian")),
        ("jv".into(), d.join("nusax/sentiment/javanese/train.csv")),
        ("su".into(), d.join("nusax/sentiment/sundanese/train.csv")),
    ];
    let shards = sources
        .iter()
        .zip(weights)
        .map(|((name, path), w)| {
            let spec = source(name, &[path], None, "text");
            prepare_source(&spec, Path::new("."), dir, &tok, None, |_| {}).unwrap();
            (open_shard(dir, name, &tok).unwrap(), w)
        })
        .collect();
    Mixture::new(shards, 64, seed, 0.02, tok.special.cls, tok.special.sep).unwrap()
}

#[test]
fn mixture_realises_its_weights_and_the_cursor_resumes_the_stream() {
    let dir = scratch("mixture");
    let mut mixture = mixture_of(&dir, [0.8, 0.1, 0.1], 3407);
    let mut cursor = mixture.new_cursor();
    let seqs = mixture.next_sequences(&mut cursor, 10_000);
    assert!(seqs.iter().all(|s| s.len() == 64));
    let shares: Vec<f64> = cursor.per_source.iter().map(|&n| n as f64 / 10_000.0).collect();
    println!("realised shares over 10,000 sequences: {shares:?}; epochs {:?}", mixture.epochs(&cursor));
    for (share, want) in shares.iter().zip([0.8, 0.1, 0.1]) {
        assert!((share - want).abs() <= 0.02, "share {share} vs {want}");
    }
    // Resume: a fresh mixture from the serialized cursor continues the exact stream.
    let json = serde_json::to_string(&cursor).unwrap();
    let next = mixture.next_sequences(&mut cursor, 300);
    let mut resumed = mixture_of(&dir, [0.8, 0.1, 0.1], 3407);
    let mut restored: indolm_torch::data::mixture::Cursor = serde_json::from_str(&json).unwrap();
    assert_eq!(resumed.next_sequences(&mut restored, 300), next);
    // Another seed gives another stream.
    let mut other = mixture_of(&dir, [0.8, 0.1, 0.1], 1);
    let mut c = other.new_cursor();
    assert_ne!(other.next_sequences(&mut c, 50), seqs[..50].to_vec());
    let err = Mixture::new(Vec::new(), 4, 1, 0.0, 2, 3).err().unwrap().to_string();
    assert!(err.contains("seq_len"), "{err}");
}
