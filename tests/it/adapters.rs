//! PEFT LoRA adapters merged at load, against peft: tiny adapters made with peft over the tiny
//! Llama of `decoders` (`hf_reference.py make-lora`: r=4, lora_alpha=8 on every projection, the
//! B matrices seeded random instead of zero, `base_model_name_or_path` relative to the adapter
//! folder; an rsLoRA variant with `rank_pattern` and `alpha_pattern`; one saved as
//! `adapter_model.bin`). indolm loads the adapter folder as its base model with every pair merged
//! into the weights: its per-token log-probabilities must equal those of
//! `PeftModel.from_pretrained(base, adapter)` (not merged) within 1e-4 relative, and differ from
//! the base model's own. Adapters it cannot merge exactly are refused with one line.
use crate::common::*;
use crate::decoders::{check, llama};
use indolm_eval::causal::CausalScorer;
use indolm_torch::model::decoder::load_causal_lm;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use tch::{Device, Tensor};

const TOLERANCE: f64 = 1e-4;

/// Builds a `make-lora` adapter of `variant` (plain, rslora, bin) over the shared tiny Llama in a
/// fresh scratch folder.
fn make(variant: &str) -> PathBuf {
    let dir = scratch(&format!("lora-{variant}"));
    reference(&["make-lora", llama().to_str().unwrap(), dir.to_str().unwrap(), variant]);
    dir
}

/// The plain adapter, built once and shared by the tests that only read it or copy it.
fn plain() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| make("plain"))
}

fn relative(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs().max(1e-3)
}

/// indolm's log-likelihood of each line of the Llama fixture's sentences.txt under the model
/// (or adapter) in `dir`.
fn sums(dir: &Path) -> Vec<f64> {
    let lm = load_causal_lm(dir, Device::Cpu).unwrap();
    let text = std::fs::read_to_string(llama().join("sentences.txt")).unwrap();
    let texts: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    CausalScorer::new(&lm).unwrap().score_texts(&texts).unwrap().iter().map(|s| s.sum).collect()
}

/// Sets `key` of `dir/adapter_config.json` to `value`.
fn set_config(dir: &Path, key: &str, value: Value) {
    let path = dir.join("adapter_config.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    config[key] = value;
    std::fs::write(&path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
}

/// Rewrites `dir/adapter_model.safetensors` with every tensor name passed through `rename`.
fn rename_tensors(dir: &Path, rename: impl Fn(&str) -> String) {
    let path = dir.join("adapter_model.safetensors");
    let tensors = indolm_torch::model::weights::read_file(&path).unwrap();
    let renamed: Vec<(String, Tensor)> = tensors.into_iter().map(|(n, t)| (rename(&n), t)).collect();
    indolm_torch::model::weights::write_file(&path, &renamed).unwrap();
}

/// The plain adapter: PeftModel's scores, the merge recorded, the base's config and tokenizer,
/// and scores that are not the base model's (a merge that did nothing fails here).
#[test]
fn a_lora_adapter_scores_as_peft_model_over_its_base_and_not_as_the_base() {
    let dir = plain();
    check(dir, "llama + LoRA");
    let lm = load_causal_lm(dir, Device::Cpu).unwrap();
    let merged = lm.adapter.as_ref().expect("the merged adapter is recorded");
    assert_eq!((merged.r, merged.alpha, merged.rslora, merged.per_module), (4, 8.0, false, false));
    assert_eq!(merged.modules, 3 * 7, "seven projections in each of three layers");
    assert_eq!((merged.replaced, merged.not_text), (0, 0));
    assert_eq!(merged.base, llama().canonicalize().unwrap());
    assert_eq!(
        lm.tokenizer.source.canonicalize().unwrap(),
        llama().join("tokenizer.json").canonicalize().unwrap(),
        "no tokenizer.json in the adapter folder: the base's"
    );
    let (with, without) = (sums(dir), sums(llama()));
    let moved = with.iter().zip(&without).map(|(a, b)| (a - b).abs()).fold(0f64, f64::max);
    println!("llama + LoRA: sentence sums {with:.3?}, the base's {without:.3?}");
    assert!(moved > 0.5, "the adapter hardly changes the scores ({moved:e}): was it merged?");
}

/// rsLoRA (scaling alpha/√r) with per-module ranks and alphas, a full module name and a
/// name ending among the patterns.
#[test]
fn an_rslora_adapter_with_rank_and_alpha_patterns_scores_as_peft_model() {
    let dir = make("rslora");
    check(&dir, "llama + rsLoRA with rank_pattern and alpha_pattern");
    let lm = load_causal_lm(&dir, Device::Cpu).unwrap();
    let merged = lm.adapter.as_ref().expect("recorded");
    assert!(merged.rslora && merged.per_module, "{merged:?}");
    let note = merged.to_string();
    assert!(
        note.contains("(r=4, alpha=8, rsLoRA, per-module r/alpha from rank_pattern/alpha_pattern, 21 modules)"),
        "{note}"
    );
}

/// The older file layout (adapter_model.bin, as Bactrian-X ships) and names that keep peft's
/// adapter name (`lora_A.default.weight`) merge to the same scores.
#[test]
fn adapter_model_bin_and_names_with_the_adapter_name_merge_alike() {
    let bin = make("bin");
    assert!(bin.join("adapter_model.bin").is_file() && !bin.join("adapter_model.safetensors").exists());
    check(&bin, "llama + LoRA from adapter_model.bin");
    let named = copy_dir(plain(), "lora-named");
    rename_tensors(&named, |n| n.replace(".lora_A.", ".lora_A.default.").replace(".lora_B.", ".lora_B.default."));
    let names = indolm_torch::model::weights::read_file(&named.join("adapter_model.safetensors")).unwrap();
    assert!(names.keys().all(|n| n.contains(".default.weight")), "{:?}", names.keys().next());
    check(&named, "llama + LoRA with .default in its tensor names");
}

/// `eval pll` takes the adapter folder as `--model`, says what it merged, and prints PeftModel's
/// log-likelihoods.
#[test]
fn eval_pll_on_an_adapter_folder_merges_it_and_says_so() {
    let dir = plain();
    let reference: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("reference.json")).unwrap()).unwrap();
    let text = llama().join("sentences.txt");
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
    let note = format!("note: merged LoRA adapter {} (r=4, alpha=8, 21 modules) over ", dir.display());
    assert!(stderr.contains(&note), "{stderr}");
    let lines: Vec<Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let sentences = reference["sentences"].as_array().unwrap();
    assert_eq!(lines.len(), sentences.len());
    for (got, s) in lines.iter().zip(sentences) {
        let (ll, expected) = (got["log_likelihood"].as_f64().unwrap(), s["sum"].as_f64().unwrap());
        assert!(relative(ll, expected) < TOLERANCE, "{ll} vs PeftModel's {expected}");
    }
}

