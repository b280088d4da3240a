//! Generation against transformers' `generate`. For every causal family indolm loads, the tiny
//! random model of `hf_reference.py make-decoder` (built once for the module, in one reference
//! process: `make-decoders`; Llama's is the decoders module's) completes three prompts of different
//! lengths greedily, 12 new tokens: indolm's tokens equal transformers' token for token, with the
//! same completion text, all prompts in one left-padded batch and one prompt at a time, and its
//! cached forward pass equals one pass over the whole. Beside that: sliding-window families
//! generating past their window, EOS ids of generation_config.json (a list) ending one row of a
//! batch, stop strings, seeded sampling (reproducible, its own stream per prompt, different with
//! another seed) and its warpers against transformers', `indolm generate` end to end, and bad
//! input refused in one line.
//!
//! Chat templates against transformers' `apply_chat_template(..., add_generation_prompt=True)`
//! (`hf_reference.py chat-render`), on a folder with the Llama fixture's tokenizer: the templates of
//! the paper's instruct models (tests/fixtures/chat_templates/, verbatim) on conversations of every
//! shape, with their kwargs (Qwen3's `enable_thinking`) and tools; a template of our own using what
//! templates use; where the template is found; `indolm generate --chat` end to end; and chat
//! input refused in one line.
use crate::common::*;
use indolm_eval::generate::chat::{self, ChatTemplate, Messages, TemplateKwargs};
use indolm_eval::generate::prompts::{read_prompts, tokenize};
use indolm_eval::generate::text::CompletionText;
use indolm_eval::generate::{generate, Completion, GenerationDefaults, Sampling, Settings, StopReason};
use indolm_torch::model::decoder::{load_causal_lm, CausalLm, CausalTokenizer};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use tch::{Device, Kind, Tensor};

/// New tokens a completion.
const NEW_TOKENS: usize = 12;

/// Three prompts of different lengths, as a prompt file.
const PROMPTS: &str = r#"{"id": "a", "prompt": "Ibu kota Indonesia adalah"}
{"id": "b", "prompt": "Para petani di desa itu menanam padi dan jagung setiap musim"}
{"id": "c", "prompt": "Dia"}
"#;

/// The `make-decoder` families built for this module (Llama's fixture is the decoders module's).
const FAMILIES: [&str; 14] = [
    "llama3",
    "mistral",
    "qwen2",
    "qwen3",
    "gemma2",
    "gemma3",
    "olmo2",
    "olmo3",
    "bloom",
    "xglm",
    "falcon",
    "falcon40b",
    "falconalibi",
    "gpt2",
];

/// Every family's fixture folder, built once.
pub(crate) fn fixtures() -> &'static BTreeMap<&'static str, PathBuf> {
    static DIRS: OnceLock<BTreeMap<&'static str, PathBuf>> = OnceLock::new();
    DIRS.get_or_init(|| {
        let root = scratch("generation-fixtures");
        let mut args = vec!["make-decoders", root.to_str().unwrap()];
        args.extend(FAMILIES);
        reference(&args);
        let mut dirs: BTreeMap<&'static str, PathBuf> = FAMILIES.iter().map(|&f| (f, root.join(f))).collect();
        dirs.insert("llama", crate::decoders::llama().to_path_buf());
        dirs
    })
}

/// `family`'s fixture folder.
fn fixture(family: &str) -> &'static Path {
    fixtures().get(family).unwrap_or_else(|| panic!("no fixture for {family}"))
}

/// The prompt file of [`PROMPTS`].
fn prompts_file() -> &'static Path {
    static FILE: OnceLock<PathBuf> = OnceLock::new();
    FILE.get_or_init(|| {
        let path = scratch("generation-prompts").join("prompts.jsonl");
        std::fs::write(&path, PROMPTS).unwrap();
        path
    })
}

fn ints(v: &Value) -> Vec<i64> {
    v.as_array().unwrap_or_else(|| panic!("a list: {v}")).iter().map(|x| x.as_i64().unwrap()).collect()
}

/// Greedy settings with the model's EOS and pad ids (generation_config.json, else config.json).
fn greedy(dir: &Path, max_new_tokens: usize) -> Settings {
    let defaults = GenerationDefaults::read(&[dir], &dir.join("config.json")).unwrap();
    Settings {
        max_new_tokens,
        sampling: None,
        eos: defaults.eos,
        stop_strings: Vec::new(),
        pad: defaults.pad.unwrap_or(0),
        token_budget: 1 << 16,
        batch_size: usize::MAX,
    }
}

/// The prompts of `prompts` tokenized for `lm`.
fn prompt_ids(lm: &CausalLm, prompts: &Path, max_new_tokens: usize) -> Vec<Vec<i64>> {
    tokenize(lm, prompts, &read_prompts(prompts).unwrap(), max_new_tokens).unwrap()
}

/// transformers' greedy completions of `prompts` with the model in `dir`: `{"batched": ...,
/// "alone": ...}`.
fn transformers_greedy(dir: &Path, prompts: &Path, max_new_tokens: usize, name: &str) -> Value {
    let out = scratch(&format!("generation-ref-{name}")).join("reference.json");
    let n = max_new_tokens.to_string();
    reference(&["generate", dir.to_str().unwrap(), prompts.to_str().unwrap(), out.to_str().unwrap(), "both", &n]);
    serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap()
}

/// indolm's greedy completions of `prompts` with the model in `dir` equal transformers' token for
/// token, with the same text and stop reason, in one left-padded batch and one prompt at a time;
/// the first prompt's logits through the cache equal the full pass's. Returns the batched ones.
fn greedy_equals_transformers(name: &str, dir: &Path, prompts: &Path, max_new_tokens: usize) -> Vec<Completion> {
    let lm = load_causal_lm(dir, Device::Cpu).unwrap();
    let ids = prompt_ids(&lm, prompts, max_new_tokens);
    let expected = transformers_greedy(dir, prompts, max_new_tokens, name);
    let settings = greedy(dir, max_new_tokens);
    let mut batched = Vec::new();
    for (mode, batch_size) in [("batched", usize::MAX), ("alone", 1)] {
        let reference = &expected[mode];
        assert_eq!(settings.eos, ints(&reference["eos"]), "{name}: the EOS ids generate uses");
        let got = generate(&lm, &ids, &Settings { batch_size, ..settings.clone() }, &mut |_| {}).unwrap();
        let want = reference["prompts"].as_array().unwrap();
        assert_eq!(got.len(), want.len());
        let mut margin = f64::INFINITY;
        for ((g, w), prompt) in got.iter().zip(want).zip(&ids) {
            let id = &w["id"];
            assert_eq!(*prompt, ints(&w["prompt_ids"]), "{name}: prompt {id}'s ids are not tokenizer(prompt)'s");
            assert_eq!(g.ids, ints(&w["ids"]), "{name} ({mode}): prompt {id}'s new tokens differ from transformers'");
            assert_eq!(g.stop.name(), w["stop_reason"].as_str().unwrap(), "{name} ({mode}): prompt {id}");
            assert_eq!(g.text, w["completion"].as_str().unwrap(), "{name} ({mode}): prompt {id}'s text");
            margin = margin.min(w["min_margin"].as_f64().unwrap_or(f64::INFINITY));
        }
        println!(
            "{name} ({mode}): prompts of {:?} tokens, {:?} new tokens each equal to transformers' (their smallest \
             gap between the two best logits: {margin:.1e})",
            ids.iter().map(Vec::len).collect::<Vec<_>>(),
            got.iter().map(Completion::tokens).collect::<Vec<_>>()
        );
        if mode == "batched" {
            batched = got;
        }
    }
    cached_equals_full(name, &lm, &ids[0], &batched[0].ids);
    batched
}

