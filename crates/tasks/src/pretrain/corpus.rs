//! From a recipe's `[data]` to a ready mixture: prepare (or reuse) each source's shard under
//! `corpora/<corpus>/`, then open them as a weighted, seeded mixture.
use super::recipe::PretrainRecipe;
use indolm_core::files::DirLock;
use indolm_torch::data::mixture::Mixture;
use indolm_torch::data::shards::{open_shard, prepare_source, Prepared, ShardMeta};
use indolm_torch::data::tokenizer::TextTokenizer;
use indolm_torch::error::{Error, Result};
use std::collections::BTreeMap;
use std::path::Path;

/// What a resumed run started on: each source's content key, as its checkpoint recorded it.
#[derive(Clone, Copy)]
pub struct PinnedCorpus<'a> {
    /// The checkpoint that recorded them.
    pub checkpoint: &'a Path,
    /// Source name to `content_sha256` (a source absent here is not pinned).
    pub contents: &'a BTreeMap<String, String>,
}

/// Prepares every source of the recipe, holding the corpus's lock; `say` receives one line per
/// source. With `pinned`, a source whose files changed is refused before anything is written.
pub fn prepare_corpus(
    recipe: &PretrainRecipe,
    tokenizer: &TextTokenizer,
    pinned: Option<PinnedCorpus>,
    mut say: impl FnMut(&str),
) -> Result<Vec<ShardMeta>> {
    let dir = recipe.corpus_dir();
    // Two preparers of one corpus would write the same temporary shard files.
    let _lock = DirLock::acquire(&dir)?;
    let mut metas = Vec::new();
    for source in &recipe.data.sources {
        let start = std::time::Instant::now();
        let required = pinned.and_then(|p| p.contents.get(&source.name)).map(String::as_str);
        let meta = match prepare_source(source, &recipe.base_dir, &dir, tokenizer, required, |_| {})? {
            Prepared::ContentDiffers { found } => {
                let checkpoint = pinned.map_or(Path::new(""), |p| p.checkpoint);
                return Err(Error::data(
                    format!("source `{}`", source.name),
                    format!(
                        "its files changed since the run started (content {}, now {}; recorded in {}): restore them, or pass --force to continue on the new text (it is tokenized again and the held-out set changes)",
                        &required.unwrap_or_default()[..12.min(required.unwrap_or_default().len())],
                        &found[..12],
                        checkpoint.join("trainer_state.json").display()
                    ),
                ));
            }
            Prepared::UpToDate(meta) => {
                say(&format!(
                    "corpus {}: source `{}` up to date ({} tokens)",
                    recipe.data.corpus, source.name, meta.tokens
                ));
                meta
            }
            Prepared::Written(meta) => {
                let secs = start.elapsed().as_secs_f64();
                say(&format!(
                    "corpus {}: prepared `{}` ({}): {} documents, {} tokens, {:.2}% [UNK], {} invalid UTF-8 lines skipped, {:.0} tokens/s",
                    recipe.data.corpus,
                    source.name,
                    source.lang,
                    meta.documents,
                    meta.tokens,
                    100.0 * meta.unk_tokens as f64 / meta.tokens.max(1) as f64,
                    meta.read.invalid_utf8_lines,
                    meta.tokens as f64 / secs.max(1e-9)
                ));
                meta
            }
        };
        metas.push(meta);
    }
    Ok(metas)
}

/// Prepares the corpus if needed and opens the mixture of its sources. Weights that do not sum
/// to 1 are normalised, with a notice.
pub fn open_mixture(
    recipe: &PretrainRecipe,
    tokenizer: &TextTokenizer,
    pinned: Option<PinnedCorpus>,
    mut say: impl FnMut(&str),
) -> Result<Mixture> {
    prepare_corpus(recipe, tokenizer, pinned, &mut say)?;
    open_prepared_mixture(recipe, tokenizer, say)
}

/// Opens the mixture of a corpus that is already prepared (by another rank of a data-parallel
/// run), without reading the source files again.
pub(crate) fn open_prepared_mixture(
    recipe: &PretrainRecipe,
    tokenizer: &TextTokenizer,
    mut say: impl FnMut(&str),
) -> Result<Mixture> {
    let total: f64 = recipe.data.sources.iter().map(|s| s.weight).sum();
    if (total - 1.0).abs() > 1e-9 {
        let shares: Vec<String> =
            recipe.data.sources.iter().map(|s| format!("{} {:.3}", s.name, s.weight / total)).collect();
        say(&format!("note: the source weights sum to {total}; normalised to {}", shares.join(", ")));
    }
    let dir = recipe.corpus_dir();
    let shards = recipe
        .data
        .sources
        .iter()
        .map(|s| Ok((open_shard(&dir, &s.name, tokenizer)?, s.weight)))
        .collect::<Result<Vec<_>>>()?;
    Mixture::new(
        shards,
        recipe.data.seq_len,
        recipe.seed,
        recipe.data.heldout_fraction,
        tokenizer.special.cls,
        tokenizer.special.sep,
    )
}
