//! SentencePiece's normalizer (`normalizer.cc`), byte for byte: at each position the longest rule
//! of the `precompiled_charsmap` (a darts-clone double-array trie over UTF-8 bytes, whose values
//! point into a block of NUL-ended replacements; `nmt_nfkc` is NFKC plus some control-character
//! and whitespace rules) rewrites the text, a user-defined symbol is kept as it is, then leading,
//! trailing and repeated spaces are dropped (`remove_extra_whitespaces`), a `▁` is put in front
//! (`add_dummy_prefix`) and spaces become `▁` (`escape_whitespaces`).
//!
//! `tokenizers::normalizers::Precompiled` reads the same charsmap but is not used: it rewrites
//! whole grapheme clusters with the *shortest* rule matching their start, so `a` + U+0308 +
//! U+0301 becomes `ä` (the acute dropped) where SentencePiece gives `ä́`, and half-width katakana
//! with a voicing mark or Hangul jamo come out differently; and its trie walk indexes the array
//! unchecked, so a hostile charsmap panics. Every trie step here is bounds-checked.
use super::proto::NormalizerSpec;
use super::vocab::Vocab;
use crate::error::{Error, Result};
use std::path::Path;

/// `▁` (U+2581), SentencePiece's visible space.
pub const SPACE_SYMBOL: &str = "\u{2581}";

/// A `precompiled_charsmap`: the trie's 32-bit units and the replacements' block.
#[derive(Debug, Clone)]
pub(crate) struct CharsMap {
    units: Vec<u32>,
    normalized: Vec<u8>,
}

impl CharsMap {
    /// Splits the blob as `DecodePrecompiledCharsMap` does: a little-endian u32 trie size, the
    /// trie, the replacements; refused when the size does not fit or is not whole units.
    pub fn parse(path: &Path, blob: &[u8]) -> Result<Self> {
        let fail = |message: String| Error::Tokenizer {
            path: path.to_path_buf(),
            message: format!("normalizer_spec.precompiled_charsmap: {message}"),
        };
        if blob.len() <= 4 {
            return Err(fail(format!("{} bytes, too short for a trie size and a trie", blob.len())));
        }
        let size = u32::from_le_bytes([blob[0], blob[1], blob[2], blob[3]]) as usize;
        if size > blob.len() - 4 || size == 0 || !size.is_multiple_of(4) {
            return Err(fail(format!(
                "declares a trie of {size} bytes, expected a positive multiple of 4 that fits in the {} bytes after it",
                blob.len() - 4
            )));
        }
        let units = blob[4..4 + size].chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        Ok(CharsMap { units, normalized: blob[4 + size..].to_vec() })
    }

    /// The trie unit at `pos`, refused past the array's end.
    fn unit(&self, path: &Path, pos: usize) -> Result<u32> {
        self.units.get(pos).copied().ok_or_else(|| Error::Tokenizer {
            path: path.to_path_buf(),
            message: format!(
                "normalizer_spec.precompiled_charsmap: its trie leads to unit {pos} of {}",
                self.units.len()
            ),
        })
    }

    /// The longest rule `input` starts with: its length in bytes and its replacement
    /// (darts-clone's `commonPrefixSearch`, the longest of its results).
    pub fn longest_rule(&self, path: &Path, input: &[u8]) -> Result<Option<(usize, &str)>> {
        let offset = |unit: u32| ((unit >> 10) << ((unit & (1 << 9)) >> 6)) as usize;
        let label = |unit: u32| unit & ((1 << 31) | 0xff);
        let has_leaf = |unit: u32| (unit >> 8) & 1 == 1;
        let mut pos = offset(self.unit(path, 0)?);
        let mut found = None;
        for (i, &byte) in input.iter().enumerate() {
            pos ^= byte as usize;
            let unit = self.unit(path, pos)?;
            if label(unit) != byte as u32 {
                break;
            }
            pos ^= offset(unit);
            if has_leaf(unit) {
                let value = (self.unit(path, pos)? & ((1 << 31) - 1)) as usize;
                found = Some((i + 1, value));
            }
        }
        let Some((len, value)) = found else { return Ok(None) };
        let fail = |what: String| Error::Tokenizer {
            path: path.to_path_buf(),
            message: format!("normalizer_spec.precompiled_charsmap: the rule for {:?} {what}", &input[..len]),
        };
        let rest = self
            .normalized
            .get(value..)
            .ok_or_else(|| fail(format!("points at byte {value}, past its replacements")))?;
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        let text = std::str::from_utf8(&rest[..end]).map_err(|_| fail("is not UTF-8".into()))?;
        Ok(Some((len, text)))
    }
}

/// The normalizer of a model: its charsmap (none for `identity`) and its three switches.
#[derive(Debug, Clone)]
pub(crate) struct Normalizer {
    charsmap: Option<CharsMap>,
    add_dummy_prefix: bool,
    remove_extra_whitespaces: bool,
    escape_whitespaces: bool,
}

/// The replacement for the start of the input and how many bytes it consumes.
enum Prefix<'a> {
    /// Text the rule or the input gives.
    Text(&'a str),
    /// A malformed byte: U+FFFD.
    Replacement,
}

impl Normalizer {
    /// The normalizer `spec` describes (of the model file `path`).
    pub fn new(path: &Path, spec: &NormalizerSpec) -> Result<Self> {
        let charsmap = match spec.precompiled_charsmap.is_empty() {
            true => None,
            false => Some(CharsMap::parse(path, &spec.precompiled_charsmap)?),
        };
        Ok(Normalizer {
            charsmap,
            add_dummy_prefix: spec.add_dummy_prefix,
            remove_extra_whitespaces: spec.remove_extra_whitespaces,
            escape_whitespaces: spec.escape_whitespaces,
        })
    }

