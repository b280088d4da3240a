//! Causal LMs against transformers: for each family a tiny random model built with
//! transformers' own class (`hf_reference.py make-decoder`: seeded, eager attention, GQA 4:2,
//! sliding windows shorter than the sentences, soft-capping for Gemma 2, tied and untied
//! embeddings, Llama 3.1 RoPE scaling, sharded weights for two) and a tokenizer trained with
//! `tokenizers` (byte-level BPE, Metaspace BPE, Unigram). indolm's token ids must equal
//! `AutoTokenizer`'s, its per-token log-probabilities transformers' (batch of one, no padding)
//! within 1e-4 relative while indolm scores all sentences in one right-padded batch, and its
//! sentence sums lm-evaluation-harness's rule computed in Python.
use crate::common::*;
use indolm::eval::causal::CausalScorer;
use indolm::model::decoder::load_causal_lm;
use serde_json::Value;
use std::path::{Path, PathBuf};
use tch::Device;

const TOLERANCE: f64 = 1e-4;

/// Builds `family`'s fixture (model, tokenizer, reference.json) in a fresh scratch directory.
fn fixture(family: &str) -> PathBuf {
    let dir = scratch(&format!("decoder-{family}"));
    reference(&["make-decoder", family, dir.to_str().unwrap()]);
    dir
}

fn relative(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs().max(1e-3)
}

/// Scores the reference sentences with indolm and compares; returns the max relative
/// difference of the per-token log-probabilities.
fn check(dir: &Path, family: &str) -> f64 {
    let reference: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("reference.json")).unwrap()).unwrap();
    let lm = load_causal_lm(dir, Device::Cpu).unwrap();
    assert!(lm.unused.is_empty(), "{family}: unused tensors {:?}", lm.unused);
    let scorer = CausalScorer::new(&lm).unwrap();
    let convention = scorer.convention();
    assert_eq!(convention.prefix_token_id, reference["prefix_token_id"].as_i64().unwrap(), "{family}");
    assert_eq!(convention.prefix_token, reference["prefix_token"].as_str().unwrap());
    assert_eq!((convention.prefix_is, convention.score), ("bos", "sum"));
    let sentences = reference["sentences"].as_array().unwrap();
    let texts: Vec<&str> = sentences.iter().map(|s| s["text"].as_str().unwrap()).collect();
    let scores = scorer.score_texts(&texts).unwrap();
    let (mut max_token, mut max_sum) = (0f64, 0f64);
    for (s, got) in sentences.iter().zip(&scores) {
        let ids: Vec<i64> = s["ids"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
        assert_eq!(got.ids, ids, "{family}: token ids differ from AutoTokenizer's for {:?}", s["text"]);
        let expected: Vec<f64> = s["logprobs"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        assert_eq!(got.log_probs.len(), expected.len());
        for (a, b) in got.log_probs.iter().zip(&expected) {
            max_token = max_token.max(relative(*a, *b));
        }
        max_sum = max_sum.max(relative(got.sum, s["sum"].as_f64().unwrap()));
    }
    let lengths: Vec<usize> = scores.iter().map(|s| s.tokens()).collect();
    println!(
        "{family}: {} sentences of {lengths:?} tokens after {:?} (id {}); max relative difference per token {max_token:.2e}, per sentence sum {max_sum:.2e}",
        scores.len(),
        convention.prefix_token,
        convention.prefix_token_id
    );
    assert!(max_token < TOLERANCE && max_sum < TOLERANCE, "{family}: {max_token:e} / {max_sum:e}");
    max_token
}

#[test]
fn llama_matches_transformers() {
    let dir = fixture("llama");
    check(&dir, "llama");
    // Batching does not change a score: each sentence alone gives the same numbers.
    let lm = load_causal_lm(&dir, Device::Cpu).unwrap();
    let mut scorer = CausalScorer::new(&lm).unwrap();
    let texts: Vec<String> =
        std::fs::read_to_string(dir.join("sentences.txt")).unwrap().lines().map(str::to_string).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let batched = scorer.score_texts(&refs).unwrap();
    scorer.token_budget = 1;
    let alone = scorer.score_texts(&refs).unwrap();
    for (a, b) in batched.iter().zip(&alone) {
        assert!((a.sum - b.sum).abs() < 1e-4 * b.sum.abs(), "{} vs {}", a.sum, b.sum);
        assert!((a.perplexity() - (-a.sum / a.tokens() as f64).exp()).abs() < 1e-9);
    }
}

#[test]
fn llama3_with_rope_scaling_and_shards_matches_transformers() {
    let dir = fixture("llama3");
    assert!(dir.join("model.safetensors.index.json").exists());
    check(&dir, "llama3");
}

#[test]
fn mistral_with_a_sliding_window_matches_transformers() {
    check(&fixture("mistral"), "mistral");
}

#[test]
fn qwen2_matches_transformers() {
    check(&fixture("qwen2"), "qwen2");
}

#[test]
fn qwen3_matches_transformers() {
    let dir = fixture("qwen3");
    assert!(dir.join("model.safetensors.index.json").exists());
    check(&dir, "qwen3");
}

#[test]
fn gemma2_matches_transformers() {
    check(&fixture("gemma2"), "gemma2");
}

#[test]
fn gemma3_matches_transformers() {
    check(&fixture("gemma3"), "gemma3");
}

#[test]
fn olmo2_matches_transformers() {
    check(&fixture("olmo2"), "olmo2");
}

#[test]
fn olmo3_matches_transformers() {
    check(&fixture("olmo3"), "olmo3");
}

#[test]
fn bloom_matches_transformers() {
    check(&fixture("bloom"), "bloom");
}

#[test]
fn unknown_model_types_are_refused() {
    let dir = scratch("decoder-unknown");
    std::fs::write(dir.join("config.json"), r#"{"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}"#).unwrap();
    let err = load_causal_lm(&dir, Device::Cpu).err().expect("refused").to_string();
    assert!(
        err.ends_with("config.json: field `model_type`: `gpt2` is not a supported causal LM (supported: llama, mistral, qwen2, qwen3, gemma2, gemma3_text, olmo2, olmo3, bloom)"),
        "{err}"
    );
}
