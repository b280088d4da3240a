//! Causal LMs against transformers: for each family a tiny random model built with
//! transformers' own class (`hf_reference.py make-decoder`: seeded, eager attention, GQA 4:2,
//! sliding windows shorter than the sentences, soft-capping for Gemma 2, tied and untied
//! embeddings, Llama 3.1 RoPE scaling, sharded weights for two, Gemma 3 also as gemma-3-4b's
//! multimodal folder with a sparse config, XGLM's sinusoidal positions, Falcon in falcon-7b's,
//! falcon-40b's and falcon-rw's layouts, the last with ALiBi against transformers' SDPA path,
//! GPT-2 (IndoGPT's layout) also as the hub's bare checkpoints with their causal-mask buffers)
//! and a tokenizer trained with `tokenizers` (byte-level BPE, Metaspace BPE, Unigram). indolm's
//! token ids must equal `AutoTokenizer`'s, its per-token log-probabilities transformers' (batch
//! of one, no padding) within 1e-4 relative while indolm scores all sentences in one right-padded
//! batch, and its sentence sums lm-evaluation-harness's rule computed in Python.
use crate::common::*;
use indolm_eval::causal::CausalScorer;
use indolm_torch::model::decoder::config::{
    FalconNorms, FalconOptions, FalconQkv, FamilyOptions, Gpt2Options, XglmOptions,
};
use indolm_torch::model::decoder::load_causal_lm;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
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
pub(crate) fn check(dir: &Path, family: &str) -> f64 {
    let reference: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("reference.json")).unwrap()).unwrap();
    let lm = load_causal_lm(dir, Device::Cpu).unwrap();
    assert!(lm.unused.is_empty(), "{family}: unused tensors {:?}", lm.unused);
    let scorer = CausalScorer::new(&lm).unwrap();
    let convention = scorer.convention();
    assert_eq!(convention.prefix_token_id, reference["prefix_token_id"].as_i64().unwrap(), "{family}");
    assert_eq!(convention.prefix_token, reference["prefix_token"].as_str().unwrap());
    assert_eq!(convention.prefix_is, reference["prefix_is"].as_str().unwrap());
    assert_eq!(convention.score, "sum");
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
        "{family}: {} sentences of {lengths:?} tokens after {:?} (id {}, its {}); max relative difference per token {max_token:.2e}, per sentence sum {max_sum:.2e}",
        scores.len(),
        convention.prefix_token,
        convention.prefix_token_id,
        convention.prefix_is
    );
    assert!(max_token < TOLERANCE && max_sum < TOLERANCE, "{family}: {max_token:e} / {max_sum:e}");
    max_token
}

/// The Llama fixture, built once and shared by the tests that only read it.
pub(crate) fn llama() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| fixture("llama"))
}

#[test]
fn llama_matches_transformers() {
    let dir = llama();
    check(dir, "llama");
    // Batching does not change a score: each sentence alone gives the same numbers.
    let lm = load_causal_lm(dir, Device::Cpu).unwrap();
    let mut scorer = CausalScorer::new(&lm).unwrap();
    let texts: Vec<String> =
        std::fs::read_to_string(dir.join("sentences.txt")).unwrap().lines().map(str::to_string).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let batched = scorer.score_texts(&refs).unwrap();
    scorer.token_budget = 1;
    // And the logits of five positions at a time.
    scorer.logit_elements = 5 * lm.config.vocab_size;
    let alone = scorer.score_texts(&refs).unwrap();
    for (a, b) in batched.iter().zip(&alone) {
        assert!((a.sum - b.sum).abs() < 1e-4 * b.sum.abs(), "{} vs {}", a.sum, b.sum);
        assert!((a.perplexity() - (-a.sum / a.tokens() as f64).exp()).abs() < 1e-9);
    }
    // The bf16 path (what CUDA runs), here on the CPU: the same sums to bf16's precision.
    let bf16 = indolm_torch::model::decoder::load_causal_lm_as(dir, Device::Cpu, tch::Kind::BFloat16).unwrap();
    let low = CausalScorer::new(&bf16).unwrap().score_texts(&refs).unwrap();
    let worst = low.iter().zip(&batched).map(|(l, f)| relative(l.mean(), f.mean())).fold(0f64, f64::max);
    println!("llama in bf16: max relative difference of the per-token mean from fp32 {worst:.2e}");
    assert!(worst < 0.02, "{worst}");
}

