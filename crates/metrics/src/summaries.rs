//! Predicted and reference summaries as every summary metric reads them (ROUGE here, BERTScore in
//! `indolm-eval`): two files of one summary a line, aligned line by line, checked once
//! ([`read_aligned`]) before anything is scored.
use indolm_core::error::{Error, Result};
use indolm_core::files::read_to_string;
use std::path::Path;

/// The (prediction, reference) pairs of the lines of `predictions` and `references`, in order;
/// refused, naming the predictions' file, when the two files hold different numbers of lines or
/// every prediction is blank.
pub fn read_aligned(predictions: &Path, references: &Path) -> Result<Vec<(String, String)>> {
    let (p, r) = (read_to_string(predictions)?, read_to_string(references)?);
    let (p, r): (Vec<&str>, Vec<&str>) = (p.lines().collect(), r.lines().collect());
    if p.len() != r.len() {
        return Err(Error::invalid(
            predictions,
            format!("{} predictions but {} references in {}", p.len(), r.len(), references.display()),
        ));
    }
    if p.iter().all(|l| l.trim().is_empty()) {
        return Err(Error::invalid(
            predictions,
            "no summary to score: the file is empty or blank (one summary a line)",
        ));
    }
    Ok(p.iter().zip(&r).map(|(a, b)| (a.to_string(), b.to_string())).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_lines_are_paired_and_misaligned_or_blank_files_refused() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let (pred, reference) = (write("pred.txt", "a b\n\nc\n"), write("ref.txt", "a\nb\nc d\n"));
        let pairs = read_aligned(&pred, &reference).unwrap();
        assert_eq!(pairs, [("a b", "a"), ("", "b"), ("c", "c d")].map(|(p, r)| (p.to_string(), r.to_string())));
        let short = write("short.txt", "a\n");
        let err = read_aligned(&pred, &short).unwrap_err().to_string();
        assert!(err.contains("pred.txt") && err.contains("3 predictions but 1 references in"), "{err}");
        let blank = write("blank.txt", " \n\n\t\n");
        let err = read_aligned(&blank, &reference).unwrap_err().to_string();
        assert!(err.contains("blank.txt") && err.contains("no summary to score"), "{err}");
    }
}
