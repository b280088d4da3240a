//! What indolm reads (#37): a path a file names stays inside that file's folder (a shard index,
//! `latest`, a checkpoint's checksum list); a model that gives NaN or infinite scores, or a
//! configuration that would, is refused naming the sentence or the field; an empty input is
//! refused rather than scored as nothing; a long line is quoted short, with its line number; a
//! command that needs a masked LM says so of a causal one.
use super::s;
use crate::common::*;
use indolm_torch::model::weights;
use std::path::Path;
use tch::Tensor;

/// A copy of the reference model in `dir` whose weights are one shard, moved to `real`, named by
/// an index whose `weight_map` gives every tensor `shard`.
fn sharded(dir: &Path, shard: &str, real: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for entry in std::fs::read_dir(reference_model()).unwrap().flatten() {
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
        }
    }
    let tensors = weights::read_file(&dir.join("model.safetensors")).unwrap();
    std::fs::rename(dir.join("model.safetensors"), real).unwrap();
    let map: serde_json::Map<String, serde_json::Value> =
        tensors.keys().map(|k| (k.clone(), serde_json::Value::from(shard))).collect();
    let index = serde_json::json!({"metadata": {}, "weight_map": map});
    std::fs::write(dir.join("model.safetensors.index.json"), index.to_string()).unwrap();
}

#[test]
fn a_shard_index_names_only_files_beside_it() {
    let work = scratch("shard-escape");
    // `../weights.safetensors`: a real safetensors file outside the model folder.
    let (dir, outside) = (work.join("model"), work.join("weights.safetensors"));
    sharded(&dir, "../weights.safetensors", &outside);
    let index = dir.join("model.safetensors.index.json");
    let text = std::fs::read_to_string(&index).unwrap();
    let err = indolm_fails(&["info", "--model", s(&dir)]);
    assert!(
        err.contains("weight_map.") && err.contains("\"../weights.safetensors\" is not a plain file name"),
        "{err}"
    );
    // An absolute path, and a file of the system.
    for shard in ["/etc/passwd", s(&outside)] {
        std::fs::write(&index, text.replace("../weights.safetensors", shard)).unwrap();
        let err = indolm_fails(&["info", "--model", s(&dir)]);
        assert!(err.contains("is an absolute path"), "{err}");
    }
    // A shard beside the index that is itself a symlink (HF's cache) is read as usual.
    let cached = work.join("cached");
    sharded(&cached, "model-00001-of-00001.safetensors", &work.join("blob"));
    std::os::unix::fs::symlink(work.join("blob"), cached.join("model-00001-of-00001.safetensors")).unwrap();
    indolm_ok(&["info", "--model", s(&cached)]);
}

#[test]
fn latest_and_a_checksum_list_name_only_the_runs_own_folders() {
    let work = scratch("pointer-escape");
    let (run, checkpoint) = super::outputs::fake_run(&work);
    let layout = indolm_core::run::RunLayout::new(&run);
    assert_eq!(layout.latest_dir(), Some(checkpoint.clone()));
    for pointer in ["../../elsewhere", "/etc", "step-60/../../x", "step-060"] {
        std::fs::write(run.join("latest"), pointer).unwrap();
        assert_eq!(layout.latest_dir(), None, "`latest` = {pointer:?} was followed");
    }
    std::fs::write(
        checkpoint.join("trainer_state.json"),
        r#"{"step": 60, "seed": 1, "nonfinite_skipped": 0, "rng": "", "recipe_fingerprint": {}, "checksums": {"../../../../../etc/passwd": "0"}, "last_loss": null}"#,
    )
    .unwrap();
    let err = indolm_core::run::checkpoints::load_state(&checkpoint).unwrap_err().to_string();
    assert!(err.contains("field `checksums`") && err.contains("not a plain file name"), "{err}");
}

/// A copy of the reference model with every MLM-head bias NaN: every score is NaN.
fn nan_model() -> std::path::PathBuf {
    let dir = copy_dir(reference_model(), "nan-model");
    let path = dir.join("model.safetensors");
    let mut tensors: Vec<(String, Tensor)> = weights::read_file(&path).unwrap().into_iter().collect();
    for (name, t) in tensors.iter_mut() {
        if name == "cls.predictions.bias" {
            *t = t.full_like(f64::NAN);
        }
    }
    weights::write_file(&path, &tensors).unwrap();
    dir
}

