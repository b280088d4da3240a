//! A SentencePiece BPE model file as `sentencepiece.SentencePieceProcessor` uses it: opened with
//! its size bounded before it is read, refused unless its `trainer_spec.model_type` is BPE
//! (Unigram, word and char models are not read) and unless the runtime would accept it; `encode`
//! as `sp.encode(text)` and `sp.encode(text, out_type=str)` (runs of unknown characters one
//! unknown piece, or their UTF-8 bytes' pieces with byte fallback), `decode_pieces` and
//! `decode_ids` as `sp.decode` of pieces and of ids (control pieces silent, `<unk>` as ` ⁇ `,
//! other unknown pieces as they are, byte pieces gathered into characters, the first `▁` dropped).
use super::bpe;
use super::normalizer::{decode_utf8, Normalizer, SPACE_SYMBOL};
use super::proto::{self, PieceType};
use super::vocab::{byte_piece, piece_byte, Vocab};
use crate::error::{Error, IoContext, Result};
use std::io::Read;
use std::path::{Path, PathBuf};

/// The largest model file read (mT5's 250k-piece Unigram model is 4.3 MB).
pub const MAX_MODEL_BYTES: u64 = 64 << 20;

/// The `model_type` values of `TrainerSpec`, for messages.
fn model_type_name(value: u64) -> String {
    match value {
        1 => "Unigram (1)".into(),
        2 => "BPE (2)".into(),
        3 => "word (3)".into(),
        4 => "char (4)".into(),
        other => format!("{other}, not a type SentencePiece has"),
    }
}

/// A loaded SentencePiece BPE model.
#[derive(Debug, Clone)]
pub struct SentencePieceModel {
    path: PathBuf,
    vocab: Vocab,
    normalizer: Normalizer,
    unk_surface: String,
    add_dummy_prefix: bool,
    remove_extra_whitespaces: bool,
}

/// A piece of an encoding: its text and id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedPiece {
    /// The piece as `out_type=str` gives it (an unknown run's own text).
    pub piece: String,
    /// Its id.
    pub id: u32,
}

impl SentencePieceModel {
    /// Opens the model file `path`, refusing one larger than [`MAX_MODEL_BYTES`] before reading.
    pub fn open(path: &Path) -> Result<Self> {
        let file = std::fs::File::open(path).with_path(path)?;
        let size = file.metadata().with_path(path)?.len();
        if size > MAX_MODEL_BYTES {
            return Err(Error::Tokenizer {
                path: path.to_path_buf(),
                message: format!("{size} bytes, more than the {MAX_MODEL_BYTES} a SentencePiece model is read to"),
            });
        }
        let mut bytes = Vec::with_capacity(size as usize);
        file.take(MAX_MODEL_BYTES + 1).read_to_end(&mut bytes).with_path(path)?;
        if bytes.len() as u64 > MAX_MODEL_BYTES {
            return Err(Error::Tokenizer {
                path: path.to_path_buf(),
                message: format!("grew past {MAX_MODEL_BYTES} bytes while read"),
            });
        }
        Self::from_bytes(path, &bytes)
    }

    /// The model in `bytes`, the content of `path` (named in errors).
    pub fn from_bytes(path: &Path, bytes: &[u8]) -> Result<Self> {
        let fail = |message: String| Error::Tokenizer { path: path.to_path_buf(), message };
        let model = proto::parse(path, bytes)?;
        if model.trainer_spec.model_type != 2 {
            return Err(fail(format!(
                "trainer_spec.model_type is {}, expected BPE (2): only SentencePiece BPE models are read",
                model_type_name(model.trainer_spec.model_type)
            )));
        }
        if model.trainer_spec.treat_whitespace_as_suffix {
            return Err(fail("trainer_spec.treat_whitespace_as_suffix is true, which is not supported".into()));
        }
        if model.denormalizer_spec.as_ref().is_some_and(|d| !d.precompiled_charsmap.is_empty()) {
            return Err(fail(
                "the model has a denormalizer (denormalizer_spec.precompiled_charsmap), not supported".into(),
            ));
        }
        let vocab = Vocab::new(path, model.pieces, model.trainer_spec.byte_fallback)?;
        let normalizer = Normalizer::new(path, &model.normalizer_spec)?;
        Ok(SentencePieceModel {
            path: path.to_path_buf(),
            vocab,
            normalizer,
            unk_surface: model.trainer_spec.unk_surface.unwrap_or_else(|| " \u{2047} ".into()),
            add_dummy_prefix: model.normalizer_spec.add_dummy_prefix,
            remove_extra_whitespaces: model.normalizer_spec.remove_extra_whitespaces,
        })
    }

