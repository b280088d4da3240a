//! Test-only, not a user option: with `INDOLM_TEST_HELP_TREE=1`, `indolm` prints the `-h` text of
//! every command of its tree as one JSON array, `[{"path": ["eval", "bias"], "help": "..."}, ...]`,
//! each text exactly what `indolm <path> -h` prints (clap renders it for that very command line).
//! The guide's check (`tests/it/docs.rs`) reads the whole tree from this one process instead of
//! one process (and one load of libtorch) per command.
use super::Cli;
use clap::CommandFactory;

/// Whether the variable asks for the tree.
pub fn asked() -> bool {
    std::env::var("INDOLM_TEST_HELP_TREE").is_ok_and(|v| v == "1")
}

/// The tree as JSON: every command that `-h` lists (hidden ones and `help` left out), depth first.
pub fn json() -> String {
    let mut entries = Vec::new();
    walk(&Cli::command(), Vec::new(), &mut entries);
    serde_json::to_string(&entries).expect("strings serialize")
}

fn walk(command: &clap::Command, path: Vec<String>, out: &mut Vec<serde_json::Value>) {
    let argv = std::iter::once("indolm".to_string()).chain(path.iter().cloned()).chain(["-h".to_string()]);
    let help = match Cli::command().try_get_matches_from(argv) {
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => e.render().to_string(),
        Err(e) => format!("{path:?} -h gave no help: {e}"),
        Ok(_) => format!("{path:?} -h parsed as a command line"),
    };
    out.push(serde_json::json!({ "path": path, "help": help }));
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
        let mut child = path.clone();
        child.push(sub.get_name().to_string());
        walk(sub, child, out);
    }
}