/// A bf16 checkpoint scored on the CPU: its weights stay bf16 views of the file (no fp32 copy
/// of the model), cast as each layer uses them, and the scores equal transformers' fp32 scores
/// of the same bf16-rounded weights.
#[test]
fn a_bf16_checkpoint_is_kept_in_bf16_and_scored_in_fp32_as_transformers() {
    let dir = scratch("decoder-llama-bf16");
    reference(&["decoder-to-bf16", llama().to_str().unwrap(), dir.to_str().unwrap()]);
    let lm = load_causal_lm(&dir, Device::Cpu).unwrap();
    let kinds: std::collections::BTreeSet<String> =
        lm.vs.variables().values().map(|t| format!("{:?}", t.kind())).collect();
    assert_eq!(kinds.into_iter().collect::<Vec<_>>(), vec!["BFloat16"], "every weight kept as the file has it");
    check(&dir, "llama saved in bf16");
}

#[test]
fn llama3_with_rope_scaling_and_shards_matches_transformers() {
    let dir = fixture("llama3");
    assert!(dir.join("model.safetensors.index.json").exists());
    check(&dir, "llama3");
}

/// YaRN RoPE scaling (OLMo 3 7B's long-context layout: on the full-attention layers, the
/// sliding ones unscaled), the frequencies' ramp and the attention factor on cos and sin.
#[test]
fn olmo3_with_yarn_rope_scaling_matches_transformers() {
    let dir = fixture("olmo3yarn");
    let config = std::fs::read_to_string(dir.join("config.json")).unwrap();
    assert!(config.contains("\"yarn\""), "{config}");
    check(&dir, "olmo3 with yarn");
}

#[test]
fn mistral_with_a_sliding_window_matches_transformers() {
    check(&fixture("mistral"), "mistral");
}

