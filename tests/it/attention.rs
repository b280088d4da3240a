//! Fused attention for causal LMs against eager attention, on the tiny random models of every
//! family the generation tests build (`hf_reference.py make-decoders`: grouped key/value heads,
//! sliding windows, Gemma's query scaling, Gemma 2's soft-capping, ALiBi for BLOOM and falcon-rw,
//! XGLM's pre-scaled queries, Falcon's multi-query and grouped layouts, GPT-2's fused projections
//! and learned positions). libtorch's
//! `scaled_dot_product_attention` with a mask (the default, `Attention::Fused`) scores every
//! sentence of a right-padded batch as the eager product does within 1e-5 (fp32, CPU), and greedy
//! generation (a left-padded batch and one prompt at a time, through the key/value cache) writes
//! the same tokens both ways. The operator hook confirms which path ran: the fused kernel under
//! `Fused` (not for Gemma 2, whose soft-capping keeps eager attention), never under `Eager`.
//! In bf16 on the CPU (CUDA's dtype) the ALiBi families' additive masks take the queries' dtype.
//! `INDOLM_ATTENTION=eager` chooses eager attention from the command line, and another value is
//! refused in one line. The transformers parity tests (`decoders`, `generation`) run the default,
//! fused, at their own tolerances.
use crate::common::*;
use indolm_eval::causal::CausalScorer;
use indolm_eval::generate::prompts::{read_prompts, tokenize};
use indolm_eval::generate::{generate, GenerationDefaults, Settings};
use indolm_torch::device::op_counts::OpCounter;
use indolm_torch::model::decoder::{load_causal_lm, Attention, CausalLm};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use tch::Device;

/// The largest relative difference allowed between fused and eager scores.
const TOLERANCE: f64 = 1e-5;

/// Three prompts of different lengths (a left-padded batch), as a prompt file.
const PROMPTS: &str = r#"{"id": "a", "prompt": "Ibu kota Indonesia adalah"}
{"id": "b", "prompt": "Para petani di desa itu menanam padi dan jagung setiap musim"}
{"id": "c", "prompt": "Dia"}
"#;

fn relative(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs().max(1e-3)
}

/// The fixture's sentences (`sentences.txt`).
fn sentences(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("sentences.txt")).unwrap().lines().map(str::to_string).collect()
}

/// Scores `texts` with `lm` as it is set; with the number of fused attention calls made.
fn score(lm: &CausalLm, texts: &[&str]) -> (Vec<indolm_eval::causal::CausalScore>, u64) {
    let counter = OpCounter::start().unwrap();
    let scores = CausalScorer::new(lm).unwrap().score_texts(texts).unwrap();
    let counts = counter.stop().unwrap();
    (scores, counts.count("aten::scaled_dot_product_attention"))
}

#[test]
fn fused_attention_scores_every_family_as_eager_attention() {
    let mut worst_overall = 0f64;
    for (family, dir) in crate::generation::fixtures() {
        let mut lm = load_causal_lm(dir, Device::Cpu).unwrap();
        assert_eq!(lm.attention, Attention::Fused, "{family}: fused is the default");
        let texts = sentences(dir);
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let (fused, fused_calls) = score(&lm, &refs);
        lm.attention = Attention::Eager;
        let (eager, eager_calls) = score(&lm, &refs);
        // The path each setting took: Gemma 2 soft-caps its scores, which only eager attention does.
        assert_eq!(eager_calls, 0, "{family}: eager attention called the fused kernel");
        if *family == "gemma2" {
            assert_eq!(fused_calls, 0, "gemma2: soft-capped scores need eager attention");
        } else {
            assert!(fused_calls >= lm.config.layers.len() as u64, "{family}: {fused_calls} fused calls");
        }
        let mut worst = 0f64;
        for (f, e) in fused.iter().zip(&eager) {
            assert_eq!(f.ids, e.ids);
            assert_eq!(f.log_probs.len(), e.log_probs.len());
            for (a, b) in f.log_probs.iter().zip(&e.log_probs) {
                worst = worst.max(relative(*a, *b));
            }
            worst = worst.max(relative(f.sum, e.sum));
        }
        println!(
            "{family}: {} sentences in one padded batch, fused ({fused_calls} kernel calls) against eager: max \
             relative difference {worst:.1e}",
            fused.len()
        );
        assert!(worst < TOLERANCE, "{family}: fused scores differ from eager ones by {worst:e}");
        worst_overall = worst_overall.max(worst);
    }
    println!("every family: fused within {worst_overall:.1e} of eager");
    // bf16 (what CUDA runs), here on the CPU: the ALiBi families' additive masks in the queries'
    // dtype (libtorch refuses another), the sums as eager's to bf16's precision.
    for family in ["bloom", "falconalibi"] {
        let dir = &crate::generation::fixtures()[family];
        let mut lm = indolm_torch::model::decoder::load_causal_lm_as(dir, Device::Cpu, tch::Kind::BFloat16).unwrap();
        let texts = sentences(dir);
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let (fused, calls) = score(&lm, &refs);
        lm.attention = Attention::Eager;
        let (eager, _) = score(&lm, &refs);
        let worst = fused.iter().zip(&eager).map(|(f, e)| relative(f.mean(), e.mean())).fold(0f64, f64::max);
        println!("{family} in bf16: fused ({calls} kernel calls) within {worst:.1e} of eager per-token means");
        assert!(calls > 0 && worst < 0.02, "{family}: {worst}");
    }
}

