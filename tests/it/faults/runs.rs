//! A run's identity and how it continues (#37): fine-tuning records the base model it starts
//! from by content and refuses another on resume unless forced (then each result names its
//! own); `--resume DIR` is honoured or refused, `latest` is strict; `--stop-after` before the
//! resume step is refused; an earlier start that wrote evaluations but no checkpoint is not
//! mixed into a new run.
use super::s;
use crate::common::*;
use crate::sentiment::{random_init, write_recipe};
use indolm_torch::model::weights;
use tch::Tensor;

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

#[test]
fn fine_tuning_resumes_only_from_its_own_base_model_and_checkpoints() {
    let work = scratch("finetune-identity");
    let recipe = write_recipe(&work, "two", 1, "");
    let text = std::fs::read_to_string(&recipe).unwrap();
    std::fs::write(&recipe, text.replace("languages = [\"indonesian\"]", "languages = [\"indonesian\", \"javanese\"]"))
        .unwrap();
    let r = s(&recipe);
    let finetune = |extra: &[&str]| -> Vec<String> {
        ["--threads", "2", "finetune", "sentiment", r].iter().chain(extra).map(|a| a.to_string()).collect()
    };
    // Another base model: the same files, one weight changed.
    let other = copy_dir(random_init(), "finetune-other-base");
    let path = other.join("model.safetensors");
    let mut tensors: Vec<(String, Tensor)> = weights::read_file(&path).unwrap().into_iter().collect();
    for (name, t) in tensors.iter_mut() {
        if name.ends_with("embeddings.LayerNorm.bias") {
            *t = &*t + 0.5;
        }
    }
    weights::write_file(&path, &tensors).unwrap();

    indolm_ok(&strs(&finetune(&["--stop-after", "5"])));
    let run = work.join("ck/two");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap();
    assert_eq!(manifest["base_model"]["path"], random_init().display().to_string());
    let err = indolm_fails(&strs(&finetune(&["--resume", "auto", "--init", s(&other)])));
    assert!(err.contains("were started from") && err.contains("--force"), "{err}");
    // A folder that is no checkpoint of the run is refused, not read as `auto`.
    let err = indolm_fails(&strs(&finetune(&["--resume", "/nonexistent"])));
    assert!(err.contains("--resume: /nonexistent: no such folder"), "{err}");
    let err = indolm_fails(&strs(&finetune(&["--resume", s(&work)])));
    assert!(err.contains("not a checkpoint of one of this run's units"), "{err}");
    let err = indolm_fails(&strs(&finetune(&["--resume", "latest", "--stop-after", "3"])));
    assert!(err.contains("--stop-after: step 3 is before step 5"), "{err}");

    // `latest` is strict: a corrupt newest checkpoint is an error naming the one before.
    indolm_ok(&strs(&finetune(&["--resume", "latest", "--stop-after", "10"])));
    let unit = run.join("indonesian/lr1e-3-bs32");
    let mut weights_file =
        std::fs::OpenOptions::new().append(true).open(unit.join("step-10/model.safetensors")).unwrap();
    std::io::Write::write_all(&mut weights_file, b"x").unwrap();
    let err = indolm_fails(&strs(&finetune(&["--resume", "latest"])));
    assert!(err.contains("checksum mismatch") && err.contains(&format!("--resume {}", unit.join("step-5").display())));
    // ... and the checkpoint it names is honoured.
    let (stdout, _) = indolm_ok(&strs(&finetune(&["--resume", s(&unit.join("step-5")), "--stop-after", "8"])));
    assert!(stdout.contains(&format!("resumed from {} at step 5", unit.join("step-5").display())), "{stdout}");

    // Forced onto another base model: the run finishes, and each result names its own.
    indolm_ok(&strs(&finetune(&["--resume", "auto", "--init", s(&other), "--force"])));
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("results.json")).unwrap()).unwrap();
    let bases: Vec<&str> =
        results["runs"].as_array().unwrap().iter().map(|r| r["base_model_sha256"].as_str().unwrap()).collect();
    assert_eq!(bases.len(), 2);
    assert_ne!(bases[0], bases[1], "the two languages started from different models, and the results do not say so");
    let markdown = std::fs::read_to_string(run.join("results.md")).unwrap();
    assert!(markdown.contains("start from different base models"), "{markdown}");
}

#[test]
fn an_earlier_start_without_a_checkpoint_is_not_mixed_into_a_new_run() {
    use crate::train::{write_recipe, SHORT_RUN, SMALL_MODEL};
    let work = scratch("leftover-start");
    let recipe = write_recipe(&work, "l", SMALL_MODEL, SHORT_RUN, 20, "");
    let run = work.join("checkpoints/l");
    // What a start killed before its first checkpoint leaves: a dense evaluation and a log.
    std::fs::create_dir_all(run.join("evals/step-3")).unwrap();
    std::fs::write(run.join("evals/step-3/bias.json"), "{}").unwrap();
    std::fs::write(run.join("train_log.jsonl"), "{\"step\": 1}\n").unwrap();
    let err = indolm_fails(&["--threads", "2", "train", s(&recipe), "--stop-after", "2"]);
    assert!(err.contains("earlier start of this run") && err.contains("--overwrite"), "{err}");
    // A requeued job (`--resume auto`) starts it again from scratch, without the old evaluation.
    indolm_ok(&["--threads", "2", "train", s(&recipe), "--resume", "auto", "--stop-after", "2"]);
    assert!(!run.join("evals/step-3").exists(), "the earlier start's evaluation stayed");
    assert!(run.join("step-2").exists());
}
