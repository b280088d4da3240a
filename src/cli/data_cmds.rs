//! Data subcommands: tokenizer training (and corpus preparation and statistics).
use indolm::data::sources::SourceSpec;
use indolm::data::tokenizer_train::{train_wordpiece, TrainOptions};
use indolm::error::Result;
use indolm::model::model_dir::save_model_dir;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

pub fn train_tokenizer(files: &[String], vocab_size: usize, min_frequency: u64, out: &Path, overwrite: bool) -> Result<()> {
    let source = SourceSpec { name: "files".into(), lang: "id".into(), paths: files.to_vec(), format: None, text_field: "text".into(), weight: 1.0 };
    let mut paragraphs = Vec::new();
    let stats = source.read_documents(&PathBuf::from("."), |doc| paragraphs.extend(doc))?;
    if stats.invalid_utf8_lines > 0 {
        eprintln!("note: skipped {} line(s) that are not valid UTF-8", stats.invalid_utf8_lines);
    }
    let options = TrainOptions { vocab_size, min_frequency, lowercase: true, show_progress: std::io::stderr().is_terminal() };
    let tokenizer = train_wordpiece(&paragraphs, &options)?;
    save_model_dir(out, overwrite, |dir| {
        std::fs::create_dir_all(dir).map_err(|e| indolm::error::Error::io(dir, e))?;
        tokenizer.save(dir)
    })?;
    println!(
        "trained a WordPiece of {} pieces on {} paragraphs ({} documents, {} files) -> {}",
        tokenizer.vocab_size(),
        stats.paragraphs,
        stats.documents,
        stats.files,
        out.display()
    );
    Ok(())
}