    /// The model file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The number of pieces (`len(sp)`).
    pub fn len(&self) -> usize {
        self.vocab.pieces.len()
    }

    /// Whether the model has no pieces (never: a model has its unknown piece).
    pub fn is_empty(&self) -> bool {
        self.vocab.pieces.is_empty()
    }

    /// `sp.PieceToId(piece)`: the unknown id for a piece not in the vocabulary.
    pub fn piece_to_id(&self, piece: &str) -> u32 {
        self.vocab.piece_to_id(piece)
    }

    /// Whether the vocabulary has `piece` (of any type).
    pub fn contains(&self, piece: &str) -> bool {
        self.vocab.contains(piece)
    }

    /// `sp.IdToPiece(id)`, `None` past the last piece.
    pub fn id_to_piece(&self, id: u32) -> Option<&str> {
        self.vocab.pieces.get(id as usize).map(|p| p.piece.as_str())
    }

    /// The type of piece `id`, `None` past the last piece.
    pub fn piece_type(&self, id: u32) -> Option<PieceType> {
        self.vocab.pieces.get(id as usize).map(|p| p.kind)
    }

    /// `sp.normalize(text)`.
    pub fn normalize(&self, text: &str) -> Result<String> {
        self.normalizer.normalize(&self.path, &self.vocab, text)
    }

    /// `sp.encode(text, out_type=str)` and `sp.encode(text)` together: each piece and its id.
    pub fn encode(&self, text: &str) -> Result<Vec<EncodedPiece>> {
        let normalized = self.normalize(text)?;
        let mut out: Vec<EncodedPiece> = Vec::new();
        let (mut consumed, mut prev_unk) = (0, false);
        for (w, id) in bpe::encode(&self.vocab, &normalized) {
            let kind = self.vocab.kind(id);
            let unk = kind == PieceType::Unknown;
            if kind == PieceType::Control {
                // A control piece has no surface and consumes nothing (`PopulateSentencePieceText`).
                out.push(EncodedPiece { piece: w.to_string(), id });
            } else {
                match (&self.vocab.byte_ids, unk) {
                    (Some(bytes), true) => {
                        out.extend(w.bytes().map(|b| EncodedPiece { piece: byte_piece(b), id: bytes[b as usize] }))
                    }
                    // A run of unknown pieces is one unknown piece.
                    _ if unk && prev_unk => out.last_mut().into_iter().for_each(|last| last.piece.push_str(w)),
                    _ => out.push(EncodedPiece { piece: w.to_string(), id }),
                }
                consumed += w.len();
            }
            prev_unk = unk;
        }
        if consumed != normalized.len() {
            return Err(Error::Tokenizer {
                path: self.path.clone(),
                message: format!(
                    "encoding {}: {consumed} of {} normalized bytes consumed (a control piece spells a character)",
                    indolm_core::files::quoted(text),
                    normalized.len()
                ),
            });
        }
        Ok(out)
    }

