//! The NusaX bilingual lexicon (`<root>/lexicon/<language>.csv`: Indonesian words and phrases
//! with their translations, one pair a row, several rows for a word with several translations)
//! and the word-substitution translator the paper builds from it: each word, or phrase of the
//! lexicon, of the source replaced by its first listed translation, everything else kept.
use super::data::{Direction, INDONESIAN};
use indolm_torch::error::{Error, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The pairs of one lexicon file, in file order: (Indonesian, the other language).
#[derive(Debug, Clone, PartialEq)]
pub struct Lexicon {
    /// The file read.
    pub path: PathBuf,
    /// The language other than Indonesian (the file's second column).
    pub language: String,
    /// The pairs, in file order, as written.
    pub pairs: Vec<(String, String)>,
}

impl Lexicon {
    /// Reads `<root>/lexicon/<language>.csv` (`root` is the NusaX folder).
    pub fn load(root: &Path, language: &str) -> Result<Lexicon> {
        let path = root.join("lexicon").join(format!("{language}.csv"));
        let hint = "the NusaX lexicon comes from `indolm download nusax` (into corpora/downloads/nusax/lexicon)";
        let (mut reader, header) = indolm_core::files::open_csv(&csv::ReaderBuilder::new(), &path, hint)?;
        let col = |name: &str| {
            header
                .iter()
                .position(|h| h == name)
                .ok_or_else(|| Error::field(&path, name, format!("missing column; the header has {header:?}")))
        };
        let (ind, other) = (col(INDONESIAN)?, col(language)?);
        let mut pairs = Vec::new();
        for (i, record) in reader.records().enumerate() {
            let record = record.map_err(|e| Error::invalid(&path, format!("row {}: {e}", i + 2)))?;
            let (a, b) = (record.get(ind).unwrap_or("").trim(), record.get(other).unwrap_or("").trim());
            if !a.is_empty() && !b.is_empty() {
                pairs.push((a.to_string(), b.to_string()));
            }
        }
        if pairs.is_empty() {
            return Err(Error::invalid(&path, "no word pairs after the header"));
        }
        Ok(Lexicon { path, language: language.to_string(), pairs })
    }

    /// The translator for `direction` (Indonesian into this language, or back).
    pub fn substitution(&self, direction: Direction) -> Result<WordSubstitution> {
        let forward = match (direction.source, direction.target) {
            (INDONESIAN, t) if t == self.language => true,
            (s, INDONESIAN) if s == self.language => false,
            _ => {
                return Err(Error::invalid(
                    &self.path,
                    format!(
                        "this lexicon pairs Indonesian with {}: it cannot translate {}",
                        self.language,
                        direction.name()
                    ),
                ))
            }
        };
        Ok(WordSubstitution::new(self.pairs.iter().map(|(a, b)| if forward { (a, b) } else { (b, a) })))
    }
}

/// A piece of a sentence: a word (letters and digits, with apostrophes and hyphens inside it)
/// or what lies between words.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Piece<'a> {
    Word(&'a str),
    Between(&'a str),
}

/// Whether `c` can be part of a word.
fn word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '\'' || c == '-'
}

/// The words of `text` and what lies between them, in order; an apostrophe or hyphen at either
/// end of a run is punctuation, not part of the word.
fn pieces(text: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let start = rest.find(|c: char| c.is_alphanumeric()).unwrap_or(rest.len());
        if start > 0 {
            out.push(Piece::Between(&rest[..start]));
            rest = &rest[start..];
            continue;
        }
        let run = rest.find(|c: char| !word_char(c)).unwrap_or(rest.len());
        let end = rest[..run].trim_end_matches(|c: char| !c.is_alphanumeric()).len();
        out.push(Piece::Word(&rest[..end]));
        rest = &rest[end..];
    }
    out
}

/// The lookup key of a phrase: its words, lowercased, joined by one space.
fn key<'a>(words: impl IntoIterator<Item = &'a str>) -> String {
    words.into_iter().map(str::to_lowercase).collect::<Vec<_>>().join(" ")
}

/// Dictionary-based translation: the longest phrase of the lexicon (matched without regard to
/// case, across plain spaces) starting at each word is replaced by its first listed translation,
/// capitalised when the source's first letter is; words the lexicon lacks, punctuation and
/// spacing are kept.
#[derive(Debug, Clone, PartialEq)]
pub struct WordSubstitution {
    table: HashMap<String, String>,
    longest: usize,
}