    /// `NormalizePrefix`: a user-defined symbol as it is, else the longest rule's replacement,
    /// else the first character (a malformed byte: U+FFFD, one byte consumed).
    fn prefix<'a>(&'a self, path: &Path, vocab: &Vocab, input: &'a [u8]) -> Result<(Prefix<'a>, usize)> {
        let (len, user_defined) = vocab.prefix_match(input);
        if user_defined {
            // A user-defined symbol is a whole piece's text, so UTF-8.
            return Ok((Prefix::Text(std::str::from_utf8(&input[..len]).unwrap_or_default()), len));
        }
        if let Some(map) = &self.charsmap {
            if let Some((len, text)) = map.longest_rule(path, input)? {
                return Ok((Prefix::Text(text), len));
            }
        }
        match decode_utf8(input) {
            Some(len) => Ok((Prefix::Text(std::str::from_utf8(&input[..len]).unwrap_or_default()), len)),
            None => Ok((Prefix::Replacement, 1)),
        }
    }

    /// `Normalizer::Normalize` of `text` (user-defined symbols from `vocab`).
    pub fn normalize(&self, path: &Path, vocab: &Vocab, text: &str) -> Result<String> {
        let mut input = text.as_bytes();
        let mut out: Vec<u8> = Vec::with_capacity(input.len() * 3);
        if self.remove_extra_whitespaces {
            while !input.is_empty() {
                let (p, consumed) = self.prefix(path, vocab, input)?;
                if !matches!(p, Prefix::Text(" ")) {
                    break;
                }
                input = &input[consumed..];
            }
        }
        if input.is_empty() {
            return Ok(String::new());
        }
        let space: &[u8] = if self.escape_whitespaces { SPACE_SYMBOL.as_bytes() } else { b" " };
        if self.add_dummy_prefix {
            out.extend_from_slice(space);
        }
        let mut is_prev_space = self.remove_extra_whitespaces;
        while !input.is_empty() {
            let (p, consumed) = self.prefix(path, vocab, input)?;
            let mut sp: &[u8] = match p {
                Prefix::Text(t) => t.as_bytes(),
                Prefix::Replacement => "\u{fffd}".as_bytes(),
            };
            while is_prev_space && sp.first() == Some(&b' ') {
                sp = &sp[1..];
            }
            if !sp.is_empty() {
                for &b in sp {
                    if self.escape_whitespaces && b == b' ' {
                        out.extend_from_slice(SPACE_SYMBOL.as_bytes());
                    } else {
                        out.push(b);
                    }
                }
                is_prev_space = sp.last() == Some(&b' ');
            }
            input = &input[consumed..];
            if !self.remove_extra_whitespaces {
                is_prev_space = false;
            }
        }
        if self.remove_extra_whitespaces {
            while out.ends_with(space) {
                out.truncate(out.len() - space.len());
            }
        }
        String::from_utf8(out).map_err(|_| Error::Tokenizer {
            path: path.to_path_buf(),
            message: format!("normalizing {}: the result is not UTF-8", indolm_core::files::quoted(text)),
        })
    }
}

/// SentencePiece's `IsValidDecodeUTF8`: the length of the well-formed character `input` starts
/// with, `None` for a malformed one (a rule may end inside a character).
pub(crate) fn decode_utf8(input: &[u8]) -> Option<usize> {
    let b0 = *input.first()?;
    let trail = |i: usize| input.get(i).is_some_and(|&b| b & 0xc0 == 0x80);
    let valid = |cp: u32| cp < 0xd800 || (0xe000..=0x10ffff).contains(&cp);
    let cp =
        |n: usize, mask: u8| input[1..n].iter().fold(u32::from(b0 & mask), |acc, &b| (acc << 6) | u32::from(b & 0x3f));
    if b0 < 0x80 {
        return Some(1);
    }
    let (n, mask, min) = match b0 {
        _ if b0 & 0xe0 == 0xc0 => (2, 0x1f, 0x80),
        _ if b0 & 0xf0 == 0xe0 => (3, 0x0f, 0x800),
        _ if b0 & 0xf8 == 0xf0 => (4, 0x07, 0x10000),
        _ => return None,
    };
    if input.len() < n || !(1..n).all(trail) {
        return None;
    }
    let c = cp(n, mask);
    (c >= min && valid(c)).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charsmaps_that_do_not_fit_are_refused() {
        let path = Path::new("m.model");
        let e = |blob: &[u8]| CharsMap::parse(path, blob).unwrap_err().to_string();
        assert!(e(&[1, 0, 0]).contains("3 bytes, too short"));
        assert!(e(&[8, 0, 0, 0, 1, 2, 3]).contains("declares a trie of 8 bytes"));
        assert!(e(&[3, 0, 0, 0, 1, 2, 3]).contains("declares a trie of 3 bytes"));
        // A trie whose first unit sends the walk past the array is an error, not a panic.
        let far = (1000u32 << 10).to_le_bytes();
        let map = CharsMap::parse(path, &[&[4, 0, 0, 0][..], &far, b"x\0"].concat()).unwrap();
        let err = map.longest_rule(path, b"a").unwrap_err().to_string();
        assert!(err.contains("leads to unit"), "{err}");
    }

    #[test]
    fn utf8_is_judged_as_sentencepiece_judges_it() {
        assert_eq!(decode_utf8("é".as_bytes()), Some(2));
        assert_eq!(decode_utf8("😀".as_bytes()), Some(4));
        assert_eq!(decode_utf8(&[0xa9, 0x41]), None);
        assert_eq!(decode_utf8(&[0xc3]), None);
        assert_eq!(decode_utf8(&[0xc0, 0x80]), None);
        assert_eq!(decode_utf8(&[0xed, 0xa0, 0x80]), None);
    }
}
