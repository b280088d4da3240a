//! Pretraining: exact resume after SIGKILL, graceful SIGTERM, TensorBoard files read by
//! TensorBoard's own reader, AdamW + schedule against torch, real learning on shared text,
//! and recipe errors.
use crate::common::{self, *};
use indolm_core::schedule::linear_schedule;
use indolm_torch::model::model_dir::load_masked_lm;
use indolm_torch::model::weights;
use indolm_torch::optim::AdamW;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};
use tch::{Device, Kind};

/// A recipe whose every path is absolute, inside `dir`; `model` and `extra` are TOML lines.
pub(crate) fn write_recipe(
    dir: &Path,
    name: &str,
    model: &str,
    optimizer: &str,
    checkpoint_every: u64,
    extra: &str,
) -> PathBuf {
    let shared = test_data();
    let ud = shared.join("ud-indonesian/*.conllu");
    let nusax = shared.join("nusax/sentiment/indonesian/train.csv");
    let text = format!(
        r#"kind = "pretrain"
name = "{name}"
seed = 3407
output_dir = "{out}"

[model]
{model}

[tokenizer]
path = "{tok}"

[data]
corpus = "shared-id"
corpora_dir = "{corpora}"
seq_len = 64
heldout_fraction = 0.03

[[data.sources]]
name = "ud-id"
lang = "id"
paths = ["{ud}"]
weight = 0.7

[[data.sources]]
name = "nusax-id"
lang = "id"
paths = ["{nusax}"]
weight = 0.3

[optimizer]
{optimizer}

[checkpoint]
every = {checkpoint_every}
keep_last = 2

[eval.mlm]
sequences_per_source = 16

[logging]
tensorboard = "{runs}"
every = 5
{extra}
"#,
        out = dir.join("checkpoints").display(),
        tok = reference_model().display(),
        corpora = dir.join("corpora").display(),
        ud = ud.display(),
        nusax = nusax.display(),
        runs = dir.join("runs").display(),
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

pub(crate) const SMALL_MODEL: &str =
    "preset = \"tiny\"\nhidden_size = 64\nnum_attention_heads = 2\nintermediate_size = 128";
pub(crate) const SHORT_RUN: &str = "lr = 1e-3\nbatch_size = 16\nwarmup_steps = 10\nmax_steps = 60";

pub(crate) fn spawn_train(recipe: &Path, extra: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_indolm"))
        .args(["--threads", "2", "train", recipe.to_str().unwrap()])
        .args(extra)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// A training process that is killed when dropped, so a failed assertion never leaves a long run
/// behind.
pub(crate) struct KillOnDrop(pub(crate) Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits (at most two minutes) until the run's `latest` names `step`.
pub(crate) fn wait_for_checkpoint(run: &Path, step: &str) {
    let start = Instant::now();
    while latest(run).as_deref() != Some(step) {
        assert!(start.elapsed() < Duration::from_secs(120), "no checkpoint {step} in time");
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub(crate) fn latest(run: &Path) -> Option<String> {
    std::fs::read_to_string(run.join("latest")).ok().map(|s| s.trim().to_string())
}

/// Waits until `latest` names `step`, then `delay` more, and SIGKILLs the run; returns whether
/// the process was still running (a real kill mid-training).
fn kill_after(child: &mut Child, run: &Path, step: &str, delay: Duration) -> bool {
    let start = Instant::now();
    while latest(run).as_deref() != Some(step) {
        assert!(start.elapsed() < Duration::from_secs(120), "no checkpoint {step} in time");
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    std::thread::sleep(delay);
    let running = child.try_wait().unwrap().is_none();
    child.kill().ok();
    child.wait().unwrap();
    running
}

#[test]
fn sigkill_and_resume_end_bit_identical_to_an_uninterrupted_run() {
    let dir = scratch("resume");
    let straight = write_recipe(&dir, "straight", SMALL_MODEL, SHORT_RUN, 20, "");
    let killed = write_recipe(&dir, "killed", SMALL_MODEL, SHORT_RUN, 20, "");
    let status = spawn_train(&straight, &[]).wait().unwrap();
    assert!(status.success());

    let run = dir.join("checkpoints/killed");
    let mut kills = 0;
    let mut child = spawn_train(&killed, &[]);
    kills += kill_after(&mut child, &run, "step-20", Duration::from_millis(40)) as usize;
    let mut child = spawn_train(&killed, &["--resume", "latest"]);
    kills += kill_after(&mut child, &run, "step-40", Duration::from_millis(5)) as usize;
    let mut child = spawn_train(&killed, &["--resume", "latest"]);
    kills += kill_after(&mut child, &run, "step-40", Duration::from_millis(0)) as usize;
    let out = spawn_train(&killed, &["--resume", "latest"]).wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    println!("{kills} SIGKILLs landed while training was running");
    assert!(kills >= 2, "the run finished before it could be killed; make it longer");

    let a = dir.join("checkpoints/straight/step-60");
    let b = run.join("step-60");
    for file in ["model.safetensors", "optimizer.safetensors"] {
        let (bytes_a, bytes_b) = (std::fs::read(a.join(file)).unwrap(), std::fs::read(b.join(file)).unwrap());
        // Report where they part, not both files' bytes.
        let first_difference = bytes_a.iter().zip(&bytes_b).position(|(x, y)| x != y);
        assert!(
            bytes_a.len() == bytes_b.len() && first_difference.is_none(),
            "{file} differs after resume: {} vs {} bytes, first differing byte at {first_difference:?}",
            bytes_a.len(),
            bytes_b.len()
        );
    }
    let log_a = std::fs::read_to_string(dir.join("checkpoints/straight/train_log.jsonl")).unwrap();
    let log_b = std::fs::read_to_string(run.join("train_log.jsonl")).unwrap();
    assert_eq!(log_a.lines().count(), 12);
    assert_eq!(log_a, log_b, "logged losses differ after resume");
    println!("weights, AdamW moments and the 12 logged losses are bit-identical");
}

/// SIGTERM, SIGINT, SIGUSR1 (what Slurm's `--signal` sends before a time limit) and SIGHUP each
/// finish the current step, write a checkpoint and exit 0.
#[test]
fn stop_signals_checkpoint_and_exit_zero() {
    for signal in ["TERM", "INT", "USR1", "HUP"] {
        let dir = scratch(&format!("sig{signal}"));
        let long_run = SHORT_RUN.replace("max_steps = 60", "max_steps = 100000");
        let recipe = write_recipe(&dir, "term", SMALL_MODEL, &long_run, 20, "");
        let run = dir.join("checkpoints/term");
        let mut child = KillOnDrop(spawn_train(&recipe, &[]));
        wait_for_checkpoint(&run, "step-20");
        std::thread::sleep(Duration::from_millis(100));
        Command::new("kill").args([&format!("-{signal}"), &child.0.id().to_string()]).status().unwrap();
        let status = child.0.wait().unwrap();
        assert!(status.success(), "SIG{signal} should end the run with exit 0, got {status}");
        let last = latest(&run).unwrap();
        let step: u64 = last.trim_start_matches("step-").parse().unwrap();
        assert!(step > 20, "SIG{signal}: a checkpoint at the stop step was expected, latest is {last}");
        let state = indolm_core::run::checkpoints::load_state(&run.join(&last)).unwrap();
        assert_eq!(state.step, step);
        println!("SIG{signal} at step {step}: checkpoint written, exit 0");
    }
}

#[test]
fn tensorboard_reads_the_training_scalars() {
    let dir = scratch("tensorboard");
    let recipe = write_recipe(&dir, "tb", SMALL_MODEL, &SHORT_RUN.replace("max_steps = 60", "max_steps = 20"), 10, "");
    assert!(spawn_train(&recipe, &[]).wait().unwrap().success());
    let json = common::reference(&["tb-scalars", dir.join("runs/tb").to_str().unwrap()]);
    let scalars: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    let steps = |tag: &str| -> Vec<u64> {
        scalars[tag]
            .as_array()
            .unwrap_or_else(|| panic!("no tag {tag} in {json}"))
            .iter()
            .map(|e| e[0].as_u64().unwrap())
            .collect()
    };
    for tag in ["train/loss", "train/lr", "train/grad_norm", "train/tokens_per_s"] {
        assert_eq!(steps(tag), vec![5, 10, 15, 20], "{tag}");
    }
    assert_eq!(steps("eval/mlm_loss"), vec![0, 10, 20]);
    assert_eq!(steps("eval/perplexity"), vec![0, 10, 20]);
    let lr_at_5 = scalars["train/lr"][0][1].as_f64().unwrap();
    assert!((lr_at_5 - linear_schedule(1e-3, 10, 20, 4)).abs() < 1e-9, "lr {lr_at_5}");
}

#[test]
fn adamw_and_schedule_match_torch() {
    let model_dir = reference_model();
    let out = scratch("adamw").join("torch.safetensors");
    let report = common::reference(&["adamw", model_dir.to_str().unwrap(), out.to_str().unwrap()]);
    let expected = weights::read_file(&out).unwrap();
    let reference = weights::read_file(&model_dir.join("reference.safetensors")).unwrap();
    let loaded = load_masked_lm(model_dir, Device::Cpu).unwrap();
    let mut opt = AdamW::new(loaded.vs.variables().into_iter().collect(), [0.9, 0.999], 1e-6, 0.01);
    let (ids, types, mask, labels) =
        (&reference["input_ids"], &reference["token_type_ids"], &reference["attention_mask"], &expected["labels"]);
    for k in 0..3 {
        opt.zero_grad();
        let out = loaded.model.mlm_loss(ids, Some(types), Some(mask), labels, false);
        out.loss.backward();
        let norm = opt.clip_grad_norm(1.0).double_value(&[]);
        println!(
            "step {k}: loss {:.6} grad norm {norm:.6} lr {}",
            out.loss.double_value(&[]),
            linear_schedule(1e-3, 2, 10, k)
        );
        opt.step(linear_schedule(1e-3, 2, 10, k));
    }
    println!("torch: {report}");
    let mut worst = (0.0, String::new());
    for (name, var) in loaded.vs.variables() {
        let diff = (&var - expected[&name].to_kind(Kind::Float)).abs().max().double_value(&[]);
        if diff > worst.0 {
            worst = (diff, name);
        }
    }
    println!(
        "max |indolm - torch fused AdamW| over all parameters after 3 training steps: {:.2e} ({})",
        worst.0, worst.1
    );
    assert!(worst.0 < 1e-5);
    // And the parameters did move (the test would pass trivially otherwise).
    let moved = (loaded.vs.variables()["bert.encoder.layer.0.intermediate.dense.weight"].shallow_clone()
        - weights::read_file(&model_dir.join("model.safetensors")).unwrap()
            ["bert.encoder.layer.0.intermediate.dense.weight"]
            .shallow_clone())
    .abs()
    .max()
    .double_value(&[]);
    assert!(moved > 1e-4, "parameters moved only {moved}");
}

/// indolm's AdamW runs libtorch's fused kernel on its flat buffers: 20 updates of a few named
/// tensors with torch's gradients and learning rates, one of them skipped on the device (as a
/// non-finite loss is), end where `torch.optim.AdamW(fused=True)` ends.
#[test]
fn fused_adamw_matches_torch_fused_after_20_steps() {
    let out = scratch("fused-adamw").join("torch.safetensors");
    let report = common::reference(&["fused-adamw", out.to_str().unwrap()]);
    let t = weights::read_file(&out).unwrap();
    let names = ["l.weight", "l.bias", "LayerNorm.weight", "LayerNorm.bias", "e.weight"];
    let params: std::collections::BTreeMap<String, tch::Tensor> =
        names.iter().map(|n| (n.to_string(), t[&format!("init.{n}")].copy().set_requires_grad(true))).collect();
    let mut opt =
        AdamW::new(params.iter().map(|(n, p)| (n.clone(), p.shallow_clone())).collect(), [0.9, 0.999], 1e-6, 0.01);
    let lrs = Vec::<f64>::try_from(&t["lrs"]).unwrap();
    for (k, lr) in lrs.iter().enumerate() {
        opt.zero_grad();
        // Gradients through autograd (so the flat buffers are built as in training), equal to
        // torch's: d/dp sum(p * g) = g.
        let skipped = k == 7;
        let loss = names.iter().fold(tch::Tensor::zeros([], (Kind::Float, Device::Cpu)), |acc, n| {
            let g = t[&format!("grad.{k}.{n}")].shallow_clone();
            let g = if skipped { g * f64::NAN } else { g };
            acc + (&params[*n] * g).sum(Kind::Float)
        });
        loss.backward();
        opt.step_if(*lr, Some(&loss.isfinite()));
    }
    assert_eq!(opt.steps(), 19, "the skipped update does not count");
    let mut worst = 0.0f64;
    for n in names {
        worst = worst.max((&params[n] - &t[&format!("final.{n}")]).abs().max().double_value(&[]));
    }
    println!("torch: {report}; max |indolm - torch fused AdamW| after 20 steps (one skipped): {worst:.2e}");
    assert!(worst < 1e-6, "{worst}");
    let moved = (&params["l.weight"] - &t["init.l.weight"]).abs().max().double_value(&[]);
    assert!(moved > 1e-3, "the parameters moved only {moved}");
}

#[test]
fn tiny_recipe_on_shared_text_lowers_heldout_loss() {
    let dir = scratch("learning");
    let recipe = write_recipe(
        &dir,
        "learn",
        "preset = \"tiny\"",
        "lr = 2e-3\nbatch_size = 16\nwarmup_steps = 30\nmax_steps = 300",
        150,
        "",
    );
    let out = Command::new(env!("CARGO_BIN_EXE_indolm")).args(["train", recipe.to_str().unwrap()]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let losses: Vec<f64> = stdout
        .lines()
        .filter(|l| l.starts_with("step "))
        .filter_map(|l| l.split("held-out MLM loss ").nth(1))
        .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
        .collect();
    println!("held-out MLM loss at steps 0, 150, 300: {losses:?}");
    assert_eq!(losses.len(), 3);
    // ln(1000) = 6.91 at random init; the tiny model must get far below it.
    assert!(losses[2] < losses[0] - 1.0, "held-out loss {} -> {}", losses[0], losses[2]);
}

#[test]
fn recipe_errors_and_changed_recipe_on_resume() {
    let dir = scratch("recipe-errors");
    let recipe = write_recipe(
        &dir,
        "r",
        SMALL_MODEL,
        &SHORT_RUN.replace("max_steps = 60", "max_steps = 10"),
        5,
        "\n[typo_section]\nx = 1",
    );
    let err = indolm_fails(&["recipe", "check", recipe.to_str().unwrap()]);
    assert!(err.contains("unknown field `typo_section`") && err.contains("line "), "{err}");

    let recipe = write_recipe(
        &dir,
        "r",
        SMALL_MODEL,
        &SHORT_RUN.replace("max_steps = 60", "max_steps = 10").replace("lr = 1e-3", "lr = -1.0"),
        5,
        "",
    );
    let err = indolm_fails(&["recipe", "check", recipe.to_str().unwrap()]);
    assert!(err.contains("optimizer.lr") && err.contains("-1"), "{err}");

    let recipe = write_recipe(&dir, "r", SMALL_MODEL, &SHORT_RUN.replace("max_steps = 60", "max_steps = 10"), 5, "");
    indolm_ok(&["train", recipe.to_str().unwrap()]);
    let err = indolm_fails(&["train", recipe.to_str().unwrap()]);
    assert!(err.contains("already has checkpoints") && err.contains("--resume latest"), "{err}");
    let changed = write_recipe(
        &dir,
        "r",
        SMALL_MODEL,
        &SHORT_RUN.replace("max_steps = 60", "max_steps = 20").replace("lr = 1e-3", "lr = 2e-3"),
        5,
        "",
    );
    let err = indolm_fails(&["train", changed.to_str().unwrap(), "--resume", "latest"]);
    assert!(err.contains("differs") && err.contains("optimizer") && err.contains("--force"), "{err}");
    let (stdout, _) = indolm_ok(&["train", changed.to_str().unwrap(), "--resume", "latest", "--force"]);
    assert!(stdout.contains("finished at step 20"), "{stdout}");
}

/// Every shipped recipe parses and validates (their data need not be present).
#[test]
fn shipped_recipes_parse() {
    let mut n = 0;
    for dir in ["recipes", "recipes/tiny", "recipes/indobias"] {
        for entry in std::fs::read_dir(root().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let recipe = indolm_tasks::pretrain::PretrainRecipe::load(&path).unwrap_or_else(|e| panic!("{e}"));
                if dir == "recipes/indobias" {
                    let o = &recipe.optimizer;
                    assert_eq!(
                        (recipe.seed, recipe.data.seq_len, o.batch_size, o.lr, o.warmup_steps, o.max_steps),
                        (3407, 512, 64, 1e-4, 10_000, Some(500_000)),
                        "{}",
                        path.display()
                    );
                    assert_eq!((recipe.checkpoint.every, o.weight_decay), (25_000, 0.01));
                    assert_eq!(recipe.eval.bias.as_ref().and_then(|b| b.every), Some(1250), "dense bias curves");
                    let total: f64 = recipe.data.sources.iter().map(|s| s.weight).sum();
                    assert!((total - 1.0).abs() < 1e-9, "{}: weights sum to {total}", path.display());
                }
                n += 1;
            }
        }
    }
    assert_eq!(n, 12);
}

/// Non-finite losses: each bad step is skipped and counted; after `max_nonfinite_steps` in a row
/// the run stops with a clear message, leaving the last good checkpoint loadable.
#[test]
fn nonfinite_losses_stop_the_run_cleanly() {
    let dir = scratch("nonfinite");
    let recipe = write_recipe(
        &dir,
        "nan",
        SMALL_MODEL,
        "lr = 1e30\nbatch_size = 8\nwarmup_steps = 0\nmax_steps = 50\nmax_nonfinite_steps = 3\ngrad_clip = 0.0",
        1,
        "",
    );
    let out = Command::new(env!("CARGO_BIN_EXE_indolm")).args(["train", recipe.to_str().unwrap()]).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("3 consecutive non-finite losses")
            && stderr.contains("The last checkpoint (step ")
            && stderr.contains(") is intact"),
        "{stderr}"
    );
    assert!(
        stdout.contains("update skipped (1 in a row)") && stdout.contains("update skipped (3 in a row)"),
        "{stdout}"
    );
    let run = dir.join("checkpoints/nan");
    let last = latest(&run).unwrap();
    indolm_core::run::checkpoints::load_state(&run.join(&last)).unwrap();
    load_masked_lm(&run.join(&last), Device::Cpu).unwrap();

    // Stopped before the first checkpoint: the message must not promise one.
    let recipe = write_recipe(
        &dir,
        "nan-early",
        SMALL_MODEL,
        "lr = 1e30\nbatch_size = 8\nwarmup_steps = 0\nmax_steps = 50\nmax_nonfinite_steps = 3\ngrad_clip = 0.0",
        100,
        "",
    );
    let err = indolm_fails(&["train", recipe.to_str().unwrap()]);
    assert!(err.contains("stopped before any checkpoint was written") && err.contains("--overwrite"), "{err}");
}

/// A run, corpus or source name is joined to folders that `--overwrite` empties, so a name that
/// is not one safe path component (`..`, empty, with a slash) is refused before anything is
/// touched, and two sources may not share a name (their shards would overwrite each other).
#[test]
fn unsafe_or_duplicate_names_are_refused_before_anything_is_deleted() {
    let dir = scratch("names");
    let keep = dir.join("keep.txt");
    std::fs::write(&keep, "earlier work").unwrap();
    let good = std::fs::read_to_string(write_recipe(&dir, "ok", SMALL_MODEL, SHORT_RUN, 20, "")).unwrap();
    let cases = [
        (good.replace("name = \"ok\"", "name = \"..\""), "name"),
        (good.replace("name = \"ok\"", "name = \"\""), "name"),
        (good.replace("name = \"ok\"", "name = \"a/b\""), "name"),
        (good.replace("corpus = \"shared-id\"", "corpus = \"../x\""), "data.corpus"),
        (good.replace("name = \"nusax-id\"", "name = \".\""), "data.sources.name"),
        (good.replace("name = \"nusax-id\"", "name = \"ud-id\""), "data.sources[ud-id]"),
    ];
    for (i, (text, field)) in cases.iter().enumerate() {
        let recipe = dir.join(format!("bad-{i}.toml"));
        std::fs::write(&recipe, text).unwrap();
        let err = indolm_fails(&["train", recipe.to_str().unwrap(), "--overwrite"]);
        assert!(err.contains(&format!("bad-{i}.toml")) && err.contains(field), "case {i}: {err}");
        assert_eq!(std::fs::read_to_string(&keep).unwrap(), "earlier work", "case {i} touched the output folder");
    }
}

/// One writer per run: while a run trains, a second `train` of it (new, `--resume` or
/// `--overwrite`) is refused with the holder's PID, and the first run's log is untouched; the
/// lock dies with its process (resume after SIGKILL is covered above).
#[test]
fn a_running_run_refuses_a_second_trainer() {
    let dir = scratch("lock");
    let long_run = SHORT_RUN.replace("max_steps = 60", "max_steps = 100000");
    let recipe = write_recipe(&dir, "busy", SMALL_MODEL, &long_run, 20, "");
    let run = dir.join("checkpoints/busy");
    let mut first = KillOnDrop(spawn_train(&recipe, &[]));
    wait_for_checkpoint(&run, "step-20");
    for extra in [&[][..], &["--resume", "latest"], &["--overwrite"]] {
        let mut args = vec!["train", recipe.to_str().unwrap()];
        args.extend_from_slice(extra);
        let err = indolm_fails(&args);
        assert!(
            err.contains(&format!("in use by another indolm process (PID {},", first.0.id())),
            "{extra:?} (first run: PID {}): {err}",
            first.0.id()
        );
    }
    assert!(run.join("train_log.jsonl").exists() && latest(&run).is_some(), "the running run lost files");
    Command::new("kill").args(["-TERM", &first.0.id().to_string()]).status().unwrap();
    assert!(first.0.wait().unwrap().success());
    let log = std::fs::read_to_string(run.join("train_log.jsonl")).unwrap();
    assert!(log.lines().count() >= 4, "the first run's log was cut: {log}");
}

/// One preparer per corpus: while another process holds `corpora/.<corpus>.lock`, `corpus
/// prepare` is refused with its PID and writes nothing; once it is released, preparing works.
#[test]
fn a_corpus_being_prepared_refuses_a_second_preparer() {
    let dir = scratch("corpus-lock");
    let recipe = write_recipe(&dir, "prep", SMALL_MODEL, SHORT_RUN, 20, "");
    let corpus = dir.join("corpora/shared-id");
    let held = indolm_core::files::DirLock::acquire(&corpus).unwrap();
    let err = indolm_fails(&["corpus", "prepare", recipe.to_str().unwrap()]);
    assert!(
        err.contains(&format!("shared-id: in use by another indolm process (PID {},", std::process::id())),
        "{err}"
    );
    assert!(!corpus.exists(), "the refused preparer wrote into the corpus");
    drop(held);
    let out = indolm(&["corpus", "prepare", recipe.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(corpus.join("ud-id.json").exists());
}

/// A recipe names its kind; one written before `kind` existed is read by its keys with a note,
/// and a recipe given to another kind's command is refused, naming the command that runs it.
#[test]
fn a_recipe_names_its_kind_and_one_without_is_read_by_its_keys_with_a_note() {
    let dir = scratch("recipe-kind");
    let demo = std::fs::read_to_string(root().join("recipes/tiny/demo.toml")).unwrap();
    assert!(demo.contains("kind = \"pretrain\"\n"));
    let legacy = dir.join("legacy.toml");
    std::fs::write(&legacy, demo.replace("kind = \"pretrain\"\n", "")).unwrap();
    let (stdout, stderr) = indolm_ok(&["recipe", "check", legacy.to_str().unwrap()]);
    assert!(stderr.contains("names no kind: read as a pretrain recipe (add `kind = \"pretrain\"`"), "{stderr}");
    assert!(stdout.contains("kind = \"pretrain\""), "the resolved recipe states its kind:\n{stdout}");
    let sentiment = root().join("recipes/finetune/nusax-sentiment-tiny.toml");
    let err = indolm_fails(&["train", sentiment.to_str().unwrap()]);
    assert!(
        err.contains("this is a sentiment recipe, run by `indolm finetune sentiment`, not by `indolm train`"),
        "{err}"
    );
    let bogus = dir.join("bogus.toml");
    std::fs::write(&bogus, demo.replace("kind = \"pretrain\"", "kind = \"pretrian\"")).unwrap();
    let err = indolm_fails(&["recipe", "check", bogus.to_str().unwrap()]);
    assert!(err.contains(
        "field `kind`: `pretrian` is not a recipe kind (expected one of pretrain, sentiment, summarize, translation)"
    ));
}
