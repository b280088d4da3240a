//! Evaluations shared by every rank: a tiny pretraining run evaluated by two Gloo ranks writes
//! byte for byte what one process writes (the bias records and reports, IndoMMLU's, the
//! held-out loss, the TensorBoard curves), at a checkpoint and between checkpoints, while each
//! rank scores about half of the batches; only rank 0 writes and speaks. A failure in a shared
//! evaluation on one rank only fails it on both, within seconds, and training goes on.
use crate::common::{indolm_ok, reference, reference_model, root, scratch, test_data};
use std::path::{Path, PathBuf};
use std::process::Output;

/// A tiny pretraining recipe over the UD dev split, 4 sequences of 32 tokens a batch, with the
/// bias hook on two languages (PPPL, and AUL beside it; `bias`: more keys), `sections` further
/// sections, `steps` updates and a checkpoint every `every`. The first update's learning rate is
/// 0 (linear warmup from 0), so at step 1 the weights are still the seed's, the same in one
/// process and in two ranks: what the evaluations write there must then be the same too.
fn recipe(dir: &Path, name: &str, (steps, every): (u64, u64), bias: &str, sections: &str) -> PathBuf {
    let text = format!(
        r#"kind = "pretrain"
name = "{name}"
seed = 3407
output_dir = "{out}"
[model]
preset = "tiny"
hidden_size = 32
num_attention_heads = 2
intermediate_size = 64
[tokenizer]
path = "{tok}"
[data]
corpus = "c"
corpora_dir = "{corpora}"
seq_len = 32
heldout_fraction = 0.05
[[data.sources]]
name = "ud"
lang = "id"
paths = ["{ud}"]
[optimizer]
lr = 1e-3
batch_size = 4
warmup_steps = 2
max_steps = {steps}
[checkpoint]
every = {every}
keep_last = 2
[eval.bias]
pairs = "{pairs}"
languages = ["indonesian", "jv"]
extra_metrics = ["aul"]
{bias}
{sections}
[logging]
tensorboard = "{runs}"
every = 5
"#,
        out = dir.join("ck").display(),
        tok = reference_model().display(),
        corpora = dir.join("corpora").display(),
        ud = test_data().join("ud-indonesian/id_gsd-ud-dev.conllu").display(),
        pairs = root().join("tests/fixtures/indobias").display(),
        runs = dir.join("runs").display(),
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// `recipe` trained by one process (stdout) and, as `<name>-2`, by two Gloo ranks (rank 0's
/// stdout), each with one thread.
fn one_and_two(dir: &Path, name: &str, schedule: (u64, u64), bias: &str, sections: &str) -> (String, String) {
    let one = recipe(dir, name, schedule, bias, sections);
    let (stdout, _) = indolm_ok(&["--threads", "1", "--device", "cpu", "train", one.to_str().unwrap()]);
    let two = recipe(dir, &format!("{name}-2"), schedule, bias, sections);
    let outputs: Vec<Output> = crate::dist::train_two_ranks(&two, &[]);
    for (rank, out) in outputs.iter().enumerate() {
        let (o, e) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "rank {rank}:\n{o}\n{e}");
    }
    assert!(outputs[1].stdout.is_empty(), "rank 1 printed: {}", String::from_utf8_lossy(&outputs[1].stdout));
    (stdout, String::from_utf8_lossy(&outputs[0].stdout).to_string())
}

/// Asserts that `file` is byte for byte the same under the one-process and two-rank folders.
fn same_bytes(one: &Path, two: &Path, file: &str) {
    let (a, b) = (std::fs::read(one.join(file)).unwrap(), std::fs::read(two.join(file)).unwrap());
    let parted = a.iter().zip(&b).position(|(x, y)| x != y);
    assert!(
        a.len() == b.len() && parted.is_none(),
        "{file}: one process wrote {} bytes, two ranks {}; they part at byte {parted:?}",
        a.len(),
        b.len()
    );
}

/// Each rank's batches (scored, of all) and seconds from rank 0's line `step <step>: <what>
/// shared by 2 ranks: rank 0 scored B of T batches (R of N rows) in Ss; rank 1 …`.
fn shares(stdout: &str, step: u64, what: &str) -> Vec<(usize, usize, f64)> {
    let line = after(stdout, &format!("step {step}: {what} shared by 2 ranks: "));
    line.split("; ")
        .enumerate()
        .map(|(rank, part)| {
            let words: Vec<&str> = part.split_whitespace().collect();
            // rank R scored B of T batches (R of N rows) in Ss
            assert_eq!((words[0], words[1].parse::<usize>().unwrap()), ("rank", rank), "{line}");
            let seconds: f64 = words.last().unwrap().trim_end_matches('s').parse().unwrap();
            (words[3].parse::<usize>().unwrap(), words[5].parse::<usize>().unwrap(), seconds)
        })
        .collect()
}

/// Asserts that each of the two ranks scored half of `what`'s batches (one more or less when
/// they are odd), and prints the split with the ranks' times.
fn split_in_half(stdout: &str, step: u64, what: &str) {
    let ranks = shares(stdout, step, what);
    assert_eq!(ranks.len(), 2);
    let total = ranks[0].1;
    assert!(total >= 2, "{what}: only {total} batch(es), nothing to share");
    assert_eq!(ranks[0].0 + ranks[1].0, total, "{what}: {ranks:?}");
    for (rank, &(batches, _, _)) in ranks.iter().enumerate() {
        assert!(batches.abs_diff(total - batches) <= 1, "{what}: rank {rank} scored {batches} of {total}");
    }
    println!(
        "step {step}, {what}: rank 0 scored {} of {total} batches in {:.2}s, rank 1 {} in {:.2}s",
        ranks[0].0, ranks[0].2, ranks[1].0, ranks[1].2
    );
}

/// The seconds of `step <step>: <what> took Xs`.
fn took(stdout: &str, step: u64, what: &str) -> f64 {
    after(stdout, &format!("step {step}: {what} took ")).trim_end_matches('s').parse().unwrap()
}

/// The rest of the first line of `stdout` that starts with `head`.
fn after<'a>(stdout: &'a str, head: &str) -> &'a str {
    stdout.lines().find_map(|l| l.strip_prefix(head)).unwrap_or_else(|| panic!("no {head:?} in:\n{stdout}"))
}

