//! Tokenizer parity: indolm's tokenizer, built from `tokenizer.json` and from `vocab.txt`,
//! gives the ids of transformers' tokenizers (including the pure-Python BertTokenizerLegacy)
//! on every NusaX sentiment test sentence (12 languages) and every UD Indonesian sentence.
use crate::common::*;
use indolm_torch::data::tokenizer::TextTokenizer;

#[test]
fn ids_match_transformers_on_test_data() {
    let model = reference_model();
    test_data();
    let work = scratch("tok-parity");
    let out = work.join("ids.json");
    reference(&["tokenize", model.to_str().unwrap(), out.to_str().unwrap()]);
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let texts: Vec<&str> = json["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();

    let vocab_only = work.join("vocab-only");
    std::fs::create_dir_all(&vocab_only).unwrap();
    std::fs::copy(model.join("vocab.txt"), vocab_only.join("vocab.txt")).unwrap();
    let ours = [
        ("tokenizer.json", TextTokenizer::from_dir(model).unwrap()),
        ("vocab.txt", TextTokenizer::from_dir(&vocab_only).unwrap()),
    ];
    let mut compared = 0;
    for (ref_name, ref_ids) in json["ids"].as_object().unwrap() {
        let ref_ids = ref_ids.as_array().unwrap();
        assert_eq!(ref_ids.len(), texts.len());
        for (our_name, tok) in &ours {
            let mut mismatches = Vec::new();
            for (text, expected) in texts.iter().zip(ref_ids) {
                let expected: Vec<u32> =
                    expected.as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
                let got = tok.encode(text).unwrap();
                if got != expected {
                    mismatches.push(format!("{text:?}\n  indolm: {got:?}\n  ref:    {expected:?}"));
                }
                compared += 1;
            }
            println!("indolm[{our_name}] vs {ref_name}: {} sentences, {} mismatches", texts.len(), mismatches.len());
            assert!(mismatches.is_empty(), "first mismatch: {}", mismatches[0]);
        }
        // Pairs: ids and token types.
        let pair = &json["pair"][ref_name];
        for (our_name, tok) in &ours {
            let (ids, types) = tok.encode_pair(texts[0], texts[1]).unwrap();
            let as_u32 = |v: &serde_json::Value| -> Vec<u32> {
                v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
            };
            assert_eq!(ids, as_u32(&pair["input_ids"]), "pair ids, indolm[{our_name}] vs {ref_name}");
            assert_eq!(types, as_u32(&pair["token_type_ids"]), "pair types, indolm[{our_name}] vs {ref_name}");
        }
    }
    assert!(texts.len() == 6946, "expected the 4,800 NusaX test and 2,146 UD sentences, got {}", texts.len());
    println!("{compared} encodings compared");
}

/// The batch encoder frames rows exactly like the reference `encode` and pads to the longest.
#[test]
fn batch_encoding_matches_single_encoding_and_truncates() {
    let tok = TextTokenizer::from_dir(reference_model()).unwrap();
    let texts = [
        "Ibu kota Indonesia adalah Jakarta.",
        "Saya makan nasi goreng di warung dekat stasiun kereta setiap pagi.",
        "Ya.",
    ];
    let batch = tok.batch(&texts, None, 512).unwrap();
    for (i, text) in texts.iter().enumerate() {
        let ids: Vec<i64> = tok.encode(text).unwrap().into_iter().map(i64::from).collect();
        assert_eq!(batch.lengths[i], ids.len());
        let row: Vec<i64> = Vec::<i64>::try_from(batch.input_ids.get(i as i64).narrow(0, 0, ids.len() as i64)).unwrap();
        assert_eq!(row, ids);
        let mask_sum = batch.attention_mask.get(i as i64).sum(tch::Kind::Int64).int64_value(&[]);
        assert_eq!(mask_sum as usize, ids.len());
    }
    let short = tok.batch(&texts, None, 6).unwrap();
    assert_eq!(short.input_ids.size(), vec![3, 6]);
    assert_eq!(short.input_ids.int64_value(&[1, 5]), tok.special.sep);
    let pairs = tok.batch(&texts[..2], Some(&texts[1..3]), 10).unwrap();
    assert_eq!(pairs.input_ids.size()[1], 10);
}
