//! The GPU path, made checkable on a CPU: an update never makes the host wait for the device
//! (counted with libtorch's own operator hook, in one process and in two Gloo ranks, dropout
//! on); collectives refuse a tensor that is not on their device with indolm's own message; a
//! libtorch failure inside an update (a real out-of-memory) ends the run with one error naming
//! the step and what to change, the last checkpoint intact; a bf16 pretraining run (the
//! test-only `INDOLM_TEST_BF16_ON_CPU`) close to fp32; and evaluation batches (causal-LM
//! scoring and next-token reads, masked-LM PLL) that make the host wait once a batch, for their
//! read, with no copy from pageable host memory inside a forward pass; and the GPU check's
//! script rehearsed on the CPU, step by step, within its budgets.
use crate::common::*;
use crate::dist::{free_port, train_two_ranks};
use crate::train::{latest, write_recipe, SMALL_MODEL};
use indolm_torch::distributed::{Launch, ProcessGroup, ReduceOp};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use tch::{Device, Kind, Tensor};

/// The small model with its default dropout (0.1), a global batch of 16, logging every 5 steps.
fn recipe(dir: &Path, name: &str, steps: u64, top_level: &str) -> PathBuf {
    let run = format!("lr = 1e-3\nbatch_size = 16\nwarmup_steps = 5\nmax_steps = {steps}");
    let path = write_recipe(dir, name, SMALL_MODEL, &run, 5, "");
    let text =
        std::fs::read_to_string(&path).unwrap().replacen("seed = 3407\n", &format!("seed = 3407\n{top_level}\n"), 1);
    std::fs::write(&path, text).unwrap();
    path
}

/// The `host syncs per update: N` and `operations: N (...)` lines of `--op-counts` output.
fn op_summary(stdout: &str) -> (u64, u64) {
    let number = |prefix: &str| -> u64 {
        let line =
            stdout.lines().find(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("no {prefix:?} in {stdout}"));
        line[prefix.len()..].split_whitespace().next().unwrap().parse().unwrap()
    };
    (number("host syncs per update: "), number("operations: "))
}

#[test]
fn an_update_never_makes_the_host_wait_one_process_and_two_ranks() {
    let dir = scratch("op-counts");
    let one = recipe(&dir, "one", 8, "");
    let (stdout, _) = indolm_ok(&["--threads", "2", "train", one.to_str().unwrap(), "--op-counts"]);
    let (syncs, total) = op_summary(&stdout);
    let table: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("ATen operations"))
        .take_while(|l| !l.starts_with("host syncs"))
        .collect();
    println!("one process:\n{}", table.join("\n"));
    assert!(stdout.contains("ATen operations of the update of step 3"), "{stdout}");
    assert_eq!(syncs, 0, "an update made the host wait:\n{stdout}");
    assert!(
        stdout.contains("aten::_fused_adamw_") && stdout.contains("aten::native_dropout")
            || stdout.contains("aten::random_"),
        "{stdout}"
    );
    assert!(!stdout.contains("aten::nonzero") && total > 500, "{stdout}");

    let two = recipe(&dir, "two", 8, "");
    let outputs = train_two_ranks(&two, &["--op-counts"]);
    for (rank, out) in outputs.iter().enumerate() {
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "rank {rank}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        match rank {
            0 => {
                let (syncs, total) = op_summary(&stdout);
                println!("two Gloo ranks, rank 0: {total} operations, {syncs} host syncs");
                assert_eq!(syncs, 0, "{stdout}");
            }
            _ => assert!(stdout.contains("rank 1: update of step 3: host syncs per update: 0"), "{stdout}"),
        }
    }
}