/// The logits of `prompt` and `new` run through a [`indolm_torch::model::decoder::KvCache`] (the prompt
/// at once, then a token a step) equal those of one forward pass over the whole; a token more
/// than the cache holds is refused.
fn cached_equals_full(name: &str, lm: &CausalLm, prompt: &[i64], new: &[i64]) {
    let all: Vec<i64> = prompt.iter().chain(new).copied().collect();
    let (n, p) = (all.len() as i64, prompt.len() as i64);
    let ids = Tensor::from_slice(&all).view([1, n]);
    let real = Tensor::ones([1, n], (Kind::Int64, Device::Cpu));
    tch::no_grad(|| {
        let full = lm.logits(&lm.hidden(&ids, &real));
        let mut cache = lm.new_cache(1, n);
        let mut stepped = vec![lm.forward_cached(&ids.narrow(1, 0, p), &real.narrow(1, 0, p), &mut cache).unwrap()];
        for i in p..n {
            stepped.push(lm.forward_cached(&ids.narrow(1, i, 1), &real.narrow(1, i, 1), &mut cache).unwrap());
        }
        let worst = (Tensor::cat(&stepped, 1) - &full).abs().max().double_value(&[]);
        assert!(worst < 1e-4, "{name}: cached logits differ from the full pass's by {worst:e}");
        assert_eq!(cache.len(), n);
        let err = lm.forward_cached(&ids.narrow(1, 0, 1), &real.narrow(1, 0, 1), &mut cache).unwrap_err();
        assert!(err.to_string().contains("do not fit"), "{err}");
    });
}

macro_rules! greedy_parity {
    ($($test:ident: $family:literal),* $(,)?) => {$(
        #[test]
        fn $test() {
            greedy_equals_transformers($family, fixture($family), prompts_file(), NEW_TOKENS);
        }
    )*};
}

greedy_parity! {
    llama_generates_as_transformers: "llama",
    llama3_generates_as_transformers: "llama3",
    mistral_generates_as_transformers: "mistral",
    qwen2_generates_as_transformers: "qwen2",
    qwen3_generates_as_transformers: "qwen3",
    gemma2_generates_as_transformers: "gemma2",
    gemma3_generates_as_transformers: "gemma3",
    olmo2_generates_as_transformers: "olmo2",
    olmo3_generates_as_transformers: "olmo3",
    bloom_generates_as_transformers: "bloom",
    xglm_generates_as_transformers: "xglm",
    falcon_generates_as_transformers: "falcon",
    falcon40b_generates_as_transformers: "falcon40b",
    falconalibi_generates_as_transformers: "falconalibi",
    gpt2_generates_as_transformers: "gpt2",
}

/// Mistral (a window of 7 keys on every layer) and Gemma 3 (6, on three layers of four) writing 24
/// tokens: every completion runs past the window, its early tokens leaving it, as in
/// transformers' cache.
#[test]
fn sliding_window_families_generate_past_their_window_as_transformers() {
    for family in ["mistral", "gemma3"] {
        let dir = fixture(family);
        let config: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
        let window = config["sliding_window"].as_u64().unwrap() as usize;
        let got = greedy_equals_transformers(&format!("{family}-long"), dir, prompts_file(), 24);
        assert!(got.iter().all(|c| c.tokens() > window), "{family}: a window of {window}");
    }
}

