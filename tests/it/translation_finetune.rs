//! `indolm finetune translation` on a tiny random mBART built with transformers' own class
//! (`make-mt-model`: a BPE tokenizer trained on NusaX-MT's training split, language tokens
//! `[ind]` … `[sun]`): a direction learns (validation loss and SacreBLEU over the epochs), a run
//! stopped at a checkpoint and resumed ends bit-exactly where the uninterrupted run ends,
//! transformers' `generate` on the selected model gives indolm's test translations word for word,
//! two Gloo ranks train as one process does, and bad recipes are refused naming the field.
use crate::common::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The tiny mBART and its tokenizer, built once.
fn tiny_mt_model() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = scratch("tiny-mt-model");
        let train = test_data().join("nusax/mt/train.csv");
        reference(&["make-mt-model", dir.to_str().unwrap(), train.to_str().unwrap()]);
        dir
    })
}

/// A NusaX folder with the carried training and validation splits, the validation split also
/// standing in as the test split (tests/data does not carry NusaX-MT's test split).
fn corpus() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = scratch("nusax-mt-corpus");
        let mt = root.join("mt");
        std::fs::create_dir_all(&mt).unwrap();
        let data = test_data().join("nusax/mt");
        std::fs::copy(data.join("train.csv"), mt.join("train.csv")).unwrap();
        std::fs::copy(data.join("valid.csv"), mt.join("valid.csv")).unwrap();
        std::fs::copy(data.join("valid.csv"), mt.join("test.csv")).unwrap();
        root
    })
}

