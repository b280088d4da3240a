//! IndoNLG's SentencePiece tokenizer against its authors' code: SentencePiece BPE models trained
//! by the `sentencepiece` package on NusaX-MT (`make-spm`), one of 40,000 pieces in IndoBART-v2's
//! folder layout and one of 2,000 with byte fallback; on every NusaX-MT training and validation
//! text of every language and on hostile corner cases, indolm's SentencePiece reader gives
//! `sentencepiece`'s normalization, pieces, ids and decodes, and its `IndoNlgTokenizer` (through
//! `Seq2SeqTokenizer`, the translation task's reader) gives the authors' `IndoNLGTokenizer`'s
//! tokens, ids with and without special tokens and decodes with and without skipping them, every
//! one equal; the PyPI class of that name agrees on lowercased text. A translation model folder
//! without `tokenizer.json` loads, names its `.model` file and carries it.
use crate::common::*;
use indolm_torch::model::sentencepiece::{IndoNlgTokenizer, SentencePieceModel};
use indolm_torch::model::seq2seq::Seq2SeqTokenizer;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The SentencePiece folders, built once: (40,000 pieces as IndoBART-v2's, 2,000 with byte
/// fallback).
fn spm_folders() -> &'static (PathBuf, PathBuf) {
    static DIRS: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    DIRS.get_or_init(|| {
        let train = test_data().join("nusax/mt/train.csv");
        let (big, small) = (scratch("indonlg-spm-40000"), scratch("indonlg-spm-2000"));
        let made = reference(&["make-spm", big.to_str().unwrap(), train.to_str().unwrap(), "40000", "0"]);
        assert!(made.contains("\"pieces\": 40000"), "{made}");
        reference(&["make-spm", small.to_str().unwrap(), train.to_str().unwrap(), "2000", "1"]);
        (big, small)
    })
}

/// Every cell of NusaX-MT's training and validation splits (every language), read with the csv
/// crate.
fn nusax_texts() -> Vec<String> {
    let mut texts = Vec::new();
    for split in ["train", "valid"] {
        let mut reader = csv::Reader::from_path(test_data().join(format!("nusax/mt/{split}.csv"))).unwrap();
        let headers = reader.headers().unwrap().clone();
        for row in reader.records() {
            let row = row.unwrap();
            texts.extend(headers.iter().zip(row.iter()).filter(|(h, _)| !h.is_empty()).map(|(_, v)| v.to_string()));
        }
    }
    texts
}

/// Texts that try the corners: empty and blank, whitespace of every kind, the class's special
/// tokens inside text, characters the model lacks, emoji, combining marks, what NFKC rewrites
/// (full-width forms, ligatures, compatibility characters), controls, very long words and
/// 10,000-character lines.
fn hostile_texts() -> Vec<String> {
    let mut texts: Vec<String> = [
        "",
        " ",
        "    ",
        "\t",
        "\n",
        " \t\n\r ",
        "a\tb\nc\r\nd",
        "  leading and trailing  ",
        "banyak    spasi   di   dalam",
        "[java] aku [sunda] kuring [indonesia] saya <mask> </s> <s> <pad> <unk>",
        "<s><s></s></s>",
        "x</s>y<mask>z",
        "[java][java][sunda]",
        "[jav [java [sunda] <mask",
        "[JAVA] <MASK> [Sunda]",
        "<<s>> [[java]]",
        "Ωμέγα και 北京欢迎你",
        "ᮞᮥᮔ᮪ᮓ ꦗꦮ",
        "😀",
        "kue 😀😀 enak 👩‍💻 🇮🇩",
        "e\u{301} a\u{308}\u{301} o\u{308}\u{304} x\u{301}\u{302}\u{303}",
        "\u{301} sendirian",
        "Ｈｅｌｌｏ\u{3000}ｗｏｒｌｄ",
        "ﬁne ﬂow ﬀ",
        "①②③ ㍻ ㎏",
        "ﾊﾟﾝ ｶﾞ",
        "\u{1100}\u{1161}\u{11a8} 가",
        "ǅ ﷺ Å Å",
        "a\u{200b}b \u{200b} \u{feff}x a\u{a0}b",
        "a\u{0}b \u{7f} \u{1b}[0m",
        "a\u{2581}b \u{2581}\u{2581}",
        "\u{fffd} \u{fffd}\u{fffd}",
        "Halo Dunia, APA KABAR? Baik-baik saja...",
        "123 4567 89.000,50 Rp10.000",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    texts.push("a".repeat(5000));
    texts.push(format!("ber{}an", "kesinambungan".repeat(300)));
    texts.push("abcdefghijklmnopqrstuvwxyz".repeat(100));
    let sentence = "saya suka makan nasi goreng di warung dekat rumah, enak dan murah! ";
    texts.push(sentence.repeat(10_000 / sentence.len() + 1).chars().take(10_000).collect());
    // 10,000 characters drawn from a mix of the above, deterministically.
    let pool: Vec<char> = "aiueo kmnt \u{301}😀ﬁＨ①\u{200b}[]<>/\té\u{3000}ꦗ".chars().collect();
    let mut state = 0x9e37_79b9u32;
    let mixed: String = (0..10_000)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            pool[state as usize % pool.len()]
        })
        .collect();
    texts.push(mixed);
    texts
}

