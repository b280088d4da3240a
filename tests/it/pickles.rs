//! PyTorch's pickled weight files (`pytorch_model.bin`) as published checkpoints ship them, read
//! without executing anything (`src/model/torch_file.rs`): a tiny BERT and a tiny Llama saved by
//! torch in its zip layout (what transformers 4's `save_pretrained(safe_serialization=False)`
//! wrote) and in its legacy layout score exactly as their safetensors twins; `indolm convert`
//! writes the same tensors as safetensors; a pickle that would run a shell command is refused by
//! the name of its global and runs nothing.
use crate::common::*;
use std::path::Path;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `indolm eval pll --json` of `model` on two sentences.
fn pll(model: &Path, text: &Path) -> String {
    indolm_ok(&["--device", "cpu", "eval", "pll", "--model", s(model), "--text", s(text), "--json"]).0
}

#[test]
fn pytorch_bins_score_as_their_safetensors_twins_and_a_pickled_command_is_refused() {
    let work = scratch("pickles");
    let text = work.join("sentences.txt");
    std::fs::write(&text, "Saya makan nasi goreng di pasar.\nIbu pergi ke kantor pagi ini.\n").unwrap();

    let llama = work.join("llama");
    reference(&["make-decoder", "llama", s(&llama)]);
    for (name, model) in [("bert", reference_model()), ("llama", llama.as_path())] {
        let expected = pll(model, &text);
        for layout in ["zip", "legacy"] {
            let bin = work.join(format!("{name}-{layout}"));
            let saved: serde_json::Value =
                serde_json::from_str(reference(&["save-bin", s(model), s(&bin), layout]).trim()).unwrap();
            assert_eq!(saved["zip"], layout == "zip", "{name} {layout}: {saved}");
            assert!(!bin.join("model.safetensors").exists());
            assert_eq!(pll(&bin, &text), expected, "{name} saved by torch ({layout}) scores otherwise");
        }
        // `convert`: one model.safetensors with the same tensors, beside the same side files.
        let converted = work.join(format!("{name}-converted"));
        let (stdout, _) = indolm_ok(&["convert", s(&work.join(format!("{name}-legacy"))), s(&converted)]);
        assert!(stdout.contains("from pytorch_model.bin") && stdout.contains("config.json"), "{stdout}");
        assert!(converted.join("config.json").exists() && !converted.join("pytorch_model.bin").exists());
        assert_eq!(pll(&converted, &text), expected, "{name} converted scores otherwise");
        // The pickled file's tensors are the safetensors twin's, bit for bit (plus the tied copies
        // a state dict holds), and the converted file's are the pickled file's.
        let read = |dir: &Path| indolm::model::weights::read_model_weights(dir).unwrap().1;
        let (original, pickled) = (read(model), read(&work.join(format!("{name}-legacy"))));
        let written = indolm::model::weights::read_file(&converted.join("model.safetensors")).unwrap();
        for (tensor, t) in &original {
            assert!(t.equal(&pickled[tensor]) && t.kind() == pickled[tensor].kind(), "{name} {tensor}");
        }
        assert_eq!(pickled.keys().collect::<Vec<_>>(), written.keys().collect::<Vec<_>>(), "{name}");
        for (tensor, t) in &pickled {
            assert!(t.equal(&written[tensor]) && t.kind() == written[tensor].kind(), "{name} {tensor}");
        }
    }

    // A pickle whose unpickling would run `touch MARKER`: refused by name, nothing run.
    let evil = work.join("evil");
    let marker = work.join("MARKER");
    reference(&["evil-bin", s(reference_model()), s(&evil), s(&marker)]);
    let err = indolm_fails(&["--device", "cpu", "eval", "pll", "--model", s(&evil), "--text", s(&text)]);
    assert!(err.contains("pytorch_model.bin") && err.contains("`posix.system`") && err.lines().count() == 1, "{err}");
    let err = indolm_fails(&["convert", s(&evil), s(&work.join("evil-converted"))]);
    assert!(err.contains("`posix.system`"), "{err}");
    assert!(!marker.exists(), "the pickle's command ran");
}