/// A recipe training `direction` for `epochs` (lr 1e-3 decayed ×0.98 a epoch, batch 16, clip
/// 10, as Table 11's settings shaped for a tiny model), `extra` appended.
fn write_recipe(dir: &Path, name: &str, direction: &str, epochs: u64, extra: &str) -> PathBuf {
    let (from, to) = direction.split_once('-').unwrap();
    let text = format!(
        "kind = \"translation\"\nname = \"{name}\"\nseed = 1\noutput_dir = \"{out}\"\ninit = \"{init}\"\n[data]\nroot = \"{root}\"\ndirections = [\"{direction}\"]\nmax_len = 64\n[model.language_tokens]\n{from} = \"[{from}]\"\n{to} = \"[{to}]\"\n[optimizer]\nlr = 1e-3\nbatch_size = 16\nmax_epochs = {epochs}\nschedule = \"epoch-decay\"\ngamma = 0.98\nweight_decay = 0.0\neps = 1e-8\ngrad_clip = 10.0\n[checkpoint]\nevery = 64\n[logging]\ntensorboard = \"{runs}\"\nevery = 16\n{extra}",
        out = dir.join("out").display(),
        runs = dir.join("runs").display(),
        init = tiny_mt_model().display(),
        root = corpus().display(),
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// The validation figures of a run's output: (step, SacreBLEU, loss) per evaluation.
fn valid_curve(stdout: &str) -> Vec<(u64, f64, f64)> {
    stdout
        .lines()
        .filter_map(|l| {
            let rest = l.split_once(": step ")?.1;
            let step = rest.split_whitespace().next()?.parse().ok()?;
            let bleu = rest.split_once("(teacher-forced) ")?.1.split(',').next()?.parse().ok()?;
            let loss = rest.split_once("loss ")?.1.trim().parse().ok()?;
            Some((step, bleu, loss))
        })
        .collect()
}

#[test]
fn a_direction_learns_resumes_bit_exactly_and_transformers_translates_as_indolm_does() {
    let dir = scratch("mt-finetune");
    let epochs = 8;
    let recipe = write_recipe(&dir, "full", "ind-sun", epochs, "");
    let (stdout, _) = indolm_ok(&["finetune", "translation", recipe.to_str().unwrap()]);
    println!("{stdout}");
    let curve = valid_curve(&stdout);
    assert_eq!(curve.len(), epochs as usize, "one validation an epoch: {curve:?}");
    let (first, last) = (curve[0], curve[curve.len() - 1]);
    assert!(last.2 < first.2 - 0.5, "validation loss did not fall: {curve:?}");
    let best = curve.iter().map(|c| c.1).fold(f64::MIN, f64::max);
    assert!(best > first.1, "validation SacreBLEU never rose above the first epoch's: {curve:?}");
    let run = dir.join("out/full");
    let result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("ind-sun/result.json")).unwrap()).unwrap();
    assert!(
        (result["valid_bleu"].as_f64().unwrap() - best).abs() < 0.006,
        "the log's best (2 decimals) is kept: {result}"
    );
    let md = std::fs::read_to_string(run.join("results.md")).unwrap();
    assert!(md.contains("Table 6 (ind → x)") && md.contains("| indolm BLEU |"), "{md}");

    // Stopped at the checkpoint of step 128 and resumed: the same selected weights, the same
    // translations and scores.
    let resumed = write_recipe(&dir, "resumed", "ind-sun", epochs, "");
    let r = resumed.to_str().unwrap();
    let (stdout, _) = indolm_ok(&["finetune", "translation", r, "--stop-after", "128"]);
    assert!(stdout.contains("--resume auto"), "{stdout}");
    indolm_ok(&["finetune", "translation", r, "--resume", "auto"]);
    let again = dir.join("out/resumed");
    for file in ["ind-sun/best/model.safetensors", "ind-sun/test.hyp.txt"] {
        assert!(
            std::fs::read(run.join(file)).unwrap() == std::fs::read(again.join(file)).unwrap(),
            "{file} differs after a stop and resume"
        );
    }
    let resumed_result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(again.join("ind-sun/result.json")).unwrap()).unwrap();
    for key in ["best_step", "valid_bleu", "test_bleu", "test_chrf"] {
        assert_eq!(result[key], resumed_result[key], "{key}");
    }

    // transformers loads the selected weights and, searching as the recipe does (5 beams, 64
    // tokens), writes indolm's translations.
    let texts: Vec<String> = csv::Reader::from_path(corpus().join("mt/test.csv"))
        .unwrap()
        .deserialize::<std::collections::HashMap<String, String>>()
        .map(|r| r.unwrap()["indonesian"].clone())
        .collect();
    let spec = serde_json::json!({
        "texts": texts, "source_token": "[ind]", "target_token": "[sun]",
        "num_beams": 5, "max_length": 64, "length_penalty": 1.0,
    });
    let (input, output) = (dir.join("generate.json"), dir.join("hf.json"));
    std::fs::write(&input, spec.to_string()).unwrap();
    let best_dir = run.join("ind-sun/best");
    reference(&["mt-generate", best_dir.to_str().unwrap(), input.to_str().unwrap(), output.to_str().unwrap()]);
    let theirs: Vec<String> = serde_json::from_str(&std::fs::read_to_string(&output).unwrap()).unwrap();
    let ours = std::fs::read_to_string(run.join("ind-sun/test.hyp.txt")).unwrap();
    let ours: Vec<&str> = ours.lines().collect();
    assert_eq!(ours.len(), theirs.len());
    let differ: Vec<usize> = (0..ours.len()).filter(|&i| ours[i] != theirs[i]).collect();
    assert!(
        differ.is_empty(),
        "{} of {} translations differ, e.g. {:?} vs {:?}",
        differ.len(),
        ours.len(),
        ours[differ[0]],
        theirs[differ[0]]
    );
    println!("transformers' generate on the selected weights: all {} test translations equal indolm's", ours.len());
}