#[test]
fn collectives_refuse_a_tensor_off_their_device_with_indolm_s_message() {
    // The check itself, as an NCCL group on cuda:0 applies it to a CPU tensor.
    let cpu = Tensor::ones([4], (Kind::Float, Device::Cpu));
    let err = indolm_torch::distributed::process_group::check_collective_tensor(
        &cpu,
        Device::Cuda(0),
        "the gradient all-reduce",
        0,
        2,
    )
    .unwrap_err()
    .to_string();
    assert!(err.starts_with("the gradient all-reduce on rank 0 of 2: handed a tensor on Cpu, but this group's collectives run on Cuda(0)"), "{err}");
    // A live Gloo group of one process: a non-contiguous tensor is refused before c10d sees it,
    // naming the call; a good one is reduced.
    let launch = Launch {
        launcher: "torchrun",
        rank: 0,
        world_size: 1,
        local_rank: 0,
        master_addr: "127.0.0.1".into(),
        master_port: free_port(),
        agent_store: false,
        gloo_interface: None,
        local_world_size: 1,
        restart_count: 0,
    };
    let mut group = ProcessGroup::gloo(&launch, Duration::from_secs(20)).unwrap();
    assert_eq!(group.device(), Device::Cpu);
    let mut strided = Tensor::ones([4, 3], (Kind::Float, Device::Cpu)).transpose(0, 1);
    let err = group.all_reduce(&mut strided, ReduceOp::Sum, "a test's all-reduce").unwrap_err().to_string();
    assert!(err.contains("a test's all-reduce on rank 0 of 1: handed a non-contiguous tensor"), "{err}");
    let mut fine = Tensor::full([3], 2.0, (Kind::Float, Device::Cpu));
    group.all_reduce(&mut fine, ReduceOp::Sum, "a test's all-reduce").unwrap();
    assert_eq!(Vec::<f32>::try_from(&fine).unwrap(), vec![2.0; 3]);
}