/// A base named by its hub id (as Bactrian-X's adapter_config.json names
/// decapoda-research/llama-7b-hf) is refused with one line that says what to write there.
#[test]
fn a_hub_name_as_base_model_is_refused_in_one_line() {
    let dir = copy_dir(plain(), "lora-hub-base");
    set_config(&dir, "base_model_name_or_path", Value::from("decapoda-research/llama-7b-hf"));
    let text = llama().join("sentences.txt");
    let stderr = indolm_fails(&["eval", "pll", "--model", dir.to_str().unwrap(), "--text", text.to_str().unwrap()]);
    let expected = format!(
        "error: {}: field `base_model_name_or_path`: `decapoda-research/llama-7b-hf` is not a local folder",
        dir.join("adapter_config.json").display()
    );
    assert!(stderr.starts_with(&expected), "{stderr}");
    assert!(stderr.contains("download the base model and write its local path here"), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
}

/// DoRA (a merge indolm does not compute) and an adapter tensor of a module the base lacks are
/// refused, each with one line naming the file and what is wrong.
#[test]
fn dora_and_tensors_that_name_no_base_weight_are_refused() {
    let dora = copy_dir(plain(), "lora-dora");
    set_config(&dora, "use_dora", Value::Bool(true));
    let err = load_causal_lm(&dora, Device::Cpu).err().expect("DoRA refused").to_string();
    let expected = "adapter_config.json: field `use_dora`: true: DoRA is not supported; indolm merges plain LoRA \
                    adapters only (W + scaling·B·A)";
    assert!(err.ends_with(expected), "{err}");
    assert!(!err.contains('\n'), "{err}");

    let stray = copy_dir(plain(), "lora-stray");
    rename_tensors(&stray, |n| n.replace("model.layers.2.", "model.layers.7."));
    let err = load_causal_lm(&stray, Device::Cpu).err().expect("a stray tensor refused").to_string();
    assert!(err.contains("adapter_model.safetensors: tensor `base_model.model.model.layers.7."), "{err}");
    assert!(err.contains("names no base weight: `model.layers.7."), "{err}");
}