#[test]
fn bad_translation_recipes_are_named() {
    let dir = scratch("mt-bad-recipes");
    let cases: [(&str, &str, &str, &str); 4] = [
        ("unknown-direction", "ind-xyz", "", "`ind-xyz` is not a direction"),
        ("missing-token", "ind-sun", "", "model.language_tokens"),
        ("max-len", "ind-sun", "", "max_position_embeddings"),
        ("no-epochs", "ind-sun", "", "optimizer.max_epochs"),
    ];
    for (name, direction, extra, expected) in cases {
        let path = write_recipe(&dir, name, if direction == "ind-xyz" { "ind-sun" } else { direction }, 2, extra);
        let mut text = std::fs::read_to_string(&path).unwrap();
        match name {
            "unknown-direction" => text = text.replace("[\"ind-sun\"]", "[\"ind-xyz\"]"),
            "missing-token" => text = text.replace("sun = \"[sun]\"\n", ""),
            "max-len" => text = text.replace("max_len = 64", "max_len = 500"),
            _ => text = text.replace("max_epochs = 2\n", ""),
        }
        std::fs::write(&path, text).unwrap();
        let err = indolm_fails(&["finetune", "translation", path.to_str().unwrap()]);
        assert!(err.contains(expected) && err.contains(&format!("{name}.toml")), "{name}: {err}");
    }
    // A language token the tokenizer does not hold.
    let path = write_recipe(&dir, "not-a-token", "ind-sun", 2, "");
    let text = std::fs::read_to_string(&path).unwrap().replace("sun = \"[sun]\"", "sun = \"su_SU\"");
    std::fs::write(&path, text).unwrap();
    let err = indolm_fails(&["finetune", "translation", path.to_str().unwrap()]);
    assert!(err.contains("`su_SU` is not a token") && err.contains("model.language_tokens.sun"), "{err}");
}

#[test]
fn a_direction_on_two_gloo_ranks_trains_as_one_process() {
    let dir = scratch("mt-ddp");
    // The tiny model without dropout, so that the ranks' draws cannot differ from one process's.
    let init = copy_dir(tiny_mt_model(), "mt-ddp-init");
    let config = init.join("config.json");
    let mut json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    json["dropout"] = 0.0.into();
    std::fs::write(&config, json.to_string()).unwrap();
    let make = |name: &str| {
        let path = write_recipe(&dir, name, "ind-sun", 1, "");
        let text = std::fs::read_to_string(&path)
            .unwrap()
            .replace(&format!("init = \"{}\"", tiny_mt_model().display()), &format!("init = \"{}\"", init.display()));
        std::fs::write(&path, text).unwrap();
        path
    };
    let (one, two) = (make("one"), make("two"));
    indolm_ok(&["--threads", "1", "--device", "cpu", "finetune", "translation", one.to_str().unwrap()]);
    crate::finetune_engine::two_gloo_ranks(&["finetune", "translation", two.to_str().unwrap()]);
    let losses = |run: &str| -> Vec<f64> {
        std::fs::read_to_string(dir.join("out").join(run).join("ind-sun/train_log.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["loss"].as_f64().unwrap())
            .collect()
    };
    let (a, b) = (losses("one"), losses("two"));
    assert!(a.len() >= 2 && a.len() == b.len(), "{a:?} {b:?}");
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(format!("{x:.3e}"), format!("{y:.3e}"), "losses {a:?} vs {b:?}");
    }
    let weights = |run: &str| {
        let path = dir.join("out").join(run).join("ind-sun/best/model.safetensors");
        indolm_torch::model::weights::read_file(&path).unwrap()
    };
    let (wa, wb) = (weights("one"), weights("two"));
    let mut worst = 0.0f64;
    for (name, t) in &wa {
        worst = worst.max((t - &wb[name]).abs().max().double_value(&[]));
    }
    println!(
        "translation, 2 Gloo ranks against 1 process: losses {a:?} vs {b:?}; largest weight difference {worst:.2e}"
    );
    // The two ranks sum each gradient in another order (fp32); Adam's normalised steps (lr 1e-3)
    // carry such differences in near-zero gradients into the weights, two orders of magnitude
    // below a step.
    assert!(worst < 1e-5, "weights differ by {worst}");
}
