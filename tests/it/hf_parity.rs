//! Parity of indolm's BERT with HF transformers (the independent reference), both ways:
//! HF checkpoint -> indolm forward, and indolm export -> transformers forward.
use crate::common::{self, *};
use indolm_torch::model::model_dir::load_masked_lm;
use indolm_torch::model::{weights, IGNORE_INDEX};
use tch::{Device, Kind, Tensor};

const TOLERANCE: f64 = 1e-4;

fn max_abs_diff(a: &Tensor, b: &Tensor) -> f64 {
    assert_eq!(a.size(), b.size());
    (a - b).abs().max().double_value(&[])
}

#[test]
fn forward_matches_transformers_on_a_padded_batch() {
    let dir = reference_model();
    let reference = weights::read_file(&dir.join("reference.safetensors")).unwrap();
    let loaded = load_masked_lm(dir, Device::Cpu).unwrap();
    assert!(loaded.notes.is_empty(), "unexpected notes: {:?}", loaded.notes);
    let (ids, types, mask) = (&reference["input_ids"], &reference["token_type_ids"], &reference["attention_mask"]);
    let (hidden, logits) = tch::no_grad(|| {
        let hidden = loaded.model.bert.forward(ids, Some(types), Some(mask), false);
        let logits = loaded.model.logits(ids, Some(types), Some(mask));
        (hidden, logits)
    });
    let real = mask.unsqueeze(-1).to_kind(Kind::Bool);
    let d_hidden = max_abs_diff(&hidden.masked_select(&real), &reference["last_hidden_state"].masked_select(&real));
    let d_logits = max_abs_diff(&logits.masked_select(&real), &reference["logits"].masked_select(&real));
    println!("max |indolm - transformers| at real tokens: hidden {d_hidden:.2e}, logits {d_logits:.2e}");
    assert!(d_hidden < TOLERANCE && d_logits < TOLERANCE);
    // Padding rows too (they attend to the real tokens in both implementations).
    let d_all = max_abs_diff(&logits, &reference["logits"]);
    println!("max |indolm - transformers| over all positions incl. padding: logits {d_all:.2e}");
    assert!(d_all < TOLERANCE);
}

#[test]
fn mlm_loss_uses_only_masked_positions_and_equals_full_cross_entropy() {
    let dir = reference_model();
    let reference = weights::read_file(&dir.join("reference.safetensors")).unwrap();
    let loaded = load_masked_lm(dir, Device::Cpu).unwrap();
    let (ids, types, mask) = (&reference["input_ids"], &reference["token_type_ids"], &reference["attention_mask"]);
    // Predict a fixed set of positions; the loss from transformers' full logits is the reference.
    let picks: Vec<(i64, i64)> = vec![(0, 1), (0, 7), (0, 18), (1, 3), (1, 11), (2, 4)];
    let labels = Tensor::full(ids.size(), IGNORE_INDEX, (Kind::Int64, Device::Cpu));
    for &(b, s) in &picks {
        let _ = labels.get(b).get(s).fill_(ids.int64_value(&[b, s]));
    }
    let out = tch::no_grad(|| loaded.model.mlm_loss(ids, Some(types), Some(mask), &labels, false));
    assert_eq!(out.predicted, picks.len() as i64);
    let log_probs = reference["logits"].log_softmax(-1, Kind::Float);
    let expected: f64 =
        picks.iter().map(|&(b, s)| -log_probs.double_value(&[b, s, ids.int64_value(&[b, s])])).sum::<f64>()
            / picks.len() as f64;
    let got = out.loss.double_value(&[]);
    println!("masked-position loss {got:.6} vs full-logit reference {expected:.6}");
    assert!((got - expected).abs() < TOLERANCE);
}

#[test]
fn export_loads_in_transformers_with_the_same_logits() {
    let dir = reference_model();
    let work = scratch("export");
    let ours = work.join("indolm");
    let hf = work.join("hf");
    indolm_ok(&["import-hf", dir.to_str().unwrap(), ours.to_str().unwrap()]);
    indolm_ok(&["export-hf", ours.to_str().unwrap(), hf.to_str().unwrap()]);
    for f in ["config.json", "model.safetensors", "vocab.txt", "tokenizer.json", "tokenizer_config.json"] {
        assert!(hf.join(f).exists(), "export lacks {f}");
    }
    let report =
        reference(&["check-export", hf.to_str().unwrap(), dir.join("reference.safetensors").to_str().unwrap()]);
    println!("transformers on the export: {report}");
    assert!(report.contains("\"max_abs_diff\""));
    // The exported tokenizer, loaded by AutoTokenizer, gives the ids indolm gives.
    let tok = indolm_torch::data::tokenizer::TextTokenizer::from_dir(&hf).unwrap();
    let ids = tok.encode("Ibu kota Indonesia adalah Jakarta.").unwrap();
    let ids_json = ids.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
    assert!(report.contains(&format!("\"ids\": [{ids_json}]")), "{report} vs {ids:?}");
}