/// A second EOS id in generation_config.json (a list): the first prompt's second new token ends
/// it there (kept as its last token, out of its text) while the other rows of the batch go on, as
/// in transformers.
#[test]
fn eos_ids_of_generation_config_end_a_row_while_the_others_go_on_as_in_transformers() {
    let dir = copy_dir(fixture("llama"), "generation-llama-eos");
    let lm = load_causal_lm(&dir, Device::Cpu).unwrap();
    let ids = prompt_ids(&lm, prompts_file(), NEW_TOKENS);
    let plain = generate(&lm, &ids, &greedy(&dir, NEW_TOKENS), &mut |_| {}).unwrap();
    let stop_at = plain[0].ids[1];
    let path = dir.join("generation_config.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let eos = config["eos_token_id"].as_i64().unwrap();
    config["eos_token_id"] = json!([eos, stop_at]);
    std::fs::write(&path, config.to_string()).unwrap();
    assert_eq!(greedy(&dir, NEW_TOKENS).eos, vec![eos, stop_at]);
    let got = greedy_equals_transformers("llama-eos", &dir, prompts_file(), NEW_TOKENS);
    let end = plain[0].ids.iter().position(|&t| t == stop_at).unwrap() + 1;
    assert_eq!((got[0].stop, got[0].ids.as_slice()), (StopReason::Eos, &plain[0].ids[..end]));
    let before = CompletionText::new(&lm.tokenizer, &ids[0]).unwrap().text(&plain[0].ids[..end - 1]).unwrap();
    assert_eq!(got[0].text, before, "the EOS is not in the text");
    for (g, p) in got.iter().zip(&plain).skip(1) {
        if !p.ids.contains(&stop_at) {
            assert_eq!(g, p, "a row the new EOS does not end is unchanged");
        }
    }
}

/// EOS and pad ids: generation_config.json's, a list allowed, else config.json's; its sampling
/// settings read, what indolm does not apply listed; a field of the wrong type named.
#[test]
fn generation_defaults_come_from_generation_config_then_config_json() {
    let dir = scratch("generation-defaults");
    let config = dir.join("config.json");
    let write = |name: &str, v: Value| std::fs::write(dir.join(name), v.to_string()).unwrap();
    write("config.json", json!({"eos_token_id": [5, 6], "pad_token_id": 0}));
    let d = GenerationDefaults::read(&[&dir], &config).unwrap();
    assert_eq!((d.eos, d.pad, d.do_sample, d.source), (vec![5, 6], Some(0), false, None));
    write(
        "generation_config.json",
        json!({"eos_token_id": 7, "do_sample": true, "temperature": 0.6, "top_k": 20, "top_p": 0.95,
               "max_new_tokens": 64, "stop_strings": "###", "repetition_penalty": 1.1, "num_beams": 1}),
    );
    let d = GenerationDefaults::read(&[&dir], &config).unwrap();
    assert_eq!((d.eos.as_slice(), d.pad, d.do_sample), ([7].as_slice(), Some(0), true));
    assert_eq!((d.temperature, d.top_k, d.top_p, d.max_new_tokens), (Some(0.6), Some(20), Some(0.95), Some(64)));
    assert_eq!(d.stop_strings, vec!["###"]);
    assert_eq!(d.not_applied.len(), 1, "{:?}", d.not_applied);
    assert!(d.not_applied[0].contains("`repetition_penalty` 1.1 is not applied"), "{:?}", d.not_applied);
    write("generation_config.json", json!({"do_sample": false, "eos_token_id": null}));
    assert_eq!(GenerationDefaults::read(&[&dir], &config).unwrap().eos, vec![5, 6]);
    write("generation_config.json", json!({"eos_token_id": "</s>"}));
    let err = GenerationDefaults::read(&[&dir], &config).unwrap_err().to_string();
    assert!(
        err.ends_with(
            "generation_config.json: field `eos_token_id`: expected a token id or a list of them, found \"</s>\""
        ),
        "{err}"
    );
}

/// A stop string taken from the middle of a completion ends it where the string first appears,
/// its text cut before it and its tokens those generated until then; a completion whose text
/// never holds one is unchanged.
#[test]
fn stop_strings_end_a_completion_and_cut_its_text_before_them() {
    let dir = fixture("llama");
    let lm = load_causal_lm(dir, Device::Cpu).unwrap();
    let ids = prompt_ids(&lm, prompts_file(), NEW_TOKENS);
    let settings = greedy(dir, NEW_TOKENS);
    let plain = generate(&lm, &ids, &settings, &mut |_| {}).unwrap();
    let chars: Vec<char> = plain[1].text.chars().collect();
    assert!(chars.len() > 6, "{:?}", plain[1].text);
    let stop: String = chars[3..5].iter().collect();
    let stops = vec![stop.clone(), "never generated: 😀".to_string()];
    let got = generate(&lm, &ids, &Settings { stop_strings: stops, ..settings }, &mut |_| {}).unwrap();
    for (g, p) in got.iter().zip(&plain) {
        match p.text.find(&stop) {
            None => assert_eq!(g, p),
            Some(at) => {
                assert_eq!((g.stop, g.text.as_str()), (StopReason::StopString, &p.text[..at]));
                assert_eq!(g.ids, p.ids[..g.tokens()], "the tokens until the stop string");
            }
        }
    }
    assert_eq!(got[1].stop, StopReason::StopString);
    println!("stop string {stop:?}: {:?} became {:?}", plain[1].text, got[1].text);
}

/// Sampling with a seed gives the same completions on every run and in any batch (each prompt
/// draws from its own stream), others with another seed; cut to one token by top_k 1 or top_p 0,
/// it is greedy.
#[test]
fn seeded_sampling_is_reproducible_in_any_batch_and_differs_with_another_seed() {
    let dir = fixture("llama");
    let lm = load_causal_lm(dir, Device::Cpu).unwrap();
    let ids = prompt_ids(&lm, prompts_file(), NEW_TOKENS);
    let base = greedy(dir, NEW_TOKENS);
    let run = |sampling: Sampling, batch_size: usize| {
        let settings = Settings { sampling: Some(sampling), batch_size, ..base.clone() };
        generate(&lm, &ids, &settings, &mut |_| {}).unwrap()
    };
    let hot = Sampling { temperature: 1.5, top_k: 0, top_p: 1.0, seed: 11 };
    let a = run(hot, usize::MAX);
    assert_eq!(a, run(hot, usize::MAX), "the same seed, the same completions");
    assert_eq!(a, run(hot, 1), "a prompt's draws do not depend on its batch");
    let tokens = |c: &[Completion]| c.iter().map(|c| c.ids.clone()).collect::<Vec<_>>();
    let b = run(Sampling { seed: 12, ..hot }, usize::MAX);
    assert_ne!(tokens(&a), tokens(&b), "another seed, other completions");
    let greedy_out = generate(&lm, &ids, &base, &mut |_| {}).unwrap();
    assert_ne!(tokens(&a), tokens(&greedy_out));
    for one in [Sampling { top_k: 1, ..hot }, Sampling { top_p: 0.0, ..hot }] {
        assert_eq!(tokens(&run(one, usize::MAX)), tokens(&greedy_out), "{one:?} keeps only the most likely token");
    }
    println!("seed 11: {:?}\nseed 12: {:?}", a.iter().map(|c| &c.text).collect::<Vec<_>>(), b[0].text);
}

/// Temperature, top-k and top-p warp logits exactly as transformers' warpers do in `generate`'s
/// order, ties and the most likely token kept included.
#[test]
fn sampling_warpers_equal_transformers() {
    let scores: Vec<Vec<f32>> = vec![
        vec![2.0, 1.0, 1.0, 0.5, -1.0, 3.0, 3.0, 0.0, -2.5, 1.5],
        vec![0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
        vec![5.0, -5.0, 0.0, 0.0, 0.0, 0.0, 4.9, -1.0, 2.0, 2.0],
    ];
    let cases =
        [(1.0, 0, 1.0), (0.7, 3, 1.0), (1.3, 0, 0.8), (0.5, 4, 0.6), (1.0, 1, 0.0), (2.0, 50, 0.95), (1.0, 2, 0.3)];
    let work = scratch("generation-warp");
    let specs: Vec<Value> = cases
        .iter()
        .map(|&(temperature, top_k, top_p)| {
            json!({"scores": scores, "temperature": temperature, "top_k": top_k, "top_p": top_p})
        })
        .collect();
    let (input, output) = (work.join("cases.json"), work.join("warped.json"));
    std::fs::write(&input, Value::from(specs).to_string()).unwrap();
    reference(&["warp", input.to_str().unwrap(), output.to_str().unwrap()]);
    let expected: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&output).unwrap()).unwrap();
    let flat: Vec<f32> = scores.iter().flatten().copied().collect();
    let logits = Tensor::from_slice(&flat).view([scores.len() as i64, -1]);
    for (&(temperature, top_k, top_p), want) in cases.iter().zip(&expected) {
        let sampling = Sampling { temperature, top_k, top_p, seed: 0 };
        let got = Vec::<Vec<f32>>::try_from(&sampling.warp(&logits)).unwrap();
        for (row, want_row) in got.iter().zip(want["scores"].as_array().unwrap()) {
            for (g, w) in row.iter().zip(want_row.as_array().unwrap()) {
                match w.as_f64() {
                    None => assert_eq!(*g, f32::NEG_INFINITY, "{sampling:?}: {row:?} vs {want_row}"),
                    Some(w) => {
                        assert!((*g as f64 - w).abs() <= 1e-6 * w.abs().max(1.0), "{sampling:?}: {row:?} vs {want_row}")
                    }
                }
            }
        }
    }
}