/// `tb-scalars` / `tb-bias` of TensorBoard folder `dir`, as TensorBoard reads it.
fn board(command: &str, dir: &Path) -> serde_json::Value {
    serde_json::from_str(reference(&[command, dir.to_str().unwrap()]).trim()).unwrap()
}

/// Every scalar of every TensorBoard run `tb-bias` finds under `dir`, points at `step` only.
fn bias_points(dir: &Path, step: u64) -> Vec<(String, String, serde_json::Value)> {
    let boards = board("tb-bias", dir);
    let mut points = Vec::new();
    for (run, b) in boards.as_object().unwrap() {
        for (tag, values) in b["scalars"].as_object().unwrap() {
            for v in values.as_array().unwrap().iter().filter(|v| v[0].as_u64() == Some(step)) {
                points.push((run.clone(), tag.clone(), v.clone()));
            }
        }
    }
    points
}

/// The number of TensorBoard event files in each folder under `dir` (one writer each).
fn event_files(dir: &Path) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let mut count = 0;
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else if path.file_name().unwrap().to_string_lossy().starts_with("events.out.tfevents.") {
                count += 1;
            }
        }
        out.push((folder.strip_prefix(dir).unwrap().display().to_string(), count));
    }
    out.sort();
    out
}

/// `[eval.indommlu]` over the fixture, letter mode, every question.
fn indommlu_section() -> String {
    format!(
        "[eval.indommlu]\ndata = \"{}\"\nmode = \"letter\"\nsubsample = 0",
        root().join("tests/fixtures/indommlu/indoMMLU-fixture.csv").display()
    )
}