#[test]
fn non_finite_scores_and_impossible_configurations_are_refused_naming_what() {
    let work = scratch("non-finite");
    let model = nan_model();
    let pairs = root().join("tests/fixtures/indobias");
    let out = work.join("eval");
    let err = indolm_fails(&["eval", "bias", "--model", s(&model), "--pairs", s(&pairs), "--out", s(&out)]);
    assert!(
        err.contains("bias scoring, pair 0 of")
            && err.contains("non-finite score (NaN)")
            && err.contains("the sentence \""),
        "{err}"
    );
    assert!(!out.join("bias.json").exists(), "an evaluation of NaN scores was written");
    let text = work.join("sentences.txt");
    std::fs::write(&text, "Ibu memasak di dapur.\n\nAyah membaca koran.\n").unwrap();
    let err = indolm_fails(&["eval", "pll", "--model", s(&model), "--text", s(&text)]);
    assert!(err.contains("line 1: ") && err.contains("non-finite score"), "{err}");
    let data = root().join("tests/fixtures/indommlu/indoMMLU-fixture.csv");
    let err = indolm_fails(&["eval", "indommlu", "--model", s(&model), "--data", s(&data)]);
    assert!(err.contains("IndoMMLU row ") && err.contains("non-finite score"), "{err}");

    // Values no model can have: RoPE's base, a norm's epsilon.
    let llama = copy_dir(crate::decoders::llama(), "rope-negative");
    let config_path = llama.join("config.json");
    let mut config: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&config_path).unwrap()).unwrap();
    config["rope_parameters"]["rope_theta"] = (-1.0).into();
    std::fs::write(&config_path, config.to_string()).unwrap();
    let err = indolm_fails(&["eval", "pll", "--model", s(&llama), "--text", s(&text)]);
    assert!(err.contains("field `rope_parameters.rope_theta`: expected a positive number, found -1"), "{err}");
    let bert = copy_dir(reference_model(), "eps-zero");
    let config_path = bert.join("config.json");
    let mut config: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&config_path).unwrap()).unwrap();
    config["layer_norm_eps"] = 0.0.into();
    std::fs::write(&config_path, config.to_string()).unwrap();
    let err = indolm_fails(&["info", "--model", s(&bert)]);
    assert!(err.contains("field `layer_norm_eps`: expected a positive number, found 0"), "{err}");
}

#[test]
fn empty_inputs_long_lines_and_the_wrong_kind_of_model_get_one_clear_line() {
    let work = scratch("small-inputs");
    let model = s(reference_model());
    // An empty text file, an IndoMMLU file of demonstrations only: nothing scored is an error.
    let empty = work.join("empty.txt");
    std::fs::write(&empty, "\n  \n").unwrap();
    let err = indolm_fails(&["eval", "pll", "--model", model, "--text", s(&empty)]);
    assert!(err.contains("no sentence to score"), "{err}");
    let err = indolm_fails(&["eval", "rouge", "--pred", s(&empty), "--ref", s(&empty)]);
    assert!(err.contains("no summary to score"), "{err}");
    let fixture = std::fs::read_to_string(root().join("tests/fixtures/indommlu/indoMMLU-fixture.csv")).unwrap();
    let header_only = work.join("header.csv");
    std::fs::write(&header_only, fixture.lines().next().unwrap()).unwrap();
    let err = indolm_fails(&["eval", "indommlu", "--model", model, "--data", s(&header_only)]);
    assert!(err.contains("no question to score (0 row(s)"), "{err}");

    // A 100,000-character line: quoted short, with its line number.
    let long = work.join("long.txt");
    std::fs::write(&long, format!("Kalimat pendek.\n\n{}\n", "kata ".repeat(20_000))).unwrap();
    let err = indolm_fails(&["eval", "pll", "--model", model, "--text", s(&long)]);
    assert!(err.contains("line 3: ") && err.contains("(100000 characters)"), "{err}");
    assert!(err.len() < 600, "the error quotes the whole line ({} bytes)", err.len());

    // A causal LM given to a command that needs a masked LM.
    let llama = s(crate::decoders::llama());
    let err = indolm_fails(&["fill-mask", "--model", llama, "--text", "Saya [MASK] nasi."]);
    assert!(err.contains("field `model_type`: `llama` is a causal LM"), "{err}");
    let t5 = copy_dir(reference_model(), "t5-config");
    let config = std::fs::read_to_string(t5.join("config.json")).unwrap().replace("\"bert\"", "\"t5\"");
    std::fs::write(t5.join("config.json"), config).unwrap();
    let err = indolm_fails(&["info", "--model", s(&t5)]);
    assert!(err.contains("`t5` is not a supported masked LM"), "{err}");
}
