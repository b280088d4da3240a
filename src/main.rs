//! The `indolm` command line: parses arguments, runs one subcommand, and turns any error
//! into one clear message on stderr with a non-zero exit; a panic nothing else caught (see
//! `indolm_torch::device::torch_errors::run_main`) too, in one line, with exit code 101.
mod cli;

use clap::Parser;
use std::ffi::OsString;
use std::io::Write;

fn main() {
    #[cfg(feature = "test-hooks")]
    if cli::fork_server::asked() {
        cli::fork_server::serve(|argv| run(argv.into_iter().map(OsString::from).collect()), exit_now);
    }
    exit_now(run(std::env::args_os().collect()));
}

/// Ends the process with `code` once its output is flushed, without running the C++ static
/// destructors libtorch registers: they free its operator registry, about 0.2 s of CPU at every
/// exit, for nothing. Everything indolm writes is complete before this (files are written to a
/// temporary name, synced and renamed, and closed when `run` returns), and Rust runs no static
/// destructors anyway.
pub fn exit_now(code: i32) -> ! {
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: flushing C's streams and ending the process; nothing runs after this.
    unsafe {
        libc::fflush(std::ptr::null_mut());
        libc::_exit(code)
    }
}

/// Runs the command line `argv` (the program's name first); its exit code. A panic that escapes
/// the command is reported in one line and ends it with exit code 101.
fn run(argv: Vec<OsString>) -> i32 {
    indolm_torch::device::torch_errors::run_main(|| run_command(argv))
}

/// [`run`] without the last-resort catch.
fn run_command(argv: Vec<OsString>) -> i32 {
    // Test-only (not a user option): a libtorch failure outside every guard, so that the tests
    // can see the last-resort catch report it.
    if std::env::var_os("INDOLM_TEST_UNGUARDED_FAILURE").is_some() {
        let _ = tch::Tensor::empty([1i64 << 50], (tch::Kind::Float, tch::Device::Cpu));
    }
    #[cfg(feature = "test-hooks")]
    if cli::help_tree::asked() {
        println!("{}", cli::help_tree::json());
        return 0;
    }
    // As `Cli::parse_from`, returning the code (help, version, usage errors) instead of exiting.
    let args = match cli::Cli::try_parse_from(argv) {
        Ok(args) => args,
        Err(e) => {
            let _ = e.print();
            return e.exit_code();
        }
    };
    match cli::run(args) {
        Ok(()) => 0,
        Err(err) => {
            eprintln!("error: {err}");
            1
        }
    }
}