#[test]
fn two_ranks_share_the_evaluations_and_write_what_one_process_writes() {
    let dir = scratch("dist-eval");
    let indommlu = format!("{}\n[eval.mlm]\nsequences_per_source = 16", indommlu_section());

    // At a checkpoint: one update (learning rate 0), a checkpoint at step 1 with its hooks, the
    // held-out loss at steps 0 and 1.
    let (one, two) = one_and_two(&dir, "at", (1, 1), "", &indommlu);
    let (run_one, run_two) = (dir.join("ck/at/step-1"), dir.join("ck/at-2/step-1"));
    for file in ["bias.json", "bias_pairs.csv", "bias-aul/bias.json", "bias-aul/bias_pairs.csv"] {
        same_bytes(&run_one, &run_two, file);
    }
    for file in ["indommlu.json", "indommlu_questions.csv"] {
        same_bytes(&run_one, &run_two, file);
    }
    for step in [0, 1] {
        let line = |stdout: &str| {
            let head = format!("step {step}: held-out MLM loss ");
            stdout.lines().find(|l| l.starts_with(&head) && l.contains("perplexity")).map(str::to_string)
        };
        assert_eq!(line(&one), line(&two), "the held-out loss at step {step}");
        assert!(line(&one).is_some(), "no held-out loss at step {step} in:\n{one}");
    }
    // The curves as TensorBoard reads them: the held-out loss, IndoMMLU, every bias curve.
    let (tb_one, tb_two) = (board("tb-scalars", &dir.join("runs/at")), board("tb-scalars", &dir.join("runs/at-2")));
    let evaluated = |tb: &serde_json::Value| -> Vec<(String, serde_json::Value)> {
        let tags = tb.as_object().unwrap().iter();
        let wanted = |t: &String| t.starts_with("eval/") || t.starts_with("indommlu/");
        tags.filter(|&(t, _)| wanted(t)).map(|(t, v)| (t.clone(), v.clone())).collect()
    };
    let tags: Vec<String> = evaluated(&tb_one).into_iter().map(|(t, _)| t).collect();
    for tag in ["eval/mlm_loss", "eval/perplexity", "indommlu/average", "indommlu/ece"] {
        assert!(tags.iter().any(|t| t == tag), "no {tag} in {tags:?}");
    }
    assert_eq!(evaluated(&tb_one), evaluated(&tb_two));
    assert_eq!(tb_one["eval/mlm_loss"].as_array().unwrap().len(), 2, "steps 0 and 1: {tb_one}");
    for sub in ["", "aul"] {
        let (a, b) = (bias_points(&dir.join("runs/at").join(sub), 1), bias_points(&dir.join("runs/at-2").join(sub), 1));
        assert!(!a.is_empty(), "no bias curves under runs/at/{sub}");
        assert_eq!(a, b, "the bias curves under runs/at/{sub}");
    }
    // Only rank 0 wrote: one event file in each TensorBoard folder, as one process writes.
    assert_eq!(event_files(&dir.join("runs/at")), event_files(&dir.join("runs/at-2")));
    // Each rank scored half of every evaluation.
    split_in_half(&two, 0, "held-out MLM loss");
    split_in_half(&two, 1, "held-out MLM loss");
    split_in_half(&two, 1, "bias evaluation");
    split_in_half(&two, 1, "IndoMMLU evaluation");
    println!(
        "step 1 hooks: one process {:.2}s (bias) and {:.2}s (IndoMMLU); two ranks {:.2}s and {:.2}s",
        took(&one, 1, "bias evaluation"),
        took(&one, 1, "IndoMMLU evaluation"),
        took(&two, 1, "bias evaluation"),
        took(&two, 1, "IndoMMLU evaluation")
    );
    assert!(!one.contains("shared by"), "one process shares nothing:\n{one}");

    // Between checkpoints: the bias hook every step, a checkpoint at step 2 only; step 1's
    // evaluation (its weights still the seed's) goes to evals/step-1.
    let (one, two) = one_and_two(&dir, "between", (2, 2), "every = 1", "");
    let (evals_one, evals_two) = (dir.join("ck/between/evals/step-1"), dir.join("ck/between-2/evals/step-1"));
    for file in ["bias.json", "bias_pairs.csv", "bias-aul/bias.json", "bias-aul/bias_pairs.csv"] {
        same_bytes(&evals_one, &evals_two, file);
    }
    let (a, b) = (bias_points(&dir.join("runs/between"), 1), bias_points(&dir.join("runs/between-2"), 1));
    assert!(!a.is_empty());
    assert_eq!(a, b, "the bias curves at step 1");
    split_in_half(&two, 1, "bias evaluation");
    // The checkpoint at step 2 (trained weights, which two ranks reach to float summation order
    // only) was evaluated by both, shared likewise.
    split_in_half(&two, 2, "bias evaluation");
    assert!(dir.join("ck/between-2/step-2/bias.json").is_file() && one.contains("step 2: bias evaluation took"));
}