impl WordSubstitution {
    /// From (source phrase, translation) pairs; the first pair of a phrase wins.
    pub fn new<'a>(pairs: impl IntoIterator<Item = (&'a String, &'a String)>) -> WordSubstitution {
        let mut table = HashMap::new();
        let mut longest = 0;
        for (source, target) in pairs {
            let words: Vec<&str> = pieces(source)
                .into_iter()
                .filter_map(|p| if let Piece::Word(w) = p { Some(w) } else { None })
                .collect();
            if words.is_empty() {
                continue;
            }
            longest = longest.max(words.len());
            table.entry(key(words)).or_insert_with(|| target.clone());
        }
        WordSubstitution { table, longest }
    }

    /// How many source phrases the translator knows.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether it knows none.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// `text` translated word by word.
    pub fn translate(&self, text: &str) -> String {
        let pieces = pieces(text);
        let mut out = String::with_capacity(text.len());
        let mut i = 0;
        while i < pieces.len() {
            let Piece::Word(first) = pieces[i] else {
                if let Piece::Between(b) = pieces[i] {
                    out.push_str(b);
                }
                i += 1;
                continue;
            };
            // The words from i on that only plain spaces separate, at most `longest` of them.
            let mut words = vec![first];
            let mut j = i + 1;
            while words.len() < self.longest && j + 1 < pieces.len() {
                match (pieces[j], pieces[j + 1]) {
                    (Piece::Between(gap), Piece::Word(w)) if gap.chars().all(|c| c == ' ') => words.push(w),
                    _ => break,
                }
                j += 2;
            }
            let found =
                (1..=words.len()).rev().find_map(|n| self.table.get(&key(words[..n].iter().copied())).map(|t| (n, t)));
            match found {
                Some((n, translation)) => {
                    out.push_str(&capitalised_like(first, translation));
                    i += 2 * n - 1;
                }
                None => {
                    out.push_str(first);
                    i += 1;
                }
            }
        }
        out
    }
}

/// `translation` with its first letter upper-cased when `source` starts with an upper-case letter.
fn capitalised_like(source: &str, translation: &str) -> String {
    let upper = source.chars().next().is_some_and(char::is_uppercase);
    let mut chars = translation.chars();
    match chars.next() {
        Some(c) if upper => c.to_uppercase().chain(chars).collect(),
        _ => translation.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn translator(pairs: &[(&str, &str)]) -> WordSubstitution {
        let owned: Vec<(String, String)> = pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
        WordSubstitution::new(owned.iter().map(|(a, b)| (a, b)))
    }

    #[test]
    fn words_split_at_punctuation_but_keep_inner_apostrophes_and_hyphens() {
        let words: Vec<Piece> = pieces("'Kue-kue' tike'na, 12 bulan!");
        assert_eq!(
            words,
            [
                Piece::Between("'"),
                Piece::Word("Kue-kue"),
                Piece::Between("' "),
                Piece::Word("tike'na"),
                Piece::Between(", "),
                Piece::Word("12"),
                Piece::Between(" "),
                Piece::Word("bulan"),
                Piece::Between("!"),
            ]
        );
        assert_eq!(pieces(""), []);
    }

    #[test]
    fn the_longest_phrase_and_the_first_translation_win_and_case_and_punctuation_stay() {
        let t = translator(&[
            ("makan", "tuang"),
            ("makan", "dahar"),
            ("kurang ajar", "biadab"),
            ("kurang", "kirang"),
            ("saya", "abdi"),
        ]);
        assert_eq!(t.len(), 4);
        assert_eq!(t.translate("Saya makan, kurang ajar!"), "Abdi tuang, biadab!");
        // A phrase does not match across punctuation; unknown words are kept as written.
        assert_eq!(t.translate("kurang, ajar  Makan"), "kirang, ajar  Tuang");
        assert_eq!(t.translate("MAKAN siang"), "Tuang siang");
        assert_eq!(t.translate(""), "");
    }

    #[test]
    fn a_lexicon_translates_both_ways_and_refuses_other_pairs() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("lexicon")).unwrap();
        std::fs::write(
            dir.path().join("lexicon/sundanese.csv"),
            ",indonesian,sundanese\n0,abu,lebu\n1,abu,hawu\n2,saya,abdi\n",
        )
        .unwrap();
        let lexicon = Lexicon::load(dir.path(), "sundanese").unwrap();
        let into = lexicon.substitution(Direction { source: "indonesian", target: "sundanese" }).unwrap();
        assert_eq!(into.translate("saya abu"), "abdi lebu");
        let back = lexicon.substitution(Direction { source: "sundanese", target: "indonesian" }).unwrap();
        assert_eq!(back.translate("abdi hawu"), "saya abu");
        let err = lexicon.substitution(Direction { source: "javanese", target: "indonesian" }).unwrap_err();
        assert!(err.to_string().contains("cannot translate jav-ind"), "{err}");
        let err = Lexicon::load(dir.path(), "javanese").unwrap_err().to_string();
        assert!(err.contains("indolm download nusax"), "{err}");
    }
}