#[test]
fn qwen2_without_a_bos_token_scores_after_eos_and_matches_transformers() {
    let dir = fixture("qwen2");
    check(&dir, "qwen2");
    let lm = load_causal_lm(&dir, Device::Cpu).unwrap();
    assert!(
        lm.tokenizer.bos.is_none(),
        "tokenizer_config.json's \"bos_token\": null wins over config.json's bos_token_id"
    );
    assert_eq!(CausalScorer::new(&lm).unwrap().convention().prefix_is, "eos");
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

/// Token ids equal `AutoTokenizer`'s on every sentence of the test data (NusaX in 12 languages,
/// UD Indonesian) for the three kinds of `tokenizer.json`, without special tokens (sentence
/// scoring) and with what the post-processor adds (IndoMMLU's prompts), Llama's `<s>` template
/// included.
#[test]
fn tokenizers_equal_autotokenizer_on_every_test_sentence() {
    let with_bos = scratch("decoder-tokenizer-bos");
    for f in ["tokenizer.json", "tokenizer_config.json"] {
        std::fs::copy(llama().join(f), with_bos.join(f)).unwrap();
    }
    reference(&["bos-template", with_bos.to_str().unwrap()]);
    let cases = [
        ("SentencePiece BPE (Llama)", llama().to_path_buf()),
        ("SentencePiece BPE with Llama's <s> template", with_bos),
        ("Unigram (Gemma 2)", fixture("gemma2")),
        ("byte-level BPE (Qwen2)", fixture("qwen2")),
    ];
    for (kind, dir) in cases {
        let out = dir.join("auto-ids.json");
        reference(&["tokenize-auto", dir.to_str().unwrap(), out.to_str().unwrap()]);
        let expected: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        let tok = indolm_torch::model::decoder::CausalTokenizer::from_dir(&dir, None, None).unwrap();
        let texts = expected["texts"].as_array().unwrap();
        let (mut differ, mut with_specials) = (0, 0);
        for (text, want) in texts.iter().zip(expected["ids"].as_array().unwrap()) {
            let want: Vec<i64> = want.as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect();
            let text = text.as_str().unwrap();
            let ours = tok.encode_with_special_tokens(text).unwrap();
            differ += usize::from(ours != want);
            with_specials += usize::from(ours.len() != tok.encode(text).unwrap().len());
        }
        println!(
            "{kind}: {} sentences, {differ} differ from AutoTokenizer; {with_specials} with special tokens added",
            texts.len()
        );
        assert_eq!(differ, 0, "{kind}");
        assert_eq!(with_specials > 0, kind.contains("template"), "{kind}");
    }
}

/// gemma-3-4b's layout: a Gemma3ForConditionalGeneration folder (a vision tower beside the text
/// model, tensors under `language_model.`), its config.json as sparse as the hub's.
#[test]
fn gemma3_multimodal_checkpoint_scores_its_text_model_as_transformers() {
    let dir = fixture("gemma3mm");
    check(&dir, "gemma3mm");
    let lm = load_causal_lm(&dir, Device::Cpu).unwrap();
    assert!(lm.config.multimodal && lm.not_text > 0, "{}", lm.not_text);
    println!("gemma3mm: {} vision tensors not read", lm.not_text);
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

/// XGLM in xglm-564M's layout: token embeddings times √d_model, sinusoidal positions read at
/// offset 2 with the table's row `pad_token_id` zeroed (4 in this fixture, so the third position
/// has none, as in transformers), pre-LayerNorm blocks, tied head.
#[test]
fn xglm_matches_transformers() {
    let dir = fixture("xglm");
    check(&dir, "xglm");
    let lm = load_causal_lm(&dir, Device::Cpu).unwrap();
    let options = XglmOptions { embed_scale: 8.0, padding_idx: Some(4) };
    assert_eq!(lm.config.options, FamilyOptions::Xglm(options));
}

/// Falcon in falcon-7b's layout: rotary embeddings (RoPE base 500), one key/value head shared by
/// the queries in the fused projection, attention and MLP in parallel from one norm, no biases.
#[test]
fn falcon_7b_layout_matches_transformers() {
    let dir = fixture("falcon");
    check(&dir, "falcon");
    let c = load_causal_lm(&dir, Device::Cpu).unwrap().config;
    assert_eq!(c.num_kv_heads, 1);
    let options = FalconOptions { alibi: false, qkv: FalconQkv::MultiQuery, norms: FalconNorms::Shared };
    assert_eq!(c.options, FamilyOptions::Falcon(options));
}

/// Falcon in falcon-40b's layout: the new decoder architecture, 2 key/value groups of 2 heads in
/// the fused projection, `ln_attn` and `ln_mlp`, an MLP narrower than 4 × hidden, untied head.
#[test]
fn falcon_40b_layout_matches_transformers() {
    let dir = fixture("falcon40b");
    check(&dir, "falcon40b");
    let c = load_causal_lm(&dir, Device::Cpu).unwrap().config;
    assert_eq!((c.num_heads, c.num_kv_heads, c.intermediate_size, c.tie_word_embeddings), (4, 2, 112, false));
    let options = FalconOptions { alibi: false, qkv: FalconQkv::Grouped, norms: FalconNorms::Two };
    assert_eq!(c.options, FamilyOptions::Falcon(options));
}

/// Falcon in falcon-rw's layout: ALiBi (bf16-rounded, divided by √head_dim, added once, as
/// transformers' SDPA path computes it), biases, attention then MLP, a key and value per head.
#[test]
fn falcon_rw_alibi_layout_matches_transformers() {
    let dir = fixture("falconalibi");
    check(&dir, "falconalibi");
    let c = load_causal_lm(&dir, Device::Cpu).unwrap().config;
    let options = FalconOptions { alibi: true, qkv: FalconQkv::PerHead, norms: FalconNorms::Sequential };
    assert_eq!(c.options, FamilyOptions::Falcon(options));
}

/// GPT-2 in IndoGPT's layout (`GPT2LMHeadModel`): learned positions, `Conv1D` projections
/// ([in, out] weights), `gelu_new`, an MLP narrower than 4 × n_embd, the head tied to `wte`. The
/// hub's GPT-2 files are saved from the bare `GPT2Model` (no `transformer.` prefix) with each
/// layer's causal-mask buffers (`attn.bias`, `attn.masked_bias`): such a copy scores the same, the
/// buffers not reported as unused. A sentence or a cached step past `n_positions` is refused.
#[test]
fn gpt2_matches_transformers() {
    use tch::{Kind, Tensor};
    let dir = fixture("gpt2");
    check(&dir, "gpt2");
    let lm = load_causal_lm(&dir, Device::Cpu).unwrap();
    let c = &lm.config;
    assert_eq!((c.intermediate_size, c.max_positions, c.tie_word_embeddings), (112, Some(128), true));
    assert_eq!(c.options, FamilyOptions::Gpt2(Gpt2Options { scale_by_inverse_layer_idx: false }));
    assert!(lm.vs.variables().contains_key("transformer.h.0.attn.c_attn.weight"), "HF's names");
    // The hub's bare layout with its buffers.
    let bare = copy_dir(&dir, "decoder-gpt2-bare");
    let file = bare.join("model.safetensors");
    let mut tensors: Vec<(String, Tensor)> = Tensor::read_safetensors(&file)
        .unwrap()
        .into_iter()
        .map(|(name, t)| (name.strip_prefix("transformer.").unwrap_or(&name).to_string(), t))
        .collect();
    assert!(tensors.iter().any(|(n, _)| n == "wte.weight") && tensors.iter().all(|(n, _)| n != "lm_head.weight"));
    for i in 0..c.layers.len() {
        tensors.push((format!("h.{i}.attn.bias"), Tensor::ones([1, 1, 128, 128], (Kind::Float, Device::Cpu)).tril(0)));
        tensors.push((format!("h.{i}.attn.masked_bias"), Tensor::scalar_tensor(-1e4, (Kind::Float, Device::Cpu))));
    }
    Tensor::write_safetensors(&tensors, &file).unwrap();
    check(&bare, "gpt2 saved bare, with its causal-mask buffers");
    // Past the learned positions: the scorer refuses the sentence, a cached pass the step.
    let scorer = CausalScorer::new(&lm).unwrap();
    let long = "kota ".repeat(200);
    let err = scorer.score_texts(&[long.as_str()]).unwrap_err().to_string();
    assert!(err.contains("more than the model's 128 positions"), "{err}");
    let ids = Tensor::ones([1, 129], (Kind::Int64, Device::Cpu));
    let mut cache = lm.new_cache(1, 200);
    let err = lm.hidden_cached(&ids, &ids, &mut cache).unwrap_err().to_string();
    assert!(err.contains("129 tokens a row pass the model's 128 learned positions"), "{err}");
    assert!(cache.is_empty(), "nothing written");
    assert!(lm.hidden_cached(&ids.narrow(1, 0, 128), &ids.narrow(1, 0, 128), &mut cache).is_ok());
    let err = lm.hidden_cached(&ids.narrow(1, 0, 1), &ids.narrow(1, 0, 1), &mut cache).unwrap_err().to_string();
    assert!(err.contains("129 tokens a row pass"), "{err}");
}

#[test]
fn unknown_model_types_are_refused() {
    let dir = scratch("decoder-unknown");
    let config = r#"{"model_type": "gpt_neox", "architectures": ["GPTNeoXForCausalLM"]}"#;
    std::fs::write(dir.join("config.json"), config).unwrap();
    let err = load_causal_lm(&dir, Device::Cpu).err().expect("refused").to_string();
    assert!(
        err.ends_with("config.json: field `model_type`: `gpt_neox` is not a supported causal LM (supported: llama, mistral, qwen2, qwen3, gemma2, gemma3_text, gemma3, olmo2, olmo3, bloom, xglm, falcon, gpt2)"),
        "{err}"
    );
}

#[test]
fn eval_pll_on_a_decoder_prints_log_likelihoods_with_the_convention() {
    let dir = llama();
    let reference: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("reference.json")).unwrap()).unwrap();
    let text = dir.join("sentences.txt");
    let (stdout, stderr) = indolm_ok(&[
        "--threads",
        "1",
        "eval",
        "pll",
        "--model",
        dir.to_str().unwrap(),
        "--text",
        text.to_str().unwrap(),
        "--json",
    ]);
    assert!(stderr.contains("scored after <s> (id 2, its bos)"), "{stderr}");
    let lines: Vec<Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let sentences = reference["sentences"].as_array().unwrap();
    assert_eq!(lines.len(), sentences.len());
    for (got, s) in lines.iter().zip(sentences) {
        assert_eq!(got["sentence"], s["text"]);
        let (ll, expected) = (got["log_likelihood"].as_f64().unwrap(), s["sum"].as_f64().unwrap());
        let tokens = s["ids"].as_array().unwrap().len();
        assert!(relative(ll, expected) < TOLERANCE, "{ll} vs {expected}");
        assert_eq!(got["tokens"].as_u64().unwrap() as usize, tokens);
        assert!((got["perplexity"].as_f64().unwrap() - (-ll / tokens as f64).exp()).abs() < 1e-9);
        assert_eq!(
            (got["prefix_token_id"].as_i64(), got["prefix_token"].as_str(), got["score"].as_str()),
            (Some(2), Some("<s>"), Some("sum"))
        );
    }
    // A reader gone before the table is written ends the command quietly.
    indolm_into_closed_pipe(&[
        "--threads",
        "1",
        "eval",
        "pll",
        "--model",
        dir.to_str().unwrap(),
        "--text",
        text.to_str().unwrap(),
    ]);
    // Masked-LM metrics do not apply.
    let err = indolm_fails(&[
        "eval",
        "pll",
        "--model",
        dir.to_str().unwrap(),
        "--text",
        text.to_str().unwrap(),
        "--metric",
        "aul",
    ]);
    assert!(err.contains("is a causal LM: only `pll` applies"), "{err}");
}

