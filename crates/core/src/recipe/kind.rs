//! A recipe's kind: which task it describes and which command runs it, named by its top-level
//! `kind = "…"` and read here, in one place, by every command that reads a recipe. A recipe
//! written before recipes named their kind is read by the keys that tell the kinds apart, with
//! a one-line note saying so.
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The kinds of recipe, one per task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecipeKind {
    /// Masked-LM pretraining (`indolm train`).
    Pretrain,
    /// NusaX sentiment fine-tuning (`indolm finetune sentiment`).
    Sentiment,
    /// Liputan6 summarization fine-tuning (`indolm finetune summarize`).
    Summarize,
}

impl RecipeKind {
    /// Every kind, in the order the guide lists them.
    pub const ALL: [RecipeKind; 3] = [RecipeKind::Pretrain, RecipeKind::Sentiment, RecipeKind::Summarize];

    /// As `kind = "…"` spells it.
    pub fn name(self) -> &'static str {
        match self {
            RecipeKind::Pretrain => "pretrain",
            RecipeKind::Sentiment => "sentiment",
            RecipeKind::Summarize => "summarize",
        }
    }

    /// The command that runs a recipe of this kind.
    pub fn command(self) -> &'static str {
        match self {
            RecipeKind::Pretrain => "indolm train",
            RecipeKind::Sentiment => "indolm finetune sentiment",
            RecipeKind::Summarize => "indolm finetune summarize",
        }
    }

    /// The kind the keys of a recipe without `kind` show: a top-level `task` is summarization, a
    /// `[data] setting` sentiment, anything else pretraining.
    fn guessed(table: &toml::Table) -> RecipeKind {
        if table.contains_key("task") {
            RecipeKind::Summarize
        } else if table.get("data").and_then(|d| d.get("setting")).is_some() {
            RecipeKind::Sentiment
        } else {
            RecipeKind::Pretrain
        }
    }
}

/// The kind of the recipe at `path`: its `kind`, or for a recipe that names none the kind its
/// keys show, with the note to print; `None` for a file that is not TOML (its reader names the
/// line). A `kind` no command reads is an error naming the kinds.
pub fn kind_of(path: &Path) -> Result<Option<(RecipeKind, Option<String>)>> {
    let text = crate::files::read_to_string(path)?;
    let Ok(table) = toml::from_str::<toml::Table>(&text) else { return Ok(None) };
    match table.get("kind") {
        Some(toml::Value::String(name)) => match RecipeKind::ALL.into_iter().find(|k| k.name() == name) {
            Some(kind) => Ok(Some((kind, None))),
            None => {
                let names: Vec<&str> = RecipeKind::ALL.iter().map(|k| k.name()).collect();
                Err(Error::field(
                    path,
                    "kind",
                    format!("`{name}` is not a recipe kind (expected one of {})", names.join(", ")),
                ))
            }
        },
        Some(other) => Err(Error::field(path, "kind", format!("expected a string, found {other}"))),
        None => {
            let kind = RecipeKind::guessed(&table);
            let note = format!(
                "note: {} names no kind: read as a {} recipe (add `kind = \"{}\"` at its top)",
                path.display(),
                kind.name(),
                kind.name()
            );
            Ok(Some((kind, Some(note))))
        }
    }
}

/// Refuses the recipe at `path` unless it is of kind `expected`, naming the command that runs
/// the kind it is; prints the note of a recipe that names no kind (on stderr).
pub fn expect_kind(path: &Path, expected: RecipeKind) -> Result<()> {
    let Some((kind, note)) = kind_of(path)? else { return Ok(()) };
    if kind != expected {
        return Err(Error::field(
            path,
            "kind",
            format!("this is a {} recipe, run by `{}`, not by `{}`", kind.name(), kind.command(), expected.command()),
        ));
    }
    if let Some(note) = note {
        eprintln!("{note}");
    }
    Ok(())
}
