//! A model's vocabulary as SentencePiece's `ModelInterface::InitializePieces` builds it: the
//! pieces the encoder may form (normal, user-defined and unused) apart from the reserved ones
//! (control, unknown, byte), exactly one unknown piece, byte pieces only with `byte_fallback`
//! (then all 256 of them), no piece twice in one map; `piece_to_id` as `PieceToId` (reserved
//! first, the unknown id for anything else), and the longest user-defined symbol at a position
//! (`PrefixMatcher`), which neither the normalizer nor the merges may split.
use super::proto::{Piece, PieceType};
use crate::error::{Error, Result};
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// The pieces by text and by id.
#[derive(Debug, Clone)]
pub(crate) struct Vocab {
    /// Every piece, its id its position.
    pub pieces: Vec<Piece>,
    /// Normal, user-defined and unused pieces by text (`pieces_`).
    normal: HashMap<String, u32>,
    /// Control, unknown and byte pieces by text (`reserved_id_map_`).
    reserved: HashMap<String, u32>,
    /// The unknown piece's id.
    pub unk_id: u32,
    /// The user-defined symbols and the longest one's length in bytes.
    user_defined: HashSet<String>,
    longest_user_defined: usize,
    /// The id of each byte's piece (`<0x41>`), with byte fallback.
    pub byte_ids: Option<Vec<u32>>,
}

/// `<0xNN>`, the piece of byte `b`.
pub(crate) fn byte_piece(b: u8) -> String {
    format!("<0x{b:02X}>")
}