/// The other direction with weights transformers never saw: a model initialised by indolm,
/// exported, and loaded by `BertForMaskedLM.from_pretrained` gives indolm's own logits.
#[test]
fn indolm_initialised_model_gives_the_same_logits_in_transformers() {
    let dir = reference_model();
    let work = scratch("init-export");
    let (ours, hf) = (work.join("indolm"), work.join("hf"));
    let config = dir.join("config.json");
    indolm_ok(&[
        "init",
        "--config",
        config.to_str().unwrap(),
        "--tokenizer",
        dir.to_str().unwrap(),
        "--out",
        ours.to_str().unwrap(),
        "--seed",
        "7",
    ]);
    indolm_ok(&["export-hf", ours.to_str().unwrap(), hf.to_str().unwrap()]);
    let reference = weights::read_file(&dir.join("reference.safetensors")).unwrap();
    let loaded = load_masked_lm(&ours, Device::Cpu).unwrap();
    let (ids, types, mask) = (&reference["input_ids"], &reference["token_type_ids"], &reference["attention_mask"]);
    let logits = tch::no_grad(|| loaded.model.logits(ids, Some(types), Some(mask)));
    let ours_ref = work.join("indolm-logits.safetensors");
    let named: Vec<(String, Tensor)> = vec![
        ("input_ids".into(), ids.shallow_clone()),
        ("token_type_ids".into(), types.shallow_clone()),
        ("attention_mask".into(), mask.shallow_clone()),
        ("logits".into(), logits),
    ];
    weights::write_file(&ours_ref, &named).unwrap();
    let report = common::reference(&["check-export", hf.to_str().unwrap(), ours_ref.to_str().unwrap()]);
    println!("transformers vs indolm on an indolm-initialised model: {report}");
}

#[test]
fn import_export_round_trip_is_exact() {
    let dir = reference_model();
    let work = scratch("round-trip");
    let (ours, back) = (work.join("indolm"), work.join("back"));
    indolm_ok(&["import-hf", dir.to_str().unwrap(), ours.to_str().unwrap()]);
    indolm_ok(&["export-hf", ours.to_str().unwrap(), back.to_str().unwrap()]);
    let original = weights::read_file(&dir.join("model.safetensors")).unwrap();
    let round = weights::read_file(&back.join("model.safetensors")).unwrap();
    assert_eq!(original.keys().collect::<Vec<_>>(), round.keys().collect::<Vec<_>>());
    for (name, t) in &original {
        assert_eq!(t.kind(), round[name].kind(), "{name}");
        assert!(t.equal(&round[name]), "{name} changed in the round trip");
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("vocab.txt")).unwrap(),
        std::fs::read_to_string(back.join("vocab.txt")).unwrap()
    );
    let c0 = indolm_torch::model::BertConfig::from_file(&dir.join("config.json")).unwrap();
    let c1 = indolm_torch::model::BertConfig::from_file(&back.join("config.json")).unwrap();
    assert_eq!(c0, c1);
    println!("{} tensors identical after import -> export", original.len());
}

/// Older and partial HF layouts: LayerNorm gamma/beta, a bare BertModel state dict without
/// the `bert.` prefix, the tied decoder written out, and sharded safetensors.
#[test]
fn legacy_names_and_shards_load_to_the_same_model() {
    let dir = reference_model();
    let reference = weights::read_file(&dir.join("reference.safetensors")).unwrap();
    let expected = reference["logits"].shallow_clone();
    let original = weights::read_file(&dir.join("model.safetensors")).unwrap();

    let legacy = copy_dir(dir, "legacy");
    let mut renamed: Vec<(String, Tensor)> = original
        .iter()
        .map(|(n, t)| {
            let n = n.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta");
            let n = n.strip_prefix("bert.").map(str::to_string).unwrap_or(n);
            (n, t.shallow_clone())
        })
        .collect();
    renamed.push((
        "cls.predictions.decoder.weight".into(),
        original["bert.embeddings.word_embeddings.weight"].shallow_clone(),
    ));
    weights::write_file(&legacy.join("model.safetensors"), &renamed).unwrap();

    let sharded = copy_dir(dir, "sharded");
    std::fs::remove_file(sharded.join("model.safetensors")).unwrap();
    let all: Vec<(String, Tensor)> = original.iter().map(|(n, t)| (n.clone(), t.shallow_clone())).collect();
    let (a, b) = all.split_at(all.len() / 2);
    weights::write_file(&sharded.join("model-00001-of-00002.safetensors"), a).unwrap();
    weights::write_file(&sharded.join("model-00002-of-00002.safetensors"), b).unwrap();
    let map: serde_json::Map<String, serde_json::Value> = a
        .iter()
        .map(|(n, _)| (n.clone(), "model-00001-of-00002.safetensors".into()))
        .chain(b.iter().map(|(n, _)| (n.clone(), "model-00002-of-00002.safetensors".into())))
        .collect();
    std::fs::write(
        sharded.join("model.safetensors.index.json"),
        serde_json::json!({"metadata": {}, "weight_map": map}).to_string(),
    )
    .unwrap();

    for d in [&legacy, &sharded] {
        let loaded = load_masked_lm(d, Device::Cpu).unwrap();
        let logits = tch::no_grad(|| {
            loaded.model.logits(
                &reference["input_ids"],
                Some(&reference["token_type_ids"]),
                Some(&reference["attention_mask"]),
            )
        });
        let diff = max_abs_diff(&logits, &expected);
        println!("{}: max diff {diff:.2e}", d.display());
        assert!(diff < TOLERANCE);
    }
}