/// The reference's rows for `texts` on the folder `dir` (the first row, `vocab_size`, apart).
fn reference_rows(dir: &Path, texts: &[String], name: &str) -> (Value, Vec<Value>) {
    let work = scratch(name);
    let input = work.join("texts.json");
    std::fs::write(&input, serde_json::to_string(texts).unwrap()).unwrap();
    let out = work.join("tokenized.json");
    reference(&["indonlg-tokenize", dir.to_str().unwrap(), input.to_str().unwrap(), out.to_str().unwrap()]);
    let mut rows: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap();
    let head = rows.remove(0);
    assert_eq!(rows.len(), texts.len());
    (head["vocab_size"].clone(), rows)
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_string()).collect()
}

fn ids(v: &Value) -> Vec<i64> {
    v.as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect()
}

/// Compares `sentencepiece`'s own outputs in `row` for `text` with indolm's reader; the fields
/// that differ, named.
fn sentencepiece_mismatches(sp: &SentencePieceModel, text: &str, row: &Value) -> Vec<String> {
    let mut bad = Vec::new();
    let encoded = sp.encode(text).unwrap();
    let pieces: Vec<String> = encoded.iter().map(|p| p.piece.clone()).collect();
    let our_ids: Vec<i64> = encoded.iter().map(|p| i64::from(p.id)).collect();
    if sp.normalize(text).unwrap() != row["sp_normalized"].as_str().unwrap() {
        bad.push("normalize".to_string());
    }
    if pieces != strings(&row["sp_pieces"]) {
        bad.push(format!("pieces {pieces:?} vs {:?}", row["sp_pieces"]));
    }
    if our_ids != ids(&row["sp_ids"]) {
        bad.push(format!("ids {our_ids:?} vs {}", row["sp_ids"]));
    }
    let as_u32: Vec<u32> = our_ids.iter().map(|&i| i as u32).collect();
    if sp.decode_ids(&as_u32).unwrap() != row["sp_decode"].as_str().unwrap() {
        bad.push(format!("decode {:?} vs {}", sp.decode_ids(&as_u32).unwrap(), row["sp_decode"]));
    }
    bad
}

