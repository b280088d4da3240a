//! A recipe's kind: which task it describes and which command runs it, named by its top-level
//! `kind = "…"` and read here, in one place, by every command that reads a recipe. The kinds are
//! not known here: each task declares its own ([`RecipeKind`]) and the caller hands the list in.
//! A recipe written before recipes named their kind is read by the keys that tell the kinds
//! apart ([`OldRecipes`]), with a one-line note saying so.
use crate::error::{Error, Result};
use std::path::Path;

/// How a recipe written before recipes named their kind shows that it is of a kind.
#[derive(Debug, Clone, Copy)]
pub enum OldRecipes {
    /// Every recipe of the kind names it.
    Never,
    /// Recipes whose top-level table passes this test (tried in the order of the kinds).
    When(fn(&toml::Table) -> bool),
    /// Every recipe no other kind recognises (one kind at most).
    Otherwise,
}

/// A kind of recipe, as its task declares it.
#[derive(Debug, Clone, Copy)]
pub struct RecipeKind {
    /// As `kind = "…"` spells it.
    pub name: &'static str,
    /// The command that runs a recipe of this kind (`indolm train`).
    pub command: &'static str,
    /// How a recipe of this kind that names no kind is recognised.
    pub old_recipes: OldRecipes,
}

impl PartialEq for RecipeKind {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for RecipeKind {}

/// The kind the keys of a recipe without `kind` show: the first of `kinds` whose test it passes,
/// else the kind of every other recipe (`None` if no kind is).
fn guessed<'k>(table: &toml::Table, kinds: &'k [RecipeKind]) -> Option<&'k RecipeKind> {
    let recognised = kinds.iter().find(|k| matches!(k.old_recipes, OldRecipes::When(test) if test(table)));
    recognised.or_else(|| kinds.iter().find(|k| matches!(k.old_recipes, OldRecipes::Otherwise)))
}

/// The kind of the recipe at `path` among `kinds`: its `kind`, or for a recipe that names none
/// the kind its keys show, with the note to print; `None` for a file that is not TOML (its
/// reader names the line) or one no kind recognises. A `kind` no command reads is an error
/// naming the kinds.
pub fn kind_of<'k>(path: &Path, kinds: &'k [RecipeKind]) -> Result<Option<(&'k RecipeKind, Option<String>)>> {
    let text = crate::files::read_to_string(path)?;
    let Ok(table) = toml::from_str::<toml::Table>(&text) else { return Ok(None) };
    match table.get("kind") {
        Some(toml::Value::String(name)) => match kinds.iter().find(|k| k.name == name) {
            Some(kind) => Ok(Some((kind, None))),
            None => {
                let names: Vec<&str> = kinds.iter().map(|k| k.name).collect();
                Err(Error::field(
                    path,
                    "kind",
                    format!("`{name}` is not a recipe kind (expected one of {})", names.join(", ")),
                ))
            }
        },
        Some(other) => Err(Error::field(path, "kind", format!("expected a string, found {other}"))),
        None => Ok(guessed(&table, kinds).map(|kind| {
            let note = format!(
                "note: {} names no kind: read as a {} recipe (add `kind = \"{}\"` at its top)",
                path.display(),
                kind.name,
                kind.name
            );
            (kind, Some(note))
        })),
    }
}

/// Refuses the recipe at `path` unless it is of kind `expected` (one of `kinds`), naming the
/// command that runs the kind it is; prints the note of a recipe that names no kind (on stderr).
pub fn expect_kind(path: &Path, expected: &RecipeKind, kinds: &[RecipeKind]) -> Result<()> {
    let Some((kind, note)) = kind_of(path, kinds)? else { return Ok(()) };
    if kind != expected {
        return Err(Error::field(
            path,
            "kind",
            format!("this is a {} recipe, run by `{}`, not by `{}`", kind.name, kind.command, expected.command),
        ));
    }
    if let Some(note) = note {
        eprintln!("{note}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const KINDS: [RecipeKind; 3] = [
        RecipeKind { name: "plain", command: "indolm plain", old_recipes: OldRecipes::Otherwise },
        RecipeKind {
            name: "marked",
            command: "indolm marked",
            old_recipes: OldRecipes::When(|t| t.contains_key("mark")),
        },
        RecipeKind { name: "named", command: "indolm named", old_recipes: OldRecipes::Never },
    ];

    fn kind_of_text(text: &str) -> Result<Option<(&'static str, bool)>> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.toml");
        std::fs::write(&path, text).unwrap();
        Ok(kind_of(&path, &KINDS)?.map(|(k, note)| (k.name, note.is_some())))
    }

    #[test]
    fn a_named_kind_is_read_an_old_recipe_is_recognised_and_an_unknown_kind_names_the_kinds() {
        assert_eq!(kind_of_text("kind = \"named\"\nmark = 1\n").unwrap(), Some(("named", false)));
        assert_eq!(kind_of_text("mark = 1\n").unwrap(), Some(("marked", true)));
        assert_eq!(kind_of_text("other = 1\n").unwrap(), Some(("plain", true)));
        assert_eq!(kind_of_text("not toml [").unwrap(), None);
        let err = kind_of_text("kind = \"nmaed\"\n").unwrap_err().to_string();
        assert!(err.contains("`nmaed` is not a recipe kind (expected one of plain, marked, named)"), "{err}");
        let err = kind_of_text("kind = 3\n").unwrap_err().to_string();
        assert!(err.contains("expected a string, found 3"), "{err}");
    }
}