/// The byte a `<0xNN>` piece stands for (upper-case hex, as SentencePiece writes them).
pub(crate) fn piece_byte(piece: &str) -> Option<u8> {
    let hex = piece.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 || !hex.bytes().all(|c| c.is_ascii_digit() || (b'A'..=b'F').contains(&c)) {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

impl Vocab {
    /// The vocabulary of `pieces` (from the model file `path`), refused as SentencePiece refuses it.
    pub fn new(path: &Path, pieces: Vec<Piece>, byte_fallback: bool) -> Result<Self> {
        let fail = |message: String| Error::Tokenizer { path: path.to_path_buf(), message };
        if pieces.len() > u32::MAX as usize / 2 {
            return Err(fail(format!("{} pieces, more than ids can number", pieces.len())));
        }
        let (mut normal, mut reserved) = (HashMap::new(), HashMap::new());
        let (mut unk_id, mut user_defined, mut bytes) = (None, HashSet::new(), vec![None; 256]);
        for (id, p) in pieces.iter().enumerate() {
            let id = id as u32;
            let map = match p.kind {
                PieceType::Normal | PieceType::UserDefined | PieceType::Unused => &mut normal,
                PieceType::Unknown | PieceType::Control | PieceType::Byte => &mut reserved,
            };
            if map.insert(p.piece.clone(), id).is_some() {
                return Err(fail(format!("piece {id} ({:?}) is already defined by an earlier piece", p.piece)));
            }
            match p.kind {
                PieceType::UserDefined => {
                    user_defined.insert(p.piece.clone());
                }
                PieceType::Unknown => {
                    if let Some(first) = unk_id {
                        return Err(fail(format!("pieces {first} and {id} are both the unknown piece, expected one")));
                    }
                    unk_id = Some(id);
                }
                PieceType::Byte => {
                    if !byte_fallback {
                        return Err(fail(format!(
                            "piece {id} ({:?}) is a byte piece although trainer_spec.byte_fallback is false",
                            p.piece
                        )));
                    }
                    let b = piece_byte(&p.piece)
                        .ok_or_else(|| fail(format!("byte piece {id} is {:?}, expected <0x00> to <0xFF>", p.piece)))?;
                    bytes[b as usize] = Some(id);
                }
                _ => {}
            }
        }
        let unk_id = unk_id.ok_or_else(|| fail("no piece has the unknown type (<unk>), expected one".into()))?;
        let byte_ids = match byte_fallback {
            false => None,
            true => {
                let missing = bytes.iter().filter(|b| b.is_none()).count();
                if missing > 0 {
                    return Err(fail(format!(
                        "trainer_spec.byte_fallback is true but {missing} of the 256 byte pieces are missing"
                    )));
                }
                Some(bytes.into_iter().map(Option::unwrap_or_default).collect())
            }
        };
        let longest_user_defined = user_defined.iter().map(String::len).max().unwrap_or(0);
        Ok(Vocab { pieces, normal, reserved, unk_id, user_defined, longest_user_defined, byte_ids })
    }

    /// `PieceToId`: a reserved piece's id, else a formable piece's, else the unknown id.
    pub fn piece_to_id(&self, piece: &str) -> u32 {
        self.reserved.get(piece).or_else(|| self.normal.get(piece)).copied().unwrap_or(self.unk_id)
    }

    /// Whether the vocabulary has `piece`, of any type.
    pub fn contains(&self, piece: &str) -> bool {
        self.reserved.contains_key(piece) || self.normal.contains_key(piece)
    }

    /// The id of a piece the merges may form (normal, user-defined or unused).
    pub fn formable(&self, piece: &str) -> Option<u32> {
        self.normal.get(piece).copied()
    }

    /// The type of piece `id` (which must be below the piece count).
    pub fn kind(&self, id: u32) -> PieceType {
        self.pieces[id as usize].kind
    }

    /// `PrefixMatcher::PrefixMatch`: the length of the longest user-defined symbol `text` starts
    /// with and `true`, or the length of its first character (by its lead byte, at most what is
    /// left) and `false`.
    pub fn prefix_match(&self, text: &[u8]) -> (usize, bool) {
        for len in (1..=self.longest_user_defined.min(text.len())).rev() {
            if let Ok(s) = std::str::from_utf8(&text[..len]) {
                if self.user_defined.contains(s) {
                    return (len, true);
                }
            }
        }
        (one_char_len(text[0]).min(text.len()), false)
    }
}

/// SentencePiece's `OneCharLen`: a character's length from its lead byte alone.
pub(crate) fn one_char_len(lead: u8) -> usize {
    [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4][(lead >> 4) as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(piece: &str, kind: PieceType) -> Piece {
        Piece { piece: piece.into(), score: 0.0, kind }
    }

    fn err(pieces: Vec<Piece>, byte_fallback: bool) -> String {
        Vocab::new(Path::new("m.model"), pieces, byte_fallback).unwrap_err().to_string()
    }

    #[test]
    fn pieces_are_checked_as_sentencepiece_checks_them() {
        use PieceType::*;
        assert!(err(vec![p("a", Normal)], false).contains("no piece has the unknown type"));
        assert!(err(vec![p("<unk>", Unknown), p("x", Unknown)], false).contains("pieces 0 and 1 are both"));
        assert!(err(vec![p("<unk>", Unknown), p("a", Normal), p("a", Unused)], false)
            .contains("piece 2 (\"a\") is already"));
        assert!(err(vec![p("<unk>", Unknown), p("<0x41>", Byte)], false).contains("byte_fallback is false"));
        assert!(err(vec![p("<unk>", Unknown), p("<0x4g>", Byte)], true).contains("expected <0x00> to <0xFF>"));
        assert!(err(vec![p("<unk>", Unknown), p("<0x41>", Byte)], true).contains("255 of the 256 byte pieces"));
        // A normal and a control piece of the same text may coexist: PieceToId prefers the reserved.
        let v = Vocab::new(Path::new("m.model"), vec![p("<unk>", Unknown), p("a", Normal), p("a", Control)], false)
            .unwrap();
        assert_eq!((v.piece_to_id("a"), v.piece_to_id("zz"), v.formable("a")), (2, 0, Some(1)));
    }

    #[test]
    fn the_longest_user_defined_symbol_is_matched_whole() {
        use PieceType::*;
        let pieces = vec![p("<unk>", Unknown), p("ab", UserDefined), p("abc", UserDefined), p("é", Normal)];
        let v = Vocab::new(Path::new("m.model"), pieces, false).unwrap();
        assert_eq!(v.prefix_match(b"abcd"), (3, true));
        assert_eq!(v.prefix_match(b"abd"), (2, true));
        assert_eq!(v.prefix_match("éa".as_bytes()), (2, false));
        assert_eq!(v.prefix_match(&[0xe2, 0x96]), (2, false));
        assert_eq!((piece_byte("<0x0A>"), piece_byte("<0x0a>"), byte_piece(10)), (Some(10), None, "<0x0A>".into()));
    }
}
