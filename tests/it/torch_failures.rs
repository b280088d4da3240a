//! libtorch failures outside the guarded update, as a CUDA out-of-memory would come: one in an
//! evaluation hook (the test-only `INDOLM_TEST_TORCH_FAILURE=evaluation@<step>` asks libtorch for
//! an impossibly large tensor inside the hook, a real out-of-memory exception) ends the run with
//! one line naming the run, the hook, the step and what to change, exit 1; one that nothing guards
//! (the test-only `INDOLM_TEST_UNGUARDED_FAILURE`, before the command runs) is caught by `main`'s
//! last resort: one line, exit 101, no Rust report or C++ backtrace, unless `RUST_BACKTRACE` asks
//! for them.
use crate::common::*;
use crate::train::{latest, write_recipe, SMALL_MODEL};
use std::process::{Command, Output};

/// `indolm` with `args`, `variable` set to `value`, `RUST_BACKTRACE` unset.
fn indolm_with(args: &[&str], variable: &str, value: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_indolm"))
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .env(variable, value)
        .output()
        .unwrap()
}

#[test]
fn a_libtorch_failure_in_an_evaluation_hook_is_one_error_naming_the_hook() {
    let dir = scratch("eval-hook-oom");
    let run = "lr = 1e-3\nbatch_size = 16\nwarmup_steps = 5\nmax_steps = 10";
    // A checkpoint every 5 steps, each after the held-out evaluation (`[eval.mlm]`).
    let recipe = write_recipe(&dir, "evaloom", SMALL_MODEL, run, 5, "");
    let path = recipe.to_str().unwrap();
    let out = indolm_with(&["--threads", "2", "train", path], "INDOLM_TEST_TORCH_FAILURE", "evaluation@5");
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{}", stderr.trim());
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.starts_with("error: run evaloom, the evaluation at step 5: "), "{stderr}");
    assert!(
        stderr.contains("can't allocate memory")
            && stderr.contains("the device ran out of memory in an evaluation, not in an update"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "one line, no panic or C++ backtrace: {stderr}");
    // The evaluation at step 0 ran; the failed one came before step 5's checkpoint.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("step 0: held-out MLM loss"), "{stdout}");
    assert_eq!(latest(&dir.join("checkpoints/evaloom")), None);
}

#[test]
fn a_panic_nothing_guards_is_one_line_and_exit_101() {
    let args = ["--threads", "1", "recipe", "check", "missing.toml"];
    let out = indolm_with(&args, "INDOLM_TEST_UNGUARDED_FAILURE", "1");
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{}", stderr.trim());
    assert_eq!(out.status.code(), Some(101), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: ")
            && stderr.contains("can't allocate memory")
            && stderr.contains("(an unexpected failure at ")
            && !stderr.contains("panicked")
            && !stderr.contains("Exception raised from"),
        "{stderr}"
    );
    // RUST_BACKTRACE keeps Rust's own report, for debugging.
    let full = Command::new(env!("CARGO_BIN_EXE_indolm"))
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .env("INDOLM_TEST_UNGUARDED_FAILURE", "1")
        .output()
        .unwrap();
    assert_eq!(full.status.code(), Some(101));
    assert!(String::from_utf8_lossy(&full.stderr).contains("panicked"));
}