#[test]
fn a_libtorch_failure_in_an_update_is_one_error_and_the_checkpoint_survives() {
    let dir = scratch("oom");
    let path = recipe(&dir, "oom", 20, "");
    let out = Command::new(env!("CARGO_BIN_EXE_indolm"))
        .args(["--threads", "2", "train", path.to_str().unwrap()])
        .env("INDOLM_TEST_OOM_AT_STEP", "8")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{}", stderr.trim());
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with(
            "error: run oom, update of step 8 (1024 tokens an update, in 1 micro-batch(es) on 1 process(es)): "
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("can't allocate memory")
            && stderr.contains(
                "the device ran out of memory: lower optimizer.batch_size and raise optimizer.grad_accumulation"
            ),
        "{stderr}"
    );
    assert!(stderr.contains("the last checkpoint (step 5) is intact: resume with --resume latest"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line, no panic or C++ backtrace: {stderr}");
    let run = dir.join("checkpoints/oom");
    assert_eq!(latest(&run).as_deref(), Some("step-5"));
    let (stdout, _) = indolm_ok(&["--threads", "2", "train", path.to_str().unwrap(), "--resume", "latest"]);
    assert!(stdout.contains("finished at step 20"), "{stdout}");
}

#[test]
fn pretraining_in_bf16_on_the_cpu_is_close_to_fp32() {
    let dir = scratch("bf16-train");
    let quiet = "hidden_dropout_prob = 0.0\nattention_probs_dropout_prob = 0.0";
    let model = format!("{SMALL_MODEL}\n{quiet}");
    let make = |name: &str, top: &str| {
        let run = "lr = 1e-3\nbatch_size = 16\nwarmup_steps = 5\nmax_steps = 10";
        let path = write_recipe(&dir, name, &model, run, 10, "");
        let text =
            std::fs::read_to_string(&path).unwrap().replacen("seed = 3407\n", &format!("seed = 3407\n{top}\n"), 1);
        std::fs::write(&path, text).unwrap();
        path
    };
    let full = make("full", "precision = \"fp32\"\ndeterministic = true");
    let half = make("half", "precision = \"bf16\"");
    let refused = indolm_fails(&["train", half.to_str().unwrap()]);
    assert!(refused.contains("bf16 needs a CUDA device"), "{refused}");
    let train = |recipe: &Path| {
        let out = Command::new(env!("CARGO_BIN_EXE_indolm"))
            .args(["--threads", "2", "train", recipe.to_str().unwrap()])
            .env("INDOLM_TEST_BF16_ON_CPU", "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        stdout
    };
    let (a, b) = (train(&full), train(&half));
    assert!(a.contains(", Fp32, ") && b.contains(", Bf16, "), "{a}\n{b}");
    let losses = |run: &str| -> Vec<f64> {
        std::fs::read_to_string(dir.join("checkpoints").join(run).join("train_log.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["loss"].as_f64().unwrap())
            .collect()
    };
    let (la, lb) = (losses("full"), losses("half"));
    println!("losses at steps 5 and 10: fp32 {la:?}, bf16 {lb:?}");
    assert_eq!(la.len(), 2);
    for (x, y) in la.iter().zip(&lb) {
        assert!(((x - y) / x).abs() < 2e-2, "fp32 {la:?} against bf16 {lb:?}");
    }
    assert_ne!(la, lb, "bf16 and fp32 computed the same bits: the bf16 branches did not run");
}

/// `tests/gpu/device_check.sh --rehearse`, the GPU check rehearsed on the CPU at tiny sizes
/// (what runs on a lent GPU machine, where a broken script wastes the loan): every step runs and
/// reports its time against its budget, the budgets add up to at most 540 s, a hanging step is
/// stopped by its timeout and a failing one is recorded while the next ones go on, the one-rank
/// step (NCCL on a GPU, Gloo here) passes dist-check and trains with bf16 gradient sums and no
/// host wait, the attention step names libtorch's kernels, the two-rank step names the rank
/// killed during rank 0's evaluation, the per-task `--op-counts` step reports each task, and
/// `$OUT` holds only the log and the summary (the GPU's memory samples are a third file there).
/// Its preflight refuses a missing binary in one line before any step, prints the versions of
/// CUDA and NCCL beside the binary's, and skips the causal step with a line where one of its
/// Python packages does not import.
#[test]
fn the_device_check_script_rehearses_every_step_within_its_budget() {
    let dir = scratch("device-check");
    let out_dir = dir.join("out");
    let check = |out: &Path, bin: &Path| {
        let mut command = Command::new("bash");
        command
            .arg(root().join("tests/gpu/device_check.sh"))
            .arg("--rehearse")
            .env("OUT", out)
            .env("WORK", dir.join("work"))
            .env("BIN", bin)
            .env("PYTHON", python());
        command
    };
    let refused = check(&dir.join("refused"), &dir.join("no-such-indolm")).output().unwrap();
    let said = String::from_utf8_lossy(&refused.stdout).to_string();
    assert_eq!(refused.status.code(), Some(2), "{said}");
    assert!(said.starts_with("preflight failed: no indolm binary at ") && said.lines().count() == 1, "{said}");
    // A package the causal step needs that does not import: that step skipped, with its line.
    let skipped = check(&dir.join("skipped"), Path::new(env!("CARGO_BIN_EXE_indolm")))
        .env("ONLY", "causal")
        .env("CAUSAL_PACKAGES", "transformers no_such_package_here")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&skipped.stdout).to_string();
    assert!(skipped.status.success(), "{said}");
    assert!(
        said.contains(
            "python packages of the causal step (transformers no_such_package_here): missing: no_such_package_here"
        ),
        "{said}"
    );
    assert!(
        said.contains("=== causal: skipped: Python packages missing with ") && !said.contains("=== nccl"),
        "{said}"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("skipped/summary.json")).unwrap()).unwrap();
    assert_eq!(summary["steps"][0]["status"], "skipped", "{summary}");
    assert_eq!(summary["steps"].as_array().unwrap().len(), 1, "{summary}");

    let started = std::time::Instant::now();
    let out = check(&out_dir, Path::new(env!("CARGO_BIN_EXE_indolm")))
        .env("HANG_STEP", "pll")
        .env("BUDGET_pll", "3")
        .env("FAIL_STEP", "bias")
        .output()
        .unwrap();
    let seconds = started.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}\nrehearsal took {seconds:.0}s");
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let mut files: Vec<String> =
        std::fs::read_dir(&out_dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().to_string()).collect();
    files.sort();
    assert_eq!(files, vec!["device_check.log", "summary.json"]);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("summary.json")).unwrap()).unwrap();
    let steps = summary["steps"].as_array().unwrap();
    let status: Vec<(&str, &str)> =
        steps.iter().map(|s| (s["step"].as_str().unwrap(), s["status"].as_str().unwrap())).collect();
    let expected = [
        ("prepare", "ok"),
        ("nccl", "ok"),
        ("attention", "ok"),
        ("throughput", "ok"),
        ("two_ranks", "ok"),
        ("op_counts", "ok"),
        ("causal", "ok"),
        ("pll", "timeout"),
        ("bias", "failed"),
        ("decode", "ok"),
        ("tiny", "ok"),
    ];
    assert_eq!(status, expected.to_vec(), "{summary}");
    // Every step timed, within its budget (a hanging one stopped at it), and said so as it ended.
    for s in steps {
        let (name, took) = (s["step"].as_str().unwrap(), s["seconds"].as_f64().unwrap());
        let budget = s["budget_s"].as_u64().unwrap() as f64;
        assert!(took <= budget + 6.0, "{name} took {took}s of its {budget}s");
        let ended = format!("=== {name}: {} (exit ", s["status"].as_str().unwrap());
        assert!(stdout.contains(&ended) && stdout.contains(&format!("s of {budget}s")), "{name}:\n{stdout}");
    }
    let total = summary["budget_total_s"].as_u64().unwrap();
    assert!(total <= 540 && summary["budget_limit_s"] == 540, "{summary}");
    assert!(stdout.contains(&format!("= {total}s of at most 540s")), "{stdout}");
    for line in [
        "binary built against torch 2.11",
        "python packages of the causal step (transformers tokenizers safetensors): all import",
    ] {
        assert!(stdout.contains(line), "{line:?} missing:\n{stdout}");
    }
    let figures = |step: &str| {
        let found = steps.iter().find(|s| s["step"] == step).unwrap_or_else(|| panic!("no {step} in {summary}"));
        found["figures"].to_string()
    };
    let one = figures("nccl");
    for said in [
        "nccl: rehearsed with one Gloo rank on the CPU (NCCL needs CUDA)",
        "dist-check on one Gloo rank: passed",
        "10 of 10 buckets launched during backward",
        "(in bf16, buckets of 0.25 MiB)",
        "one-rank Gloo training, gradients summed in bf16: host syncs per update: 0",
    ] {
        assert!(one.contains(said), "{said:?} missing: {one}");
    }
    let attention = figures("attention");
    assert!(
        attention.contains("32 query heads over 8 key/value heads, 512 tokens, head dim 128, BFloat16")
            && attention.contains("attention, boolean padding mask: flash attention with the grouped heads in place"),
        "{attention}"
    );
    let throughput = figures("throughput");
    assert!(throughput.contains("host syncs per update: 0") && throughput.contains("step times"), "{throughput}");
    let two = figures("two_ranks");
    assert!(two.contains("all-reduce of 1 MB over 2 Gloo ranks") && two.contains("data parallel over 2"), "{two}");
    assert!(two.contains("rank 1 ended after") && two.contains("rank 0 stopped (no heartbeat in the store)"), "{two}");
    let ops = figures("op_counts");
    for task in ["sentiment: ", "BertExt: ", "BertAbs: "] {
        let said = |what: &str| ops.contains(&format!("{task}{what}"));
        assert!(said("host syncs per update: ") || said("skipped: flag missing"), "{task}{ops}");
    }
    let causal = figures("causal");
    assert!(causal.contains("30 of 30 predictions equal") && causal.contains("tokens/s"), "{causal}");
    // Two to four minutes on two loaded cores; the bound is still far below the device's
    // 10-minute command, which the full-size script must fit.
    assert!(seconds < 300.0, "the rehearsal took {seconds:.0}s");
}