#[test]
fn indonlg_tokenizer_gives_the_authors_class_ids_and_decodes_on_every_nusax_text_and_corner_case() {
    let (big, _) = spm_folders();
    let nusax = nusax_texts();
    assert_eq!(nusax.len(), 7200, "500 training and 100 validation rows of 12 languages");
    let texts: Vec<String> = nusax.into_iter().chain(hostile_texts()).collect();
    let (vocab_size, rows) = reference_rows(big, &texts, "indonlg-tokenize-40000");
    // The translation task's reader: no tokenizer.json in the folder, the class named in its config.
    let tokenizer = Seq2SeqTokenizer::from_dir(big).unwrap();
    assert_eq!(tokenizer.source, big.join("sentencepiece.bpe.model"));
    assert_eq!(tokenizer.vocab_size() as i64, vocab_size.as_i64().unwrap());
    assert_eq!(tokenizer.vocab_size(), 40_004);
    let class = IndoNlgTokenizer::from_dir(big).unwrap();
    let sp = class.model();
    let (mut compared, mut pypi_compared, mut mismatches) = (0, 0, Vec::new());
    for (text, row) in texts.iter().zip(&rows) {
        let mut bad = sentencepiece_mismatches(sp, text, row);
        let tokens = class.tokenize(text).unwrap();
        if tokens != strings(&row["pieces"]) {
            bad.push(format!("tokens {tokens:?} vs {}", row["pieces"]));
        }
        let plain = tokenizer.encode(text).unwrap();
        if plain != ids(&row["ids"]) {
            bad.push(format!("ids {plain:?} vs {}", row["ids"]));
        }
        let special = tokenizer.encode_with_special_tokens(text).unwrap();
        let expected = ids(&row["ids_special"]);
        if special != expected {
            bad.push(format!("ids with special tokens {special:?} vs {expected:?}"));
        }
        // Decoded from the class's own ids, so a decode is compared even where an encoding differs.
        for (skip, field) in [(false, "decode"), (true, "decode_skip")] {
            let ours = tokenizer.decode(&expected, skip).unwrap();
            if ours != row[field].as_str().unwrap() {
                bad.push(format!("{field} {ours:?} vs {}", row[field]));
            }
        }
        // The PyPI class lowercases and does not split [java], [sunda], [indonesia]: compared on
        // the lowercased texts without them.
        let lower = row["lower"].as_str().unwrap();
        if !["[java]", "[sunda]", "[indonesia]"].iter().any(|t| lower.contains(t)) {
            pypi_compared += 1;
            let ours = tokenizer.encode(lower).unwrap();
            if ours != ids(&row["pypi_lower_ids"]) {
                bad.push(format!("PyPI class on lowercased text: {ours:?} vs {}", row["pypi_lower_ids"]));
            }
        }
        compared += 1;
        if !bad.is_empty() {
            mismatches.push(format!("{}: {}", indolm_core::files::quoted(text), bad.join("; ")));
        }
    }
    println!(
        "{compared} texts ({} NusaX-MT, {} corner cases) compared with IndoNLGTokenizer and sentencepiece, \
         {pypi_compared} lowercased with the PyPI class: {} differ",
        7200,
        compared - 7200,
        mismatches.len()
    );
    assert!(
        mismatches.is_empty(),
        "{} of {compared} differ:\n{}",
        mismatches.len(),
        mismatches[..mismatches.len().min(20)].join("\n")
    );
    // The class's hard-coded and borrowed special tokens.
    for (token, id) in [
        ("<s>", 0),
        ("<pad>", 1),
        ("</s>", 2),
        ("<unk>", 3),
        ("[java]", 40000),
        ("[sunda]", 40001),
        ("[indonesia]", 40002),
        ("<mask>", 40003),
    ] {
        assert_eq!(tokenizer.token_id(token), Some(id), "{token}");
    }
    assert_eq!(tokenizer.token_id("[ind]"), None);
    assert_eq!(tokenizer.token_id("\u{2581}saya"), Some(i64::from(sp.piece_to_id("\u{2581}saya"))));
    let e = tokenizer.decode(&[40004], false).unwrap_err().to_string();
    assert!(e.contains("decoding id 40004, which is neither one of the model's 40000 pieces"), "{e}");
    let e = tokenizer.truncating(64).unwrap_err().to_string();
    assert!(e.contains("IndoNLG's tokenizer does not truncate"), "{e}");
}