/// `indolm generate` on the Llama fixture: a prompt file with string, number and missing ids and
/// a blank line; JSON Lines out, one record a prompt in order, the library's greedy completions
/// (transformers', by the Llama test); `--stop`; sampled runs with a seed written the same twice; nothing but the
/// output left in its folder.
#[test]
fn indolm_generate_writes_json_lines_records_end_to_end() {
    let dir = fixture("llama");
    let work = scratch("generation-cli");
    let prompts = work.join("prompts.jsonl");
    std::fs::write(
        &prompts,
        "{\"id\": \"a\", \"prompt\": \"Ibu kota Indonesia adalah\", \"topic\": \"ignored\"}\n\n\
         {\"id\": 7, \"prompt\": \"Para petani di desa itu menanam padi dan jagung setiap musim\"}\n\
         {\"prompt\": \"Dia\"}\n",
    )
    .unwrap();
    let out = work.join("completions.jsonl");
    let model = dir.to_str().unwrap();
    let (p, o) = (prompts.to_str().unwrap(), out.to_str().unwrap());
    let base = ["--threads", "1", "generate", "--model", model, "--prompts", p, "--out", o, "--max-new-tokens", "12"];
    let (stdout, _) = indolm_ok(&base);
    assert!(stdout.contains("3 completions (greedy; 0 eos, 3 length, 0 stop_string), 36 new tokens"), "{stdout}");
    let read = || -> Vec<Value> {
        std::fs::read_to_string(&out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    let records = read();
    // The library's greedy completions, which the Llama test compares with transformers'.
    let lm = load_causal_lm(dir, Device::Cpu).unwrap();
    let ids = prompt_ids(&lm, prompts_file(), NEW_TOKENS);
    let want = generate(&lm, &ids, &greedy(dir, NEW_TOKENS), &mut |_| {}).unwrap();
    assert_eq!(records.len(), 3);
    for ((record, id), w) in records.iter().zip([json!("a"), json!(7), json!(4)]).zip(&want) {
        let keys: Vec<&String> = record.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["completion", "id", "prompt", "stop_reason", "tokens"], "{record}");
        assert_eq!(record["id"], id, "a missing id is the line number");
        assert_eq!(
            (&record["completion"], &record["tokens"], &record["stop_reason"]),
            (&json!(w.text), &json!(w.tokens()), &json!(w.stop.name()))
        );
    }
    assert_eq!(records[2]["prompt"], "Dia");
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.starts_with("{\"id\":\"a\",\"prompt\":"), "fields in the documented order: {text}");
    let left: Vec<String> =
        std::fs::read_dir(&work).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().to_string()).collect();
    assert_eq!(left.len(), 2, "no temporary file left: {left:?}");
    // A stop string from the second completion.
    let second = records[1]["completion"].as_str().unwrap().to_string();
    let stop: String = second.chars().skip(3).take(2).collect();
    let mut with_stop = base.to_vec();
    with_stop.extend(["--stop", stop.as_str()]);
    indolm_ok(&with_stop);
    let stopped = read();
    assert_eq!(stopped[1]["stop_reason"], "stop_string");
    assert_eq!(stopped[1]["completion"].as_str().unwrap(), &second[..second.find(&stop).unwrap()]);
    // Sampling with a seed: the same file twice.
    let mut sampled = base.to_vec();
    sampled.extend(["--temperature", "1.5", "--top-k", "0", "--seed", "5"]);
    let (stdout, _) = indolm_ok(&sampled);
    assert!(stdout.contains("sampled: temperature 1.5, top_k 0, top_p 1, seed 5"), "{stdout}");
    let first = std::fs::read_to_string(&out).unwrap();
    indolm_ok(&sampled);
    assert_eq!(first, std::fs::read_to_string(&out).unwrap());
    assert_ne!(first, text, "sampled, not greedy");
}

