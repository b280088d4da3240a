//! The `indolm` command line: parses arguments, runs one subcommand, and turns any error
//! into one clear message on stderr with a non-zero exit.
mod cli;

use clap::Parser;

fn main() {
    let args = cli::Cli::parse();
    if let Err(err) = cli::run(args) {
        eprintln!("error: {err}");
        std::process::exit(1);
    }
}