/// A failure on rank 1 alone inside the shared evaluations, with `--dist-timeout 300`: at step
/// 2 a real libtorch out-of-memory error (the test-only `INDOLM_TEST_TORCH_FAILURE`) before rank 1
/// scores anything, while rank 0 waits in the bias evaluation's first combine; at step 4 the bias
/// evaluation fails on rank 1 only (`INDOLM_TEST_FAIL_HOOK`), and the IndoMMLU evaluation after
/// it still runs on both. Every time both ranks leave the evaluations together and warn (rank 0 on
/// its log, rank 1 on stderr), training goes on, rank 0 redoes both checkpoints' evaluations at
/// step 6, and both exit 0: seconds, not the collectives' timeout.
#[test]
fn a_failure_on_one_rank_in_a_shared_evaluation_fails_it_on_every_rank_and_training_goes_on() {
    let dir = scratch("dist-eval-failure");
    let path = recipe(&dir, "fails", (6, 2), "", &indommlu_section());
    let started = std::time::Instant::now();
    let outputs = crate::dist::train_two_ranks_with(&path, 300, &[], |rank| match rank {
        1 => vec![
            ("INDOLM_TEST_TORCH_FAILURE", "checkpoint@2".to_string()),
            ("INDOLM_TEST_FAIL_HOOK", "bias evaluation@4@1".to_string()),
        ],
        _ => vec![],
    });
    let seconds = started.elapsed().as_secs_f64();
    let text = |b: &[u8]| String::from_utf8_lossy(b).to_string();
    let (out0, err0, err1) = (text(&outputs[0].stdout), text(&outputs[0].stderr), text(&outputs[1].stderr));
    for (rank, out) in outputs.iter().enumerate() {
        assert!(out.status.success(), "rank {rank} failed after {seconds:.1}s:\n{out0}\n{err0}\n{err1}");
    }
    let warning = |step: u64| {
        let head = format!("warning: step {step}: the checkpoint's evaluations failed");
        out0.lines().find(|l| l.starts_with(&head)).unwrap_or_else(|| panic!("no {head:?} in:\n{out0}")).to_string()
    };
    let (w2, w4) = (warning(2), warning(4));
    assert!(w2.contains("rank 1 failed in its share"), "{w2}");
    assert!(w4.contains("on rank 0 of 2: rank 1 failed in its share"), "{w4}");
    let rank1 = |step: u64| {
        let head = format!("warning: rank 1 of 2: step {step}: the checkpoint's evaluations failed");
        err1.lines().find(|l| l.starts_with(&head)).unwrap_or_else(|| panic!("no {head:?} in:\n{err1}")).to_string()
    };
    let (r2, r4) = (rank1(2), rank1(4));
    assert!(r2.contains("can't allocate memory") && r2.contains("ran out of memory in an evaluation"), "{r2}");
    assert!(r4.contains("failure injected by INDOLM_TEST_FAIL_HOOK"), "{r4}");
    // Step 4: the IndoMMLU evaluation ran on both ranks after the failed bias evaluation.
    assert!(out0.contains("step 4: IndoMMLU evaluation took"), "{out0}");
    split_in_half(&out0, 4, "IndoMMLU evaluation");
    // Both checkpoints redone by rank 0 at step 6; nothing left pending.
    for step in [2, 4] {
        assert!(
            out0.contains(&format!("step {step}: the evaluations of this checkpoint did not complete; redoing them")),
            "{out0}"
        );
        let ck = dir.join(format!("ck/fails/step-{step}"));
        assert!(ck.join("bias.json").is_file() && !ck.join("evaluation.pending").exists(), "step {step}");
    }
    assert!(!err0.contains("stopped") && !err1.contains("stopped"), "no rank was named lost:\n{err0}\n{err1}");
    println!("rank 0 at step 2: {w2}\nrank 1 at step 4: {r4}\nthe run of 6 steps took {seconds:.1}s");
    assert!(seconds < 150.0, "{seconds:.1}s: a rank waited for a collective's timeout");
}