/// Bad prompt files and flags are refused with one line naming the file and line or the flag.
#[test]
fn bad_generation_input_is_refused_in_one_line() {
    let dir = fixture("llama");
    let work = scratch("generation-bad");
    let out = work.join("out.jsonl");
    let model = dir.to_str().unwrap();
    let fails = |prompts: &str, extra: &[&str]| -> String {
        let path = work.join("prompts.jsonl");
        std::fs::write(&path, prompts).unwrap();
        let mut args =
            vec!["generate", "--model", model, "--prompts", path.to_str().unwrap(), "--out", out.to_str().unwrap()];
        args.extend(extra);
        let err = indolm_fails(&args);
        assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
        err
    };
    let good = "{\"id\": 1, \"prompt\": \"Dia\"}\n";
    let cases: [(String, &[&str], &str); 12] = [
        (format!("{good}{{\"id\": 2, \"text\": \"Dia\"}}\n"), &[], "prompts.jsonl: line 2: no \"prompt\" field"),
        ("{\"id\": 1, \"prompt\": \n".into(), &[], "prompts.jsonl: line 1: not JSON"),
        ("{\"id\": 1, \"prompt\": 5}\n".into(), &[], "line 1: \"prompt\" is a number, not a string"),
        ("[\"Dia\"]\n".into(), &[], "line 1: a list where an object was expected"),
        ("\n\n".into(), &[], "no prompts: the file is empty or blank"),
        (format!("{good}\n{good}"), &[], "line 3: the id 1 is line 1's too"),
        ("{\"prompt\": \"\"}\n".into(), &[], "line 1: the prompt \"\" has no tokens"),
        (good.into(), &["--max-new-tokens", "0"], "--max-new-tokens: must be at least 1"),
        (good.into(), &["--max-new-tokens", "200"], "passes the model's 128 positions"),
        (good.into(), &["--top-p", "1.5"], "--top-p: must be between 0 and 1, not 1.5"),
        (good.into(), &["--temperature=-1"], "--temperature: must be 0 (greedy) or a positive number"),
        (good.into(), &["--stop", ""], "--stop: an empty stop string"),
    ];
    for (prompts, extra, expected) in &cases {
        let err = fails(prompts, extra);
        assert!(err.contains(expected), "expected {expected:?} in {err}");
    }
    assert!(!out.exists(), "nothing written");
    // Not a causal LM; no prompt file.
    let neox = scratch("generation-bad-model");
    std::fs::write(neox.join("config.json"), r#"{"model_type": "gpt_neox"}"#).unwrap();
    let path = work.join("prompts.jsonl");
    std::fs::write(&path, good).unwrap();
    let err = indolm_fails(&[
        "generate",
        "--model",
        neox.to_str().unwrap(),
        "--prompts",
        path.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(err.contains("`gpt_neox` is not a supported causal LM"), "{err}");
    let missing = work.join("nowhere.jsonl");
    let err = indolm_fails(&[
        "generate",
        "--model",
        model,
        "--prompts",
        missing.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(err.contains("nowhere.jsonl: file not found"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// Chat templates.

/// The chat templates of the paper's instruct models, verbatim (tests/fixtures/chat_templates/,
/// whose README says where each comes from): file stem and sha256.
const PAPER_TEMPLATES: [(&str, &str); 9] = [
    ("llama-2-7b-chat", "e8d5b5a546d3f19df16a5320c614fab05bdc4edd50e850f1afd947b503ea41cf"),
    ("llama-3.1-8b-instruct", "e10ca381b1ccc5cf9db52e371f3b6651576caee0a630b452e2816b2d404d4b65"),
    ("qwen2-7b-instruct", "793202280c0910ab26bc6eb57c8212c2417324c6d8c4efd0d10d59092ab3e3eb"),
    ("qwen2.5-7b-instruct", "cd8e9439f0570856fd70470bf8889ebd8b5d1107207f67a5efb46e342330527f"),
    ("qwen3-8b", "a55ee1b1660128b7098723e0abcd92caa0788061051c62d51cbe87d9cf1974d8"),
    ("qwen3.5-9b", "a4aee8afcf2e0711942cf848899be66016f8d14a889ff9ede07bca099c28f715"),
    ("gemma-2-9b-it", "ecd6ae513fe103f0eb62e8ab5bfa8d0fe45c1074fa398b089c93a7e70c15cfd6"),
    ("gemma-3-4b-it", "7de1c58e208eda46e9c7f86397df37ec49883aeece39fb961e0a6b24088dd3c4"),
    ("olmo-3-7b-instruct", "f5186d42d99c8a0445d37fd8a6c7ccf07fe3e24a29ce622d8bd245da9507b12b"),
];

/// Conversations every template renders: a system message and a question, a question alone, several
/// turns, an earlier answer with its reasoning in `<think>` and in `reasoning_content`, and text
/// with spaces around it and characters past ASCII.
const CONVERSATIONS: [&str; 6] = [
    r#"[{"role": "system", "content": "Kamu adalah asisten yang membantu."}, {"role": "user", "content": "Apa ibu kota Indonesia?"}]"#,
    r#"[{"role": "user", "content": "Sebutkan tiga pulau besar di Indonesia."}]"#,
    r#"[{"role": "system", "content": "Jawab singkat."}, {"role": "user", "content": "Apa ibu kota Indonesia?"}, {"role": "assistant", "content": "Jakarta."}, {"role": "user", "content": "Dan ibu kota Jawa Barat?"}]"#,
    r#"[{"role": "user", "content": "Berapa 2 + 2?"}, {"role": "assistant", "content": "<think>\nHitung dulu: 2 + 2 = 4.\n</think>\n\nJawabannya 4."}, {"role": "user", "content": "Kalau 3 + 3?"}]"#,
    r#"[{"role": "user", "content": "Berapa 2 + 2?"}, {"role": "assistant", "content": "Empat.", "reasoning_content": "2 + 2 = 4", "tool_calls": null}, {"role": "user", "content": "Kalau 3 + 3?"}]"#,
    r#"[{"role": "user", "content": "  “Gotong royong” artinya apa? 😀 \n"}]"#,
];

/// A function's JSON schema as `tools`: keys in no sorted order, nesting, text past ASCII.
const TOOLS: &str = r#"[{"type": "function", "function": {"name": "cari_cuaca", "description": "Cuaca hari ini di sebuah kota", "parameters": {"type": "object", "properties": {"kota": {"type": "string", "description": "Nama kota, mis. “Bandung”"}, "hari": {"type": "integer", "minimum": 0, "skala": 0.5}}, "required": ["kota"]}}}]"#;

/// tests/fixtures/chat_templates.
fn chat_templates_dir() -> PathBuf {
    root().join("tests/fixtures/chat_templates")
}

/// The fixture template `stem`.
fn chat_template_text(stem: &str) -> String {
    std::fs::read_to_string(chat_templates_dir().join(format!("{stem}.jinja"))).unwrap()
}

/// A folder with the Llama fixture's tokenizer (`<s>`, `</s>`, `<pad>`, `<unk>`) and `template` as
/// its chat template: in chat_template.jinja, or in tokenizer_config.json's `chat_template`.
fn chat_folder(name: &str, template: &str, in_config: bool) -> PathBuf {
    let dir = scratch(&format!("chat-{name}"));
    let llama = crate::decoders::llama();
    std::fs::copy(llama.join("tokenizer.json"), dir.join("tokenizer.json")).unwrap();
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(llama.join("tokenizer_config.json")).unwrap()).unwrap();
    if in_config {
        config["chat_template"] = json!(template);
    } else {
        std::fs::write(dir.join("chat_template.jinja"), template).unwrap();
    }
    std::fs::write(dir.join("tokenizer_config.json"), config.to_string()).unwrap();
    dir
}

/// transformers' renders of `conversations` (JSON lists of messages) with `kwargs` (a JSON
/// object): `{"rendered", "ids"}` or `{"error"}` each.
fn transformers_chat(dir: &Path, conversations: &[&str], kwargs: &str, name: &str) -> Vec<Value> {
    let work = scratch(&format!("chat-ref-{name}"));
    let (input, output) = (work.join("messages.json"), work.join("rendered.json"));
    std::fs::write(&input, format!("[{}]", conversations.join(",\n"))).unwrap();
    reference(&["chat-render", dir.to_str().unwrap(), input.to_str().unwrap(), output.to_str().unwrap(), kwargs]);
    let rendered: Value = serde_json::from_str(&std::fs::read_to_string(&output).unwrap()).unwrap();
    rendered.as_array().unwrap().clone()
}

/// indolm renders every conversation with `kwargs` as transformers does: the same text and the same
/// ids, or, where transformers' template raised an exception, an error with its message. Returns
/// indolm's renders (`Err`: the error).
fn chat_equals_transformers(
    name: &str,
    dir: &Path,
    conversations: &[&str],
    kwargs: &str,
) -> Vec<std::result::Result<String, String>> {
    let template = ChatTemplate::from_dir(dir).unwrap();
    let tokenizer = CausalTokenizer::from_dir(dir, None, None).unwrap();
    let template_kwargs = TemplateKwargs::from_json(kwargs).unwrap();
    let expected = transformers_chat(dir, conversations, kwargs, name);
    assert_eq!(expected.len(), conversations.len());
    let mut renders = Vec::new();
    for (i, (conversation, want)) in conversations.iter().zip(&expected).enumerate() {
        let messages = Messages::from_json(conversation).unwrap();
        let got = template.render(&messages, &template_kwargs).map_err(|e| e.to_string());
        match (&got, want.get("error")) {
            (Ok(text), None) => {
                assert_eq!(text, want["rendered"].as_str().unwrap(), "{name} {kwargs}: conversation {i}");
                let ids = chat::encode(&tokenizer, text).unwrap();
                assert_eq!(ids, ints(&want["ids"]), "{name} {kwargs}: conversation {i}'s ids");
            }
            (Err(err), Some(message)) => {
                let message = message.as_str().unwrap();
                assert!(err.ends_with(&format!("raised an exception: {message}")), "{name}: {err} vs {message}");
                assert_eq!(err.lines().count(), 1, "{err}");
            }
            _ => panic!("{name} {kwargs}: conversation {i}: indolm gives {got:?}, transformers {want}"),
        }
        renders.push(got);
    }
    renders
}

/// The paper template `stem` (the index in [`PAPER_TEMPLATES`]) is the file its README names
/// (sha256), and renders every conversation as transformers does: without kwargs, with the kwargs
/// its model reads (Qwen3 and Qwen3.5's `enable_thinking`, Llama 3.1's `date_string`) and, where
/// it writes them, with tools; from chat_template.jinja for even indexes, from
/// tokenizer_config.json for odd ones.
fn paper_template_equals_transformers(index: usize) {
    use sha2::{Digest, Sha256};
    let (stem, sha256) = PAPER_TEMPLATES[index];
    let template = chat_template_text(stem);
    assert_eq!(format!("{:x}", Sha256::digest(template.as_bytes())), sha256, "{stem}: not the file the README names");
    let dir = chat_folder(stem, &template, index % 2 == 1);
    let tools = format!(r#"{{"tools": {TOOLS}}}"#);
    let mut kwargs = vec!["{}"];
    match stem {
        "qwen3-8b" | "qwen3.5-9b" => kwargs.extend([r#"{"enable_thinking": false}"#, r#"{"enable_thinking": true}"#]),
        "llama-3.1-8b-instruct" => kwargs.push(r#"{"date_string": "17 Aug 2025"}"#),
        _ => {}
    }
    if template.contains("tools") {
        kwargs.push(&tools);
    }
    let mut renders = BTreeMap::new();
    for (k, kw) in kwargs.iter().enumerate() {
        let got = chat_equals_transformers(&format!("{stem}-{k}"), &dir, &CONVERSATIONS, kw);
        let ok = got.iter().filter(|r| r.is_ok()).count();
        assert!(ok >= 4, "{stem} {kw}: only {ok} conversations rendered: {got:?}");
        renders.insert(*kw, got);
    }
    if stem.starts_with("qwen3") {
        // enable_thinking passes through: false closes an empty think block after the generation
        // prompt; true, like leaving it out, does not.
        let last = |kw: &str| renders[kw][1].clone().unwrap();
        assert!(last(r#"{"enable_thinking": false}"#).ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
        assert!(!last(r#"{"enable_thinking": true}"#).ends_with("</think>\n\n"));
        assert_eq!(last("{}"), last(r#"{"enable_thinking": true}"#));
    }
    println!("{stem}: {} kwargs sets, e.g. {:?}", kwargs.len(), renders["{}"][0]);
}

macro_rules! paper_template_parity {
    ($($test:ident: $index:literal),* $(,)?) => {$(
        #[test]
        fn $test() {
            paper_template_equals_transformers($index);
        }
    )*};
}

paper_template_parity! {
    llama2_7b_chat_template_renders_as_transformers: 0,
    llama31_8b_instruct_template_renders_as_transformers: 1,
    qwen2_7b_instruct_template_renders_as_transformers: 2,
    qwen25_7b_instruct_template_renders_as_transformers: 3,
    qwen3_8b_template_renders_as_transformers: 4,
    qwen35_9b_template_renders_as_transformers: 5,
    gemma2_9b_it_template_renders_as_transformers: 6,
    gemma3_4b_it_template_renders_as_transformers: 7,
    olmo3_7b_instruct_template_renders_as_transformers: 8,
}

/// A template of our own using what chat templates use — Python's string and dict methods,
/// `tojson` with every argument by position and by name, namespaces, loop controls,
/// `loop.previtem`, macros, slices, tests, printed values of every type (`None`, `1e-05`, lists and
/// dicts as Python prints them), `{% generation %}`, `strftime_now`, the reasoning copied to
/// `thinking`, kwargs of every JSON type and tools — renders as transformers does, from either
/// file.
#[test]
fn jinja_features_render_as_transformers() {
    let template = chat_template_text("indolm-features");
    let tools = format!(r#"{{"tools": {TOOLS}}}"#);
    let kwargs = [
        "{}",
        r#"{"enable_thinking": false, "extra": {"b": [1, "dua", 2.5, 1e-7], "a": null, "c": true}}"#,
        tools.as_str(),
    ];
    for in_config in [false, true] {
        let dir = chat_folder("features", &template, in_config);
        for (k, kw) in kwargs.iter().enumerate() {
            let got = chat_equals_transformers(&format!("features-{k}"), &dir, &CONVERSATIONS, kw);
            assert!(got.iter().all(|r| r.is_ok()), "{got:?}");
        }
    }
}

/// Where the template comes from, as transformers' tokenizer finds it: chat_template.jinja over
/// tokenizer_config.json's (its Windows line ends read as Python reads them), a list of named
/// templates (`default`; `tool_use` with tools), additional_chat_templates/; the tokenizer's special
/// tokens and the model's own `*_token`s as variables. A folder without a template (with a
/// processor's chat_template.json, said so), named templates without `default` and a template
/// minijinja cannot parse are errors in one line naming the folder or the file.
#[test]
fn chat_templates_are_found_as_transformers_finds_them() {
    let conversations = [CONVERSATIONS[0], CONVERSATIONS[1]];
    let tools = format!(r#"{{"tools": {TOOLS}}}"#);
    let equal = |name: &str, dir: &Path, kwargs: &str| chat_equals_transformers(name, dir, &conversations, kwargs);
    // chat_template.jinja over tokenizer_config.json's; the model's own tokens as variables.
    let dir = chat_folder("both", "config: {{ messages[0].content }}", true);
    std::fs::write(
        dir.join("chat_template.jinja"),
        "file: {{ messages[-1].content }}\r\n{{ bos_token }}|{{ eos_token }}|{{ pad_token }}|{{ image_token }}|\
         {{ audio_token }}|{{ mask_token is defined }}\r\n",
    )
    .unwrap();
    let path = dir.join("tokenizer_config.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    config["image_token"] = json!("<pad>");
    config["extra_special_tokens"] = json!({"audio_token": "<unk>"});
    std::fs::write(&path, config.to_string()).unwrap();
    let got = equal("both", dir.as_path(), "{}");
    assert_eq!(
        got[1].as_deref(),
        Ok("file: Sebutkan tiga pulau besar di Indonesia.\n<s>|</s>|<pad>|<pad>|<unk>|False")
    );
    assert_eq!(ChatTemplate::from_dir(&dir).unwrap().source(), dir.join("chat_template.jinja"));
    // A list of named templates: default, and tool_use with tools.
    let named = json!([
        {"name": "default", "template": "default {{ messages | length }}"},
        {"name": "tool_use", "template": "tool_use {{ tools | length }} {{ tools[0].function.name }}"},
    ]);
    let dir = chat_folder("named", "", true);
    let path = dir.join("tokenizer_config.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    config["chat_template"] = named;
    std::fs::write(&path, config.to_string()).unwrap();
    assert_eq!(equal("named", dir.as_path(), "{}")[0].as_deref(), Ok("default 2"));
    assert_eq!(equal("named-tools", dir.as_path(), tools.as_str())[0].as_deref(), Ok("tool_use 1 cari_cuaca"));
    // chat_template.jinja with additional_chat_templates/tool_use.jinja.
    let dir = chat_folder("additional", "plain {{ messages | length }}", false);
    std::fs::create_dir(dir.join("additional_chat_templates")).unwrap();
    std::fs::write(dir.join("additional_chat_templates/tool_use.jinja"), "with {{ tools | length }} tool").unwrap();
    assert_eq!(equal("additional", dir.as_path(), "{}")[0].as_deref(), Ok("plain 2"));
    assert_eq!(equal("additional-tools", dir.as_path(), tools.as_str())[0].as_deref(), Ok("with 1 tool"));
    // Named templates without a default: transformers refuses too.
    let dir = chat_folder("no-default", "", true);
    let path = dir.join("tokenizer_config.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    config["chat_template"] = json!([{"name": "rag", "template": "rag"}]);
    std::fs::write(&path, config.to_string()).unwrap();
    let expected = transformers_chat(&dir, &conversations, "{}", "no-default");
    assert!(expected[0]["error"].as_str().unwrap().contains("no default"), "{}", expected[0]);
    let err = ChatTemplate::from_dir(&dir).unwrap().render(&Messages::user("Dia"), &TemplateKwargs::default());
    let err = err.unwrap_err().to_string();
    assert!(err.contains("1 chat templates (rag) and none named `default`"), "{err}");
    // No template; a processor's chat_template.json named; a template that does not parse.
    let dir = copy_dir(crate::decoders::llama(), "chat-none");
    let err = ChatTemplate::from_dir(&dir).err().unwrap().to_string();
    assert!(err.starts_with(&format!("{}: no chat template", dir.display())), "{err}");
    std::fs::write(dir.join("chat_template.json"), r#"{"chat_template": "x"}"#).unwrap();
    let err = ChatTemplate::from_dir(&dir).err().unwrap().to_string();
    assert!(err.contains("its chat_template.json is a processor's"), "{err}");
    let dir = chat_folder("broken", "{% if %}never closed", false);
    let err = ChatTemplate::from_dir(&dir).err().unwrap().to_string();
    assert!(err.contains("chat_template.jinja: not a chat template indolm can read: syntax error"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// `indolm generate --chat` on a copy of the Llama fixture whose tokenizer adds a BOS and whose
/// chat template (in tokenizer_config.json) is Llama 2's: a `"prompt"` line and a `"messages"`
/// line, `--system`, a `--template-kwarg`. Each record holds the line's prompt or messages (as
/// given, fields in their order) and the rendered text, which is transformers'; its ids, tokenized
/// without special tokens, start with the template's one BOS (the tokenizer's own would be a
/// second) and equal transformers'; the completions are the library's greedy ones of those ids.
#[test]
fn indolm_generate_chat_renders_with_the_model_template_end_to_end() {
    let dir = copy_dir(crate::decoders::llama(), "generation-chat-llama");
    reference(&["bos-template", dir.to_str().unwrap()]);
    let path = dir.join("tokenizer_config.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    config["chat_template"] = json!(chat_template_text("llama-2-7b-chat"));
    std::fs::write(&path, config.to_string()).unwrap();
    let work = scratch("generation-chat-cli");
    let prompts = work.join("prompts.jsonl");
    let turns = r#"[{"role": "user", "content": "Apa ibu kota Indonesia?"}, {"role": "assistant", "content": "Jakarta."}, {"role": "user", "content": "Dan Jawa Barat?"}]"#;
    std::fs::write(
        &prompts,
        format!("{{\"id\": \"p\", \"prompt\": \"Ibu kota Indonesia adalah\"}}\n\n{{\"id\": \"m\", \"messages\": {turns}}}\n"),
    )
    .unwrap();
    let out = work.join("completions.jsonl");
    let (m, p, o) = (dir.to_str().unwrap(), prompts.to_str().unwrap(), out.to_str().unwrap());
    let system = "Jawab singkat.";
    let (stdout, stderr) = indolm_ok(&[
        "--threads",
        "1",
        "generate",
        "--model",
        m,
        "--prompts",
        p,
        "--out",
        o,
        "--max-new-tokens",
        "12",
        "--chat",
        "--system",
        system,
        "--template-kwarg",
        "enable_thinking=false",
    ]);
    assert!(stdout.contains("2 completions (greedy;"), "{stdout}");
    assert!(stderr.contains("rendered with the chat template of"), "{stderr}");
    let text = std::fs::read_to_string(&out).unwrap();
    let records: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(records.len(), 2);
    let keys = |r: &Value| r.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&records[0]), ["completion", "id", "prompt", "rendered", "stop_reason", "tokens"]);
    assert_eq!(keys(&records[1]), ["completion", "id", "messages", "rendered", "stop_reason", "tokens"]);
    assert!(
        text.starts_with(r#"{"id":"p","prompt":"Ibu kota Indonesia adalah","rendered":"<s>[INST] <<SYS>>\nJawab"#),
        "{text}"
    );
    assert!(text.contains(r#""messages":[{"role":"user","content":"Apa ibu kota Indonesia?"},"#), "{text}");
    // transformers' renders of the same conversations, the system message first.
    let with_system = |messages: &str| format!(r#"[{{"role": "system", "content": "{system}"}}, {}"#, &messages[1..]);
    let first = with_system(r#"[{"role": "user", "content": "Ibu kota Indonesia adalah"}]"#);
    let second = with_system(turns);
    let expected = transformers_chat(&dir, &[first.as_str(), second.as_str()], "{}", "cli");
    let lm = load_causal_lm(&dir, Device::Cpu).unwrap();
    let bos = lm.tokenizer.bos.as_ref().unwrap().id;
    let mut ids = Vec::new();
    for (record, want) in records.iter().zip(&expected) {
        let rendered = record["rendered"].as_str().unwrap();
        assert_eq!(rendered, want["rendered"].as_str().unwrap());
        let chat_ids = chat::encode(&lm.tokenizer, rendered).unwrap();
        assert_eq!(chat_ids, ints(&want["ids"]));
        assert_eq!((chat_ids[0], chat_ids[1] == bos), (bos, false), "the template's BOS, once");
        assert_eq!(
            lm.tokenizer.encode_with_special_tokens(rendered).unwrap()[..2],
            [bos, bos],
            "tokenizer(text) adds one"
        );
        ids.push(chat_ids);
    }
    let want = generate(&lm, &ids, &greedy(&dir, NEW_TOKENS), &mut |_| {}).unwrap();
    for (record, w) in records.iter().zip(&want) {
        assert_eq!(
            (&record["completion"], &record["tokens"], &record["stop_reason"]),
            (&json!(w.text), &json!(w.tokens()), &json!(w.stop.name()))
        );
    }
}

/// Chat input that cannot be rendered is refused in one line naming the file and line, the flag or
/// the folder, before the model loads and with nothing written: the template's raise_exception
/// (Gemma 2 refusing a system message, roles that do not alternate) with its message, malformed
/// messages, `--system` beside a system message of the line's own, template kwargs that are not
/// JSON or name a parameter of apply_chat_template, `--system` or `--template-kwarg` without
/// `--chat`, and a model folder without a chat template.
#[test]
fn bad_chat_input_is_refused_in_one_line() {
    let dir = copy_dir(crate::decoders::llama(), "generation-chat-gemma");
    std::fs::write(dir.join("chat_template.jinja"), chat_template_text("gemma-2-9b-it")).unwrap();
    let work = scratch("generation-chat-bad");
    let out = work.join("out.jsonl");
    let fails = |model: &Path, prompts: &str, extra: &[&str]| -> String {
        let path = work.join("prompts.jsonl");
        std::fs::write(&path, prompts).unwrap();
        let mut args = vec![
            "generate",
            "--model",
            model.to_str().unwrap(),
            "--prompts",
            path.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend(extra);
        let err = indolm_fails(&args);
        assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
        err
    };
    let good = "{\"id\": 1, \"prompt\": \"Dia\"}\n";
    let system_line =
        "{\"messages\": [{\"role\": \"system\", \"content\": \"x\"}, {\"role\": \"user\", \"content\": \"Dia\"}]}\n";
    let chat: &[&str] = &["--chat"];
    let cases: [(&str, &[&str], &str); 15] = [
        (good, &["--chat", "--system", "Jawab."], "line 1: "),
        (system_line, chat, "chat_template.jinja: the chat template raised an exception: System role not supported"),
        (
            "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"user\", \"content\": \"b\"}]}\n",
            chat,
            "raised an exception: Conversation roles must alternate user/assistant/user/assistant/...",
        ),
        ("{\"messages\": []}\n", chat, "prompts.jsonl: line 1: \"messages\" is an empty list"),
        ("{\"messages\": \"Dia\"}\n", chat, "line 1: \"messages\" is a string, not a list of messages"),
        ("{\"messages\": [{\"content\": \"Dia\"}]}\n", chat, "line 1: message 1 has no \"role\" string"),
        ("{\"messages\": [\"Dia\"]}\n", chat, "line 1: message 1 is a string, not an object"),
        ("{\"messages\": [{\"role\": \"user\"}], \"prompt\": \"Dia\"}\n", chat, "both \"messages\" and \"prompt\""),
        ("{\"text\": \"Dia\"}\n", chat, "line 1: no \"messages\" or \"prompt\" field"),
        (system_line, &["--chat", "--system", "y"], "line 1: the conversation has a system message of its own"),
        (
            good,
            &["--chat", "--template-kwarg", "enable_thinking=False"],
            "--template-kwarg: the value of `enable_thinking`, \"False\", is not JSON",
        ),
        (
            good,
            &["--chat", "--template-kwarg", "enable_thinking"],
            "--template-kwarg: \"enable_thinking\" is not KEY=VALUE",
        ),
        (
            good,
            &["--chat", "--template-kwarg", "add_generation_prompt=false"],
            "`add_generation_prompt` is not a template variable",
        ),
        (good, &["--system", "x"], "--system: a system message needs --chat"),
        (good, &["--template-kwarg", "a=1"], "--template-kwarg: template variables need --chat"),
    ];
    for (prompts, extra, expected) in &cases {
        let err = fails(dir.as_path(), prompts, extra);
        assert!(err.contains(expected), "expected {expected:?} in {err}");
    }
    let err = fails(dir.as_path(), good, &["--chat", "--system", "Jawab."]);
    assert!(err.ends_with("the chat template raised an exception: System role not supported\n"), "{err}");
    let err = fails(dir.as_path(), good, &["--chat", "--template-kwarg", r#"tools={"name": "f"}"#]);
    assert!(err.contains("`tools` is a list of JSON schemas of functions, not an object"), "{err}");
    // The Llama fixture has no chat template.
    let err = fails(crate::decoders::llama(), good, chat);
    assert!(err.contains(&format!("{}: no chat template", crate::decoders::llama().display())), "{err}");
    assert!(!out.exists(), "nothing written");
}