#[test]
fn greedy_generation_writes_the_same_tokens_with_fused_and_eager_attention() {
    let prompts = scratch("attention-prompts").join("prompts.jsonl");
    std::fs::write(&prompts, PROMPTS).unwrap();
    let new_tokens = 12;
    for (family, dir) in crate::generation::fixtures() {
        let mut lm = load_causal_lm(dir, Device::Cpu).unwrap();
        let ids = tokenize(&lm, &prompts, &read_prompts(&prompts).unwrap(), new_tokens).unwrap();
        let defaults = GenerationDefaults::read(&[dir.as_path()], &dir.join("config.json")).unwrap();
        let greedy = Settings {
            max_new_tokens: new_tokens,
            sampling: None,
            eos: defaults.eos,
            stop_strings: Vec::new(),
            pad: defaults.pad.unwrap_or(0),
            token_budget: 1 << 16,
            batch_size: usize::MAX,
        };
        for (mode, batch_size) in [("one left-padded batch", usize::MAX), ("one prompt at a time", 1)] {
            let settings = Settings { batch_size, ..greedy.clone() };
            let mut written = Vec::new();
            for attention in [Attention::Fused, Attention::Eager] {
                lm.attention = attention;
                let got = generate(&lm, &ids, &settings, &mut |_| {}).unwrap();
                written.push(got.into_iter().map(|c| c.ids).collect::<Vec<_>>());
            }
            assert_eq!(written[0], written[1], "{family} ({mode}): fused and eager attention wrote different tokens");
            let lengths: Vec<usize> = written[0].iter().map(Vec::len).collect();
            println!("{family} ({mode}): {lengths:?} new tokens, the same with fused and eager attention");
        }
    }
}

/// `indolm eval pll --json` on `dir` with `INDOLM_ATTENTION` set to `attention` (unset: `None`).
fn eval_pll(dir: &Path, attention: Option<&str>) -> std::process::Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_indolm"));
    let text = dir.join("sentences.txt");
    command.args(["--threads", "1", "eval", "pll", "--model", dir.to_str().unwrap(), "--text", text.to_str().unwrap()]);
    command.arg("--json").env_remove("INDOLM_ATTENTION").env_remove("RUST_BACKTRACE");
    if let Some(value) = attention {
        command.env("INDOLM_ATTENTION", value);
    }
    command.output().unwrap()
}

#[test]
fn indolm_attention_chooses_eager_attention_and_refuses_other_values() {
    // falcon-rw's layout: ALiBi, folded into an additive mask when fused.
    let dir = &crate::generation::fixtures()["falconalibi"];
    let lines = |out: &std::process::Output| -> Vec<f64> {
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap()["log_likelihood"].as_f64().unwrap())
            .collect()
    };
    let fused = lines(&eval_pll(dir, None));
    let eager = lines(&eval_pll(dir, Some("eager")));
    assert_eq!(fused.len(), sentences(dir).len());
    assert_eq!(fused.len(), eager.len());
    let worst = fused.iter().zip(&eager).map(|(a, b)| relative(*a, *b)).fold(0f64, f64::max);
    println!("eval pll on falcon-rw's layout: INDOLM_ATTENTION=eager within {worst:.1e} of the default");
    assert!(worst < TOLERANCE, "{worst:e}");
    let out = eval_pll(dir, Some("flash"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        "error: INDOLM_ATTENTION: expected `fused` (the default) or `eager`, found \"flash\"",
        "one line naming the variable"
    );
}