    /// `sp.decode(ids)`: refused for an id past the last piece.
    pub fn decode_ids(&self, ids: &[u32]) -> Result<String> {
        let pieces = ids
            .iter()
            .map(|&id| {
                self.id_to_piece(id).ok_or_else(|| Error::Tokenizer {
                    path: self.path.clone(),
                    message: format!("decoding id {id}, past the model's {} pieces", self.len()),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(self.decode_pieces(&pieces))
    }

    /// `sp.decode(pieces)` (`SentencePieceProcessor::Decode` of pieces).
    pub fn decode_pieces<S: AsRef<str>>(&self, pieces: &[S]) -> String {
        let mut text = String::new();
        let mut bytes: Vec<u8> = Vec::new();
        let (mut is_bos_ws, mut bos_ws_seen) = (true, false);
        for piece in pieces {
            let piece = piece.as_ref();
            let id = self.vocab.piece_to_id(piece);
            let kind = self.vocab.kind(id);
            if kind == PieceType::Byte {
                bytes.push(piece_byte(piece).unwrap_or_default());
                continue;
            }
            flush_bytes(&mut bytes, &mut text);
            if bos_ws_seen || !text.is_empty() {
                is_bos_ws = false;
            }
            let (surface, seen) = self.decode_piece(piece, id, kind, is_bos_ws);
            bos_ws_seen = seen;
            text.push_str(&surface);
        }
        flush_bytes(&mut bytes, &mut text);
        text
    }

    /// One non-byte piece's surface and whether it consumed the first `▁` (`DecodeSentencePiece`).
    fn decode_piece(&self, piece: &str, id: u32, kind: PieceType, is_bos_ws: bool) -> (String, bool) {
        match kind {
            PieceType::Control => return (String::new(), false),
            PieceType::Unknown if self.vocab.pieces[id as usize].piece == piece => {
                return (self.unk_surface.clone(), false)
            }
            PieceType::Unknown => return (piece.to_string(), false),
            _ => {}
        }
        let mut piece = piece;
        let mut has_bos_ws = false;
        if is_bos_ws && (self.add_dummy_prefix || self.remove_extra_whitespaces) {
            if let Some(rest) = piece.strip_prefix(SPACE_SYMBOL) {
                piece = rest;
                has_bos_ws = true;
            }
            if self.remove_extra_whitespaces {
                has_bos_ws = false;
            }
        }
        (piece.replace(SPACE_SYMBOL, " "), has_bos_ws)
    }
}

/// Appends gathered byte pieces as text: each well-formed character as it is, each malformed
/// byte as U+FFFD (`ProcessBytePieces`).
fn flush_bytes(bytes: &mut Vec<u8>, text: &mut String) {
    let mut at = 0;
    while at < bytes.len() {
        match decode_utf8(&bytes[at..]) {
            Some(len) => {
                text.push_str(std::str::from_utf8(&bytes[at..at + len]).unwrap_or("\u{fffd}"));
                at += len;
            }
            None => {
                text.push('\u{fffd}');
                at += 1;
            }
        }
    }
    bytes.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A varint's bytes.
    fn varint(mut v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(byte);
                return out;
            }
            out.push(byte | 0x80);
        }
    }

    fn field(number: u64, body: &[u8]) -> Vec<u8> {
        [varint(number << 3 | 2), varint(body.len() as u64), body.to_vec()].concat()
    }

    fn piece(text: &str, score: f32, kind: u64) -> Vec<u8> {
        field(
            1,
            &[
                field(1, text.as_bytes()),
                varint(2 << 3 | 5),
                score.to_le_bytes().to_vec(),
                varint(3 << 3),
                varint(kind),
            ]
            .concat(),
        )
    }

    /// A model file: pieces, a model type and byte fallback, no charsmap (identity).
    fn model(pieces: &[(&str, f32, u64)], model_type: u64, byte_fallback: bool) -> Vec<u8> {
        let trainer = [varint(3 << 3), varint(model_type), varint(35 << 3), varint(byte_fallback as u64)].concat();
        let mut file: Vec<u8> = pieces.iter().flat_map(|&(p, s, k)| piece(p, s, k)).collect();
        file.extend(field(2, &trainer));
        file.extend(field(3, &field(1, b"identity")));
        file
    }

    fn small() -> SentencePieceModel {
        let pieces = [
            ("<unk>", 0.0, 2),
            ("<s>", 0.0, 3),
            ("</s>", 0.0, 3),
            ("\u{2581}", -1.0, 1),
            ("a", -1.0, 1),
            ("b", -1.0, 1),
            ("\u{2581}a", -2.0, 1),
            ("\u{2581}ab", -3.0, 1),
        ];
        SentencePieceModel::from_bytes(Path::new("m.model"), &model(&pieces, 2, false)).unwrap()
    }

    #[test]
    fn encoding_merges_unknown_runs_and_decoding_drops_the_first_space() {
        let m = small();
        let enc = m.encode("  ab  xy a ").unwrap();
        let pieces: Vec<(&str, u32)> = enc.iter().map(|p| (p.piece.as_str(), p.id)).collect();
        assert_eq!(pieces, vec![("\u{2581}ab", 7), ("\u{2581}", 3), ("xy", 0), ("\u{2581}a", 6)]);
        assert_eq!(m.decode_pieces(&["\u{2581}ab", "\u{2581}", "xy", "\u{2581}a"]), "ab xy a");
        assert_eq!(m.decode_ids(&[1, 7, 0, 2, 6]).unwrap(), "ab \u{2047}  a");
        assert!(m.decode_ids(&[8]).unwrap_err().to_string().contains("decoding id 8, past the model's 8 pieces"));
        assert_eq!(m.encode("").unwrap(), vec![]);
        assert_eq!(m.encode("   ").unwrap(), vec![]);
    }

    #[test]
    fn byte_fallback_spells_unknown_characters_in_bytes() {
        let mut pieces: Vec<(String, f32, u64)> = vec![("<unk>".into(), 0.0, 2), ("a".into(), -1.0, 1)];
        pieces.extend((0..=255u8).map(|b| (byte_piece(b), 0.0, 6)));
        let pieces: Vec<(&str, f32, u64)> = pieces.iter().map(|(p, s, k)| (p.as_str(), *s, *k)).collect();
        let m = SentencePieceModel::from_bytes(Path::new("m.model"), &model(&pieces, 2, true)).unwrap();
        let enc = m.encode("aé").unwrap();
        let ids: Vec<u32> = enc.iter().map(|p| p.id).collect();
        // ▁ is unknown too: e2 96 81, then a, then c3 a9.
        assert_eq!(ids, vec![0xe2 + 2, 0x96 + 2, 0x81 + 2, 1, 0xc3 + 2, 0xa9 + 2]);
        // Bytes decode to their characters as they are: the ▁ spelled in bytes is not a space.
        assert_eq!(m.decode_ids(&ids).unwrap(), "\u{2581}aé");
        // A malformed byte run decodes to U+FFFD a byte.
        assert_eq!(m.decode_pieces(&["<0xC3>", "a", "<0xFF>"]), "\u{fffd}a\u{fffd}");
    }

    #[test]
    fn models_of_other_types_and_oversized_files_are_refused_by_name() {
        let unigram = model(&[("<unk>", 0.0, 2)], 1, false);
        let e = SentencePieceModel::from_bytes(Path::new("spiece.model"), &unigram).unwrap_err().to_string();
        assert_eq!(
            e,
            "tokenizer spiece.model: trainer_spec.model_type is Unigram (1), expected BPE (2): only SentencePiece BPE models are read"
        );
        let no_unk = model(&[("a", 0.0, 1)], 2, false);
        let e = SentencePieceModel::from_bytes(Path::new("m.model"), &no_unk).unwrap_err().to_string();
        assert!(e.contains("no piece has the unknown type"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.model");
        std::fs::File::create(&big).unwrap().set_len(MAX_MODEL_BYTES + 1).unwrap();
        let e = SentencePieceModel::open(&big).unwrap_err().to_string();
        assert!(e.contains("67108865 bytes, more than the 67108864"), "{e}");
        let e = SentencePieceModel::open(&dir.path().join("none.model")).unwrap_err().to_string();
        assert!(e.contains("none.model: file not found"), "{e}");
        // One piece too many is refused while parsing.
        let many: Vec<u8> = std::iter::repeat_n(field(1, &field(1, b"a")), proto::MAX_PIECES + 1).flatten().collect();
        let e = SentencePieceModel::from_bytes(Path::new("m.model"), &many).unwrap_err().to_string();
        assert!(e.contains("more than 1048576 pieces"), "{e}");
    }
}
