//! Translations as `eval bleu` reads them: a file of hypotheses and one or more reference files,
//! one sentence a line, aligned line by line and checked before anything is scored.
use indolm_core::error::{Error, Result};
use indolm_core::files::read_to_string;
use std::path::{Path, PathBuf};

/// The hypotheses of `hypotheses` and, for each file of `references`, its lines (a reference
/// stream aligned with the hypotheses); refused, naming the file, when a stream's length differs
/// from the hypotheses' or there are no hypotheses.
pub fn read_streams(hypotheses: &Path, references: &[PathBuf]) -> Result<(Vec<String>, Vec<Vec<String>>)> {
    let lines = |path: &Path| -> Result<Vec<String>> { Ok(read_to_string(path)?.lines().map(String::from).collect()) };
    let hyps = lines(hypotheses)?;
    if hyps.is_empty() {
        return Err(Error::invalid(hypotheses, "no translation to score: the file is empty (one sentence a line)"));
    }
    if references.is_empty() {
        return Err(Error::argument("--ref", "name at least one reference file"));
    }
    let mut streams = Vec::with_capacity(references.len());
    for path in references {
        let stream = lines(path)?;
        if stream.len() != hyps.len() {
            return Err(Error::invalid(
                path,
                format!("{} references but {} hypotheses in {}", stream.len(), hyps.len(), hypotheses.display()),
            ));
        }
        streams.push(stream);
    }
    Ok((hyps, streams))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_aligned_or_refused() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let (h, r1, r2) = (write("h", "a b\n\nc\n"), write("r1", "a\nb\nc"), write("r2", "x\n"));
        let (hyps, refs) = read_streams(&h, std::slice::from_ref(&r1)).unwrap();
        assert_eq!(hyps, ["a b", "", "c"]);
        assert_eq!(refs, [vec!["a", "b", "c"]]);
        let err = read_streams(&h, &[r1, r2]).unwrap_err().to_string();
        assert!(err.contains("1 references but 3 hypotheses"), "{err}");
        assert!(read_streams(&write("e", ""), std::slice::from_ref(&h)).unwrap_err().to_string().contains("empty"));
        assert!(read_streams(&h, &[]).is_err());
    }
}