#[test]
fn eval_bias_on_a_decoder_decides_pairs_by_perplexity_and_by_sums() {
    let model = llama().to_str().unwrap();
    let pairs_csv = test_data().join("crows-pairs/crows_pairs_anonymized.csv");
    bias_parity(llama(), "llama");
    let err =
        indolm_fails(&["eval", "bias", "--model", model, "--pairs", pairs_csv.to_str().unwrap(), "--metric", "aul"]);
    assert!(err.contains("`aul` needs a masked LM"), "{err}");
}

/// Gemma 2 (soft-capping, sliding windows) decides the pairs as transformers' sums decide them,
/// and `report bias-table` lays it out beside Llama as the paper's tables do.
#[test]
fn eval_bias_on_gemma2_matches_transformers_and_the_bias_table_renders_it() {
    let gemma = fixture("gemma2");
    let gemma_out = bias_parity(&gemma, "gemma2");
    let llama_out = bias_parity(llama(), "llama-for-table");
    let json = gemma_out.join("table.json");
    let (stdout, _) = indolm_ok(&[
        "report",
        "bias-table",
        &format!("Gemma 2 (tiny)={}", gemma_out.display()),
        &format!("Llama (tiny)={}", llama_out.display()),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(stdout.contains("| Gemma 2 (tiny) | perplexity (causal LM) | – |"), "{stdout}");
    let cells: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for (name, out) in [("Gemma 2 (tiny)", &gemma_out), ("Llama (tiny)", &llama_out)] {
        let report = indolm_eval::bias::records::read_checked(out).unwrap().0;
        let overall = &report.languages[0].overall;
        let row = format!("| {name} | {} ({}) |", indolm_eval::bias::rate_with_interval(overall), overall.tally.pairs);
        assert!(stdout.contains(&row), "{row} in {stdout}");
        let cell = cells.iter().find(|c| c["model"] == name && c["category"] == "overall").unwrap();
        assert_eq!(cell["win_rate"].as_f64().unwrap(), overall.win_rate);
    }
    println!("{stdout}");
}

/// `eval bias --metric pppl crows` on `dir` over the CrowS-Pairs test pairs: every pair's two
/// log-likelihoods equal transformers' (the lm-eval rule) and every decision follows them;
/// returns the evaluation folder.
fn bias_parity(dir: &Path, name: &str) -> PathBuf {
    use indolm_eval::bias::records::read_records;
    let work = scratch(&format!("decoder-bias-{name}"));
    let pairs_csv = test_data().join("crows-pairs/crows_pairs_anonymized.csv");
    let out = work.join("eval");
    let model = dir.to_str().unwrap();
    indolm_ok(&[
        "--threads",
        "1",
        "eval",
        "bias",
        "--model",
        model,
        "--pairs",
        pairs_csv.to_str().unwrap(),
        "--metric",
        "pppl",
        "crows",
        "--out",
        out.to_str().unwrap(),
    ]);
    // transformers' log-likelihoods of every pair's two sentences, the lm-eval rule.
    let pairs = indolm_eval::pairs::load_crows(&pairs_csv).unwrap();
    let pairs = &pairs.languages[0].1;
    let sentences = work.join("sentences.txt");
    let text: Vec<String> = pairs.iter().flat_map(|p| [p.pro.clone(), p.anti.clone()]).collect();
    std::fs::write(&sentences, text.join("\n") + "\n").unwrap();
    let ref_path = work.join("reference.json");
    reference(&["causal-ref", model, sentences.to_str().unwrap(), ref_path.to_str().unwrap()]);
    let reference: Value = serde_json::from_str(&std::fs::read_to_string(&ref_path).unwrap()).unwrap();
    let sums: Vec<(f64, usize)> = reference["sentences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["sum"].as_f64().unwrap(), s["ids"].as_array().unwrap().len()))
        .collect();
    let (mut pro_wins_ppl, mut pro_wins_sum) = (0, 0);
    for (metric_dir, by_perplexity) in [(out.clone(), true), (out.join("bias-crows"), false)] {
        let records = read_records(&metric_dir.join("bias_pairs.csv")).unwrap();
        assert_eq!(records.len(), pairs.len());
        let report: Value =
            serde_json::from_str(&std::fs::read_to_string(metric_dir.join("bias.json")).unwrap()).unwrap();
        assert_eq!(report["causal"]["prefix_token_id"], reference["prefix_token_id"], "{}", report["causal"]);
        assert_eq!(report["causal"]["score"], "sum");
        for (r, pair) in records.iter().zip(sums.chunks(2)) {
            let ((pro, np), (anti, na)) = (pair[0], pair[1]);
            assert!(relative(r.pro_pll, pro) < TOLERANCE && relative(r.anti_pll, anti) < TOLERANCE);
            assert_eq!((r.pro_tokens, r.anti_tokens), (np, na));
            let expected = if by_perplexity {
                (-pro / np as f64).exp() < (-anti / na as f64).exp()
            } else {
                (pro * 1000.0).round() > (anti * 1000.0).round()
            };
            assert_eq!(r.is_win(), expected, "{r:?}");
            if r.is_win() {
                if by_perplexity {
                    pro_wins_ppl += 1
                } else {
                    pro_wins_sum += 1
                }
            }
        }
    }
    println!(
        "{name}: {} CrowS pairs: stereotype preferred by perplexity in {pro_wins_ppl}, by log-likelihood sum in {pro_wins_sum}",
        pairs.len()
    );
    out
}