#[test]
fn a_byte_fallback_model_encodes_and_decodes_as_sentencepiece_does() {
    let (_, small) = spm_folders();
    let texts: Vec<String> = nusax_texts().into_iter().chain(hostile_texts()).collect();
    let (_, rows) = reference_rows(small, &texts, "indonlg-tokenize-2000");
    let sp = SentencePieceModel::open(&small.join("sentencepiece.bpe.model")).unwrap();
    assert_eq!(sp.len(), 2000);
    let mut mismatches = Vec::new();
    for (text, row) in texts.iter().zip(&rows) {
        let bad = sentencepiece_mismatches(&sp, text, row);
        if !bad.is_empty() {
            mismatches.push(format!("{}: {}", indolm_core::files::quoted(text), bad.join("; ")));
        }
    }
    println!("{} texts through a 2,000-piece byte-fallback model: {} differ", texts.len(), mismatches.len());
    assert!(
        mismatches.is_empty(),
        "{} differ:\n{}",
        mismatches.len(),
        mismatches[..mismatches.len().min(20)].join("\n")
    );
    // IndoNLG's class needs the 40,000 pieces its hard-coded ids follow.
    std::fs::write(small.join("tokenizer_config.json"), r#"{"tokenizer_class": "IndoNLGTokenizer"}"#).unwrap();
    let e = Seq2SeqTokenizer::from_dir(small).unwrap_err().to_string();
    assert!(e.contains("2000 pieces, expected 40000: IndoNLGTokenizer hard-codes"), "{e}");
}

#[test]
fn bad_sentencepiece_folders_are_refused_naming_the_file() {
    let (big, _) = spm_folders();
    let dir = scratch("indonlg-bad-folders");
    let model = std::fs::read(big.join("sentencepiece.bpe.model")).unwrap();
    let folder = |name: &str, bytes: &[u8], config: &str| {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("sentencepiece.bpe.model"), bytes).unwrap();
        std::fs::write(d.join("tokenizer_config.json"), config).unwrap();
        d
    };
    let class = r#"{"tokenizer_class": "IndoNLGTokenizer"}"#;
    let error = |d: &Path| Seq2SeqTokenizer::from_dir(d).unwrap_err().to_string();
    // Cut anywhere, the file is refused with its name, never a panic.
    for cut in [1, 7, 100, model.len() / 2, model.len() - 3] {
        let d = folder(&format!("cut-{cut}"), &model[..cut], class);
        let e = error(&d);
        assert!(e.starts_with(&format!("tokenizer {}: ", d.join("sentencepiece.bpe.model").display())), "{e}");
    }
    let e = error(&folder("garbage", b"\xff\xff\xff\xff not a model", class));
    assert!(e.contains("not a SentencePiece model"), "{e}");
    let e = error(&folder("empty", b"", class));
    assert!(e.contains("trainer_spec.model_type is Unigram (1), expected BPE (2)"), "{e}");
    // Another class with no tokenizer.json: the missing file named, with what was found.
    let e = error(&folder("mbart", &model, r#"{"tokenizer_class": "MBart50Tokenizer"}"#));
    assert!(e.contains("tokenizer.json: file not found") && e.contains("names MBart50Tokenizer"), "{e}");
    let e = error(&folder("tokens", &model, r#"{"tokenizer_class": "IndoNLGTokenizer", "bos_token": "<bos>"}"#));
    assert!(e.contains("field `bos_token`"), "{e}");
    // A tokenizer.json beside them wins, as before.
    let d = folder("fast", &model, class);
    std::fs::write(d.join("tokenizer.json"), "{").unwrap();
    assert!(error(&d).contains("tokenizer.json"), "{}", error(&d));
}

#[test]
fn a_translation_model_without_tokenizer_json_loads_and_carries_its_sentencepiece_model() {
    use indolm_tasks::translation::model::TranslationModel;
    let (big, _) = spm_folders();
    let dir = scratch("indobart-v2-layout");
    let train = test_data().join("nusax/mt/train.csv");
    reference(&["make-mt-model", dir.to_str().unwrap(), train.to_str().unwrap(), big.to_str().unwrap()]);
    assert!(!dir.join("tokenizer.json").exists());
    let model = TranslationModel::load(&dir, tch::Device::Cpu).unwrap();
    assert_eq!(model.tokenizer.source, dir.join("sentencepiece.bpe.model"));
    let recipe = Path::new("recipe.toml");
    assert_eq!(
        indolm_tasks::translation::model::language_id(
            &model.tokenizer,
            "[indonesia]",
            "model.language_tokens.ind",
            recipe
        )
        .unwrap(),
        40002
    );
    let e =
        indolm_tasks::translation::model::language_id(&model.tokenizer, "[ind]", "model.language_tokens.ind", recipe)
            .unwrap_err()
            .to_string();
    assert!(e.contains("`[ind]` is not a token of") && e.contains("sentencepiece.bpe.model"), "{e}");
    let saved = scratch("indobart-v2-layout-saved");
    model.save(&saved).unwrap();
    for name in ["sentencepiece.bpe.model", "tokenizer_config.json"] {
        assert_eq!(std::fs::read(saved.join(name)).unwrap(), std::fs::read(dir.join(name)).unwrap(), "{name}");
    }
    let again = TranslationModel::load(&saved, tch::Device::Cpu).unwrap();
    assert_eq!(again.tokenizer.encode("saya makan nasi").unwrap(), model.tokenizer.encode("saya makan nasi").unwrap());
}
