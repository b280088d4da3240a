//! Bad input gives one clear error message (naming the file, field or tensor, expected vs
//! found) and exit code 1 — never a panic.
use crate::common::*;
use indolm_torch::model::weights;
use tch::Tensor;

fn s(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn missing_directory_and_missing_config() {
    let err = indolm_fails(&["info", "--model", "/nonexistent/model"]);
    assert!(err.contains("/nonexistent/model") && err.contains("not found"), "{err}");
    let dir = copy_dir(reference_model(), "no-config");
    std::fs::remove_file(dir.join("config.json")).unwrap();
    let err = indolm_fails(&["info", "--model", s(&dir)]);
    assert!(err.contains("config.json: file not found"), "{err}");
}

#[test]
fn missing_weights_and_pytorch_bin_only() {
    let dir = copy_dir(reference_model(), "no-weights");
    std::fs::remove_file(dir.join("model.safetensors")).unwrap();
    let err = indolm_fails(&["info", "--model", s(&dir)]);
    assert!(err.contains("model.safetensors: file not found"), "{err}");
    std::fs::write(dir.join("pytorch_model.bin"), b"not really a pickle").unwrap();
    let err = indolm_fails(&["info", "--model", s(&dir)]);
    assert!(err.contains("pytorch_model.bin") && err.contains("not a torch.save file"), "{err}");
}

#[test]
fn missing_tokenizer() {
    let dir = copy_dir(reference_model(), "no-tokenizer");
    std::fs::remove_file(dir.join("vocab.txt")).unwrap();
    std::fs::remove_file(dir.join("tokenizer.json")).unwrap();
    let err = indolm_fails(&["info", "--model", s(&dir)]);
    assert!(err.contains("vocab.txt: file not found") && err.contains("tokenizer.json"), "{err}");
}

#[test]
fn wrong_tensor_shape_names_the_tensor() {
    let dir = copy_dir(reference_model(), "bad-shape");
    let mut tensors: Vec<(String, Tensor)> =
        weights::read_file(&dir.join("model.safetensors")).unwrap().into_iter().collect();
    for (name, t) in tensors.iter_mut() {
        if name == "bert.encoder.layer.1.intermediate.dense.weight" {
            *t = Tensor::zeros([100, 96], (tch::Kind::Float, tch::Device::Cpu));
        }
    }
    weights::write_file(&dir.join("model.safetensors"), &tensors).unwrap();
    let err = indolm_fails(&["info", "--model", s(&dir)]);
    assert!(
        err.contains("`bert.encoder.layer.1.intermediate.dense.weight` has shape [100, 96], expected [200, 96]"),
        "{err}"
    );
}

fn edit_config(name: &str, edit: impl FnOnce(&mut serde_json::Value)) -> std::path::PathBuf {
    let dir = copy_dir(reference_model(), name);
    let path = dir.join("config.json");
    let mut config: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut config);
    std::fs::write(&path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
    dir
}

#[test]
fn unknown_activation() {
    let dir = edit_config("bad-act", |c| c["hidden_act"] = "gelu_quick_and_dirty".into());
    let err = indolm_fails(&["info", "--model", s(&dir)]);
    assert!(err.contains("config.json: field `hidden_act`: unknown activation \"gelu_quick_and_dirty\""), "{err}");
}

#[test]
fn vocab_config_mismatch() {
    let dir = edit_config("bad-vocab", |c| c["vocab_size"] = 500.into());
    let err = indolm_fails(&["info", "--model", s(&dir)]);
    assert!(err.contains("vocab_size") && err.contains("1000 tokens") && err.contains("vocab_size is 500"), "{err}");
}

#[test]
fn invalid_json_reports_line_and_column() {
    let dir = copy_dir(reference_model(), "bad-json");
    std::fs::write(dir.join("config.json"), "{\n  \"vocab_size\": 1000,\n  \"hidden_size\": ,\n}").unwrap();
    let err = indolm_fails(&["info", "--model", s(&dir)]);
    assert!(err.contains("config.json:3:"), "{err}");
}

#[test]
fn bad_heads_and_missing_field() {
    let dir = edit_config("bad-heads", |c| c["num_attention_heads"] = 7.into());
    let err = indolm_fails(&["info", "--model", s(&dir)]);
    assert!(err.contains("num_attention_heads") && err.contains("not divisible"), "{err}");
    let dir = edit_config("no-field", |c| {
        c.as_object_mut().unwrap().remove("hidden_size");
    });
    let err = indolm_fails(&["info", "--model", s(&dir)]);
    assert!(err.contains("missing field `hidden_size`"), "{err}");
}

#[test]
fn encoder_only_checkpoint_loads_with_a_note() {
    let dir = copy_dir(reference_model(), "encoder-only");
    let tensors: Vec<(String, Tensor)> = weights::read_file(&dir.join("model.safetensors"))
        .unwrap()
        .into_iter()
        .filter(|(n, _)| !n.starts_with("cls."))
        .map(|(n, t)| (n.strip_prefix("bert.").unwrap().to_string(), t))
        .collect();
    weights::write_file(&dir.join("model.safetensors"), &tensors).unwrap();
    let (stdout, stderr) = indolm_ok(&["info", "--model", s(&dir)]);
    assert!(stdout.contains("layers        3"));
    // The first names in order, and how many in all.
    assert!(
        stderr.contains("note: no MLM head in the checkpoint")
            && stderr.contains("[cls.predictions.bias, cls.predictions.transform.LayerNorm.bias")
            && stderr.contains("5 tensors in all"),
        "{stderr}"
    );
}

#[test]
fn truncated_weights_file() {
    let dir = copy_dir(reference_model(), "truncated");
    let path = dir.join("model.safetensors");
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let err = indolm_fails(&["info", "--model", s(&dir)]);
    assert!(err.contains("model.safetensors: not a valid safetensors file"), "{err}");
}

#[test]
fn bad_device_and_existing_output() {
    let err = indolm_fails(&["--device", "tpu", "fill-mask", "--model", s(reference_model()), "--text", "a [MASK]"]);
    assert!(err.contains("--device") && err.contains("\"tpu\""), "{err}");
    if !tch::Cuda::is_available() {
        let err =
            indolm_fails(&["--device", "cuda", "fill-mask", "--model", s(reference_model()), "--text", "a [MASK]"]);
        assert!(err.contains("0 CUDA device"), "{err}");
    }
    let out = scratch("existing-out");
    std::fs::write(out.join("keep.txt"), "x").unwrap();
    let err = indolm_fails(&["export-hf", s(reference_model()), s(&out)]);
    assert!(err.contains("not empty") && err.contains("--overwrite"), "{err}");
    assert!(out.join("keep.txt").exists());
    let err = indolm_fails(&["fill-mask", "--model", s(reference_model()), "--text", "tanpa topeng"]);
    assert!(err.contains("no [MASK]"), "{err}");
}

/// A reader that goes away before indolm writes (`indolm eval pll … | head -1`) ends the command
/// quietly: exit 0 and no panic.
#[test]
fn a_closed_pipe_ends_the_command_quietly() {
    let model = reference_model();
    let text = scratch("closed-pipe").join("sentences.txt");
    std::fs::write(&text, "saya makan nasi di rumah.\n".repeat(40)).unwrap();
    let commands: [&[&str]; 4] = [
        &["eval", "pll", "--model", s(model), "--text", s(&text)],
        &["eval", "pll", "--model", s(model), "--text", s(&text), "--json"],
        &["info", "--model", s(model)],
        &["tokenize", "--tokenizer", s(model), "--text", "saya makan nasi"],
    ];
    for args in commands {
        indolm_into_closed_pipe(args);
    }
}

/// A text longer than the model's positions is refused with the limit named, before torch sees it.
#[test]
fn fill_mask_names_the_length_limit() {
    let text = format!("{} [MASK] nasi.", "saya makan ".repeat(400));
    let err = indolm_fails(&["fill-mask", "--model", s(reference_model()), "--text", &text]);
    assert!(
        err.contains("--text") && err.contains("max_position_embeddings") && err.contains("takes at most"),
        "{err}"
    );
}

/// A cut-short `vocab.txt`: beside a `tokenizer.json` it must agree with it (HF's slow and fast
/// tokenizers read one each); alone, and smaller than the embedding, it loads with a note.
#[test]
fn a_cut_short_vocab_txt_is_refused_or_noted() {
    let dir = copy_dir(reference_model(), "short-vocab");
    let vocab = std::fs::read_to_string(dir.join("vocab.txt")).unwrap();
    let half: String = vocab.lines().take(600).map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.join("vocab.txt"), &half).unwrap();
    let err = indolm_fails(&["info", "--model", s(&dir)]);
    assert!(err.contains("vocab.txt: 600 tokens, but tokenizer.json beside it has 1000"), "{err}");
    std::fs::remove_file(dir.join("tokenizer.json")).unwrap();
    let (_, stderr) = indolm_ok(&["info", "--model", s(&dir)]);
    assert!(
        stderr.contains("has 600 tokens but the model's embedding has 1000 rows") && stderr.contains("cut short"),
        "{stderr}"
    );
}

/// The fork server the suite runs `indolm` in (`indolm()`, `src/cli/fork_server.rs`) answers as
/// a fresh process does: the same exit status, stdout and stderr for a success, a refusal, a
/// usage error and a help page, with the environment and working directory of the caller.
#[test]
fn the_suites_fork_server_answers_as_a_fresh_process() {
    let dir = scratch("fork-server");
    std::fs::write(dir.join("r.toml"), "kind = \"pretrain\"\nname = 1\n").unwrap();
    let recipe = dir.join("r.toml");
    let cases: [&[&str]; 5] = [
        &["--version"],
        &["recipe", "check", s(&recipe)],
        &["recipe", "check", "no-such-recipe.toml"],
        &["--bogus"],
        &["eval", "bias", "-h"],
    ];
    for args in cases {
        let forked = indolm(args);
        let fresh = std::process::Command::new(env!("CARGO_BIN_EXE_indolm")).args(args).output().unwrap();
        assert_eq!(forked.status.code(), fresh.status.code(), "indolm {args:?}");
        assert_eq!(String::from_utf8_lossy(&forked.stdout), String::from_utf8_lossy(&fresh.stdout), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&forked.stderr), String::from_utf8_lossy(&fresh.stderr), "{args:?}");
    }
}