/// Runs `body` in a child process of this test binary running this test alone, so that the
/// operation count (global to the process) sees nothing of other tests running beside it.
fn alone(test: &str, body: impl FnOnce()) {
    if std::env::var_os("INDOLM_TEST_ALONE").is_some() {
        body();
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--test-threads=1", "--nocapture"])
        .env("INDOLM_TEST_ALONE", "1")
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    println!("{stdout}");
    assert!(out.status.success() && stdout.contains("1 passed"), "{stdout}\n{stderr}");
}

/// The host syncs of `work` and its operation table.
fn syncs_of(work: impl FnOnce()) -> (u64, String) {
    let counter = indolm_torch::device::op_counts::OpCounter::start().unwrap();
    work();
    let counts = counter.stop().unwrap();
    (counts.host_syncs(), counts.table("operations"))
}

#[test]
fn evaluation_batches_make_the_host_wait_once_for_their_read() {
    use indolm_eval::causal::CausalScorer;
    alone("gpu_readiness::evaluation_batches_make_the_host_wait_once_for_their_read", || {
        let texts = ["Ibu kota Indonesia adalah Jakarta.", "Dia membeli buah di pasar.", "Anak-anak bermain bola."];
        // Gemma 2 (RoPE, the scaled embeddings) and BLOOM (ALiBi): what a forward pass once
        // copied from the host each time.
        for family in ["gemma2", "bloom"] {
            let dir = scratch(&format!("syncs-{family}"));
            reference(&["make-decoder", family, dir.to_str().unwrap()]);
            let lm = indolm_torch::model::decoder::load_causal_lm(&dir, Device::Cpu).unwrap();
            let mut scorer = CausalScorer::new(&lm).unwrap();
            let ids: Vec<Vec<i64>> = texts.iter().map(|t| scorer.encode(t).unwrap()).collect();
            for (budget, batches) in [(4096, 1), (1, texts.len() as u64)] {
                scorer.token_budget = budget;
                let (syncs, table) = syncs_of(|| {
                    scorer.score_ids(&ids);
                });
                println!("{family}: scoring {} sentences in {batches} batches: {syncs} host syncs", texts.len());
                assert_eq!(syncs, batches, "{family}:\n{table}");
                let letters: Vec<Vec<i64>> = ids.iter().map(|_| vec![4, 5, 6]).collect();
                let (syncs, table) = syncs_of(|| {
                    scorer.next_token_log_probs(&ids, &letters);
                });
                assert_eq!(syncs, batches, "{family} next-token reads:\n{table}");
            }
        }
        // Masked-LM PLL, the bias evaluation's scorer.
        let loaded = indolm_torch::model::model_dir::load_masked_lm(reference_model(), Device::Cpu).unwrap();
        let scorer = indolm_eval::pll::PllScorer::new(&loaded.model, &loaded.tokenizer, Device::Cpu);
        let inputs: Vec<indolm_eval::pll::ScoringInput> = texts
            .iter()
            .map(|t| {
                let ids: Vec<i64> = loaded.tokenizer.encode(t).unwrap().into_iter().map(i64::from).collect();
                let positions = (1..ids.len() - 1).collect();
                indolm_eval::pll::ScoringInput::one_at_a_time(ids, positions)
            })
            .collect();
        let (syncs, table) = syncs_of(|| {
            scorer.score(&inputs);
        });
        println!("masked-LM PLL of {} sentences: {syncs} host syncs", texts.len());
        assert_eq!(syncs, 1, "PLL:\n{table}");
        // AUL/AULA: one pass with nothing masked, the attention maps too.
        let unmasked = indolm_eval::aul::UnmaskedScorer::new(&loaded.model, &loaded.tokenizer, Device::Cpu);
        let sentences: Vec<Vec<i64>> = texts.iter().map(|t| unmasked.input(t).unwrap()).collect();
        let (syncs, table) = syncs_of(|| {
            unmasked.score(&sentences);
        });
        println!("AUL/AULA of {} sentences: {syncs} host syncs", texts.len());
        assert_eq!(syncs, 1, "AUL:\n{table}");
    });
}
