//! SentencePiece's `ModelProto` (sentencepiece_model.proto, proto2) read from its protobuf wire
//! format, the fields a BPE encoder needs and nothing else: the pieces (string, score, type), the
//! trainer's `model_type`, `byte_fallback`, `treat_whitespace_as_suffix` and `unk_surface`, and
//! the normalizer and denormalizer specs. The bytes are hostile until bounded: every length is
//! checked against what is left before it is used, varints longer than ten bytes or overflowing 64
//! bits, groups (wire types 3 and 4), a known field of the wrong wire type, strings that are not
//! UTF-8, an enum value the schema does not have, and more than [`MAX_PIECES`] pieces or a piece
//! longer than [`MAX_PIECE_BYTES`] are each refused with an error naming the file, the field and
//! the byte offset. Unknown fields are skipped by their length, never parsed, so nesting is
//! bounded by the schema (three levels).
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// The most pieces a model may have (SentencePiece's largest released vocabularies have 256k).
pub const MAX_PIECES: usize = 1 << 20;

/// The longest piece accepted, in bytes (the trainer's `max_sentencepiece_length` is 16
/// characters by default; user-defined symbols can be longer).
pub const MAX_PIECE_BYTES: usize = 1024;

/// A piece's type (`ModelProto.SentencePiece.Type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PieceType {
    /// An ordinary piece.
    Normal,
    /// The unknown piece (`<unk>`).
    Unknown,
    /// A control symbol (`<s>`, `</s>`, `<pad>`): no surface.
    Control,
    /// A user-defined symbol: matched whole, never normalized or merged.
    UserDefined,
    /// A piece the encoder must not emit (split back into what it was merged from).
    Unused,
    /// A byte piece `<0xNN>` of byte fallback.
    Byte,
}

impl PieceType {
    /// The type of the proto's enum value, if the schema has it.
    fn of(value: u64) -> Option<Self> {
        Some(match value {
            1 => PieceType::Normal,
            2 => PieceType::Unknown,
            3 => PieceType::Control,
            4 => PieceType::UserDefined,
            5 => PieceType::Unused,
            6 => PieceType::Byte,
            _ => return None,
        })
    }
}

/// One entry of the vocabulary: its id is its position.
#[derive(Debug, Clone, PartialEq)]
pub struct Piece {
    /// The piece's text (`▁` for a space).
    pub piece: String,
    /// Its score (for BPE, higher merges first).
    pub score: f32,
    /// Its type.
    pub kind: PieceType,
}

/// The trainer's settings the encoder reads (`TrainerSpec`).
#[derive(Debug, Clone, PartialEq)]
pub struct TrainerSpec {
    /// `model_type`: 1 Unigram (the default), 2 BPE, 3 word, 4 char.
    pub model_type: u64,
    /// `byte_fallback`: unknown characters become their UTF-8 bytes' pieces.
    pub byte_fallback: bool,
    /// `treat_whitespace_as_suffix`: `▁` ends words instead of starting them.
    pub treat_whitespace_as_suffix: bool,
    /// `unk_surface`, what `<unk>` decodes to, when set (else ` ⁇ `).
    pub unk_surface: Option<String>,
}

impl Default for TrainerSpec {
    fn default() -> Self {
        TrainerSpec { model_type: 1, byte_fallback: false, treat_whitespace_as_suffix: false, unk_surface: None }
    }
}

/// A normalizer's settings (`NormalizerSpec`), with the proto's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct NormalizerSpec {
    /// `name` (`nmt_nfkc`, `identity`, …): informative; the rules are the charsmap.
    pub name: String,
    /// `precompiled_charsmap`: a double-array trie of rewrite rules and their outputs.
    pub precompiled_charsmap: Vec<u8>,
    /// `add_dummy_prefix`: a `▁` before the text.
    pub add_dummy_prefix: bool,
    /// `remove_extra_whitespaces`: no leading or trailing spaces, runs of spaces made one.
    pub remove_extra_whitespaces: bool,
    /// `escape_whitespaces`: spaces written as `▁`.
    pub escape_whitespaces: bool,
}

impl Default for NormalizerSpec {
    fn default() -> Self {
        NormalizerSpec {
            name: String::new(),
            precompiled_charsmap: Vec::new(),
            add_dummy_prefix: true,
            remove_extra_whitespaces: true,
            escape_whitespaces: true,
        }
    }
}

/// The model file's fields that encoding and decoding read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelProto {
    /// The vocabulary, in id order.
    pub pieces: Vec<Piece>,
    /// The trainer's settings.
    pub trainer_spec: TrainerSpec,
    /// The normalizer applied before encoding.
    pub normalizer_spec: NormalizerSpec,
    /// The denormalizer applied after decoding, when the file has one.
    pub denormalizer_spec: Option<NormalizerSpec>,
}

/// Parses `bytes`, the content of the model file `path` (named in errors).
pub fn parse(path: &Path, bytes: &[u8]) -> Result<ModelProto> {
    let mut model = ModelProto::default();
    let mut r = Reader { path, buf: bytes, pos: 0, base: 0, message: "ModelProto" };
    while let Some((field, wire)) = r.key()? {
        match field {
            1 => {
                if model.pieces.len() == MAX_PIECES {
                    return Err(r.error(format!("more than {MAX_PIECES} pieces")));
                }
                let (base, body) = r.message_field(field, wire)?;
                let index = model.pieces.len();
                model.pieces.push(piece(path, base, body, index)?);
            }
            2 => {
                let (base, body) = r.message_field(field, wire)?;
                trainer_spec(path, base, body, &mut model.trainer_spec)?;
            }
            3 => {
                let (base, body) = r.message_field(field, wire)?;
                normalizer_spec(path, base, body, "normalizer_spec", &mut model.normalizer_spec)?;
            }
            5 => {
                let (base, body) = r.message_field(field, wire)?;
                let spec = model.denormalizer_spec.get_or_insert_with(NormalizerSpec::default);
                normalizer_spec(path, base, body, "denormalizer_spec", spec)?;
            }
            _ => r.skip(wire)?,
        }
    }
    Ok(model)
}

/// One `SentencePiece` message, the `index`-th piece, whose body starts at file offset `base`.
fn piece(path: &Path, base: usize, body: &[u8], index: usize) -> Result<Piece> {
    let mut r = Reader { path, buf: body, pos: 0, base, message: "SentencePiece" };
    let (mut text, mut score, mut kind) = (None, 0.0f32, PieceType::Normal);
    while let Some((field, wire)) = r.key()? {
        match field {
            1 => {
                let bytes = r.length_delimited(field, wire)?;
                if bytes.len() > MAX_PIECE_BYTES {
                    return Err(r.error(format!(
                        "piece {index} is {} bytes long, more than the {MAX_PIECE_BYTES} accepted",
                        bytes.len()
                    )));
                }
                text = Some(r.utf8(bytes, &format!("piece {index}"))?);
            }
            2 => score = f32::from_bits(r.fixed32(field, wire)?),
            3 => {
                let value = r.varint_field(field, wire)?;
                kind = PieceType::of(value)
                    .ok_or_else(|| r.error(format!("piece {index} has type {value}, expected one of 1 to 6")))?;
            }
            _ => r.skip(wire)?,
        }
    }
    let piece = text.unwrap_or_default();
    if piece.is_empty() {
        return Err(Error::Tokenizer {
            path: path.to_path_buf(),
            message: format!("piece {index} (at byte {base}) is empty; SentencePiece refuses empty pieces"),
        });
    }
    if !score.is_finite() {
        return Err(Error::Tokenizer {
            path: path.to_path_buf(),
            message: format!("piece {index} ({piece:?}) has score {score}, expected a finite number"),
        });
    }
    Ok(Piece { piece, score, kind })
}

/// A `TrainerSpec` message merged into `spec` (proto2 merges repeated occurrences).
fn trainer_spec(path: &Path, base: usize, body: &[u8], spec: &mut TrainerSpec) -> Result<()> {
    let mut r = Reader { path, buf: body, pos: 0, base, message: "trainer_spec" };
    while let Some((field, wire)) = r.key()? {
        match field {
            3 => spec.model_type = r.varint_field(field, wire)?,
            24 => spec.treat_whitespace_as_suffix = r.varint_field(field, wire)? != 0,
            35 => spec.byte_fallback = r.varint_field(field, wire)? != 0,
            44 => {
                let bytes = r.length_delimited(field, wire)?;
                spec.unk_surface = Some(r.utf8(bytes, "unk_surface")?);
            }
            _ => r.skip(wire)?,
        }
    }
    Ok(())
}

/// A `NormalizerSpec` message (`which`: the field's name) merged into `spec`.
fn normalizer_spec(
    path: &Path,
    base: usize,
    body: &[u8],
    which: &'static str,
    spec: &mut NormalizerSpec,
) -> Result<()> {
    let mut r = Reader { path, buf: body, pos: 0, base, message: which };
    while let Some((field, wire)) = r.key()? {
        match field {
            1 => {
                let bytes = r.length_delimited(field, wire)?;
                spec.name = r.utf8(bytes, "name")?;
            }
            2 => spec.precompiled_charsmap = r.length_delimited(field, wire)?.to_vec(),
            3 => spec.add_dummy_prefix = r.varint_field(field, wire)? != 0,
            4 => spec.remove_extra_whitespaces = r.varint_field(field, wire)? != 0,
            5 => spec.escape_whitespaces = r.varint_field(field, wire)? != 0,
            _ => r.skip(wire)?,
        }
    }
    Ok(())
}

/// A cursor over one message's bytes, which start at file offset `base`.
struct Reader<'a> {
    path: &'a Path,
    buf: &'a [u8],
    pos: usize,
    base: usize,
    message: &'static str,
}

impl<'a> Reader<'a> {
    /// An error at the cursor, naming the file, the message and the file offset.
    fn error(&self, what: String) -> Error {
        Error::Tokenizer {
            path: PathBuf::from(self.path),
            message: format!("not a SentencePiece model: {} at byte {}: {what}", self.message, self.base + self.pos),
        }
    }

    /// A base-128 varint: at most ten bytes, the tenth 0 or 1 (64 bits, no continuation).
    fn varint(&mut self) -> Result<u64> {
        let start = self.pos;
        let mut value = 0u64;
        for i in 0..10 {
            let Some(&byte) = self.buf.get(self.pos) else {
                self.pos = start;
                return Err(self.error("a varint is cut off by the end of its message".into()));
            };
            self.pos += 1;
            if i == 9 && byte > 1 {
                self.pos = start;
                return Err(self.error("a varint overflows 64 bits or runs past ten bytes".into()));
            }
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                break;
            }
        }
        Ok(value)
    }

    /// The next field's number and wire type, `None` at the end of the message.
    fn key(&mut self) -> Result<Option<(u64, u8)>> {
        if self.pos == self.buf.len() {
            return Ok(None);
        }
        let start = self.pos;
        let key = self.varint()?;
        let (field, wire) = (key >> 3, (key & 7) as u8);
        if field == 0 || field > (1 << 29) - 1 {
            self.pos = start;
            return Err(self.error(format!("field number {field}, expected 1 to 536870911")));
        }
        match wire {
            0 | 1 | 2 | 5 => Ok(Some((field, wire))),
            3 | 4 => {
                self.pos = start;
                Err(self.error(format!("field {field} is a group (wire type {wire}), which this schema never has")))
            }
            _ => {
                self.pos = start;
                Err(self.error(format!("field {field} has wire type {wire}, expected 0, 1, 2 or 5")))
            }
        }
    }

    /// Refuses a known field sent with the wrong wire type.
    fn expect_wire(&self, field: u64, wire: u8, expected: u8, what: &str) -> Result<()> {
        if wire != expected {
            return Err(self.error(format!("field {field} has wire type {wire}, expected {expected} ({what})")));
        }
        Ok(())
    }

    /// A varint field's value.
    fn varint_field(&mut self, field: u64, wire: u8) -> Result<u64> {
        self.expect_wire(field, wire, 0, "a varint")?;
        self.varint()
    }

    /// A 32-bit fixed field's bits (little-endian).
    fn fixed32(&mut self, field: u64, wire: u8) -> Result<u32> {
        self.expect_wire(field, wire, 5, "a 32-bit float")?;
        let bytes = self.take(4)?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    /// `n` bytes from the cursor, refused when fewer remain.
    fn take(&mut self, n: u64) -> Result<&'a [u8]> {
        let left = self.buf.len() - self.pos;
        if n > left as u64 {
            return Err(self.error(format!("a field declares {n} bytes but only {left} remain in its message")));
        }
        let bytes = &self.buf[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(bytes)
    }

    /// A length-delimited field's bytes.
    fn length_delimited(&mut self, field: u64, wire: u8) -> Result<&'a [u8]> {
        self.expect_wire(field, wire, 2, "length-delimited")?;
        let len = self.varint()?;
        self.take(len)
    }

    /// An embedded message's file offset and bytes.
    fn message_field(&mut self, field: u64, wire: u8) -> Result<(usize, &'a [u8])> {
        self.expect_wire(field, wire, 2, "an embedded message")?;
        let len = self.varint()?;
        let base = self.base + self.pos;
        Ok((base, self.take(len)?))
    }

    /// Skips an unknown field of wire type `wire` without reading into it.
    fn skip(&mut self, wire: u8) -> Result<()> {
        match wire {
            0 => self.varint().map(drop),
            1 => self.take(8).map(drop),
            2 => {
                let len = self.varint()?;
                self.take(len).map(drop)
            }
            _ => self.take(4).map(drop),
        }
    }

    /// `bytes` as UTF-8 text (`what`: the field, for the message).
    fn utf8(&self, bytes: &[u8], what: &str) -> Result<String> {
        String::from_utf8(bytes.to_vec()).map_err(|e| self.error(format!("{what} is not UTF-8 ({e})")))
    }
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

    /// A length-delimited field.
    fn bytes_field(field: u64, body: &[u8]) -> Vec<u8> {
        [varint(field << 3 | 2), varint(body.len() as u64), body.to_vec()].concat()
    }

    /// A piece message: text, score, type.
    fn piece_msg(text: &str, score: f32, kind: u64) -> Vec<u8> {
        [
            bytes_field(1, text.as_bytes()),
            varint(2 << 3 | 5),
            score.to_le_bytes().to_vec(),
            varint(3 << 3),
            varint(kind),
        ]
        .concat()
    }

    fn err(bytes: &[u8]) -> String {
        parse(Path::new("m.model"), bytes).unwrap_err().to_string()
    }

    #[test]
    fn a_small_model_parses_with_the_protos_defaults() {
        let trainer = [varint(3 << 3), varint(2)].concat();
        let normalizer = [bytes_field(1, b"nmt_nfkc"), varint(3 << 3), varint(0)].concat();
        let file = [
            bytes_field(1, &piece_msg("<unk>", 0.0, 2)),
            bytes_field(1, &piece_msg("\u{2581}a", -1.5, 1)),
            bytes_field(2, &trainer),
            bytes_field(3, &normalizer),
            // An unknown field of each wire type is skipped.
            [varint(9 << 3), varint(300)].concat(),
            [varint(10 << 3 | 1), vec![0; 8]].concat(),
            bytes_field(11, b"whatever"),
            [varint(12 << 3 | 5), vec![0; 4]].concat(),
        ]
        .concat();
        let model = parse(Path::new("m.model"), &file).unwrap();
        assert_eq!(model.pieces.len(), 2);
        assert_eq!(model.pieces[1], Piece { piece: "\u{2581}a".into(), score: -1.5, kind: PieceType::Normal });
        assert_eq!(model.pieces[0].kind, PieceType::Unknown);
        assert_eq!(model.trainer_spec.model_type, 2);
        assert!(!model.trainer_spec.byte_fallback);
        assert_eq!(model.normalizer_spec.name, "nmt_nfkc");
        assert!(!model.normalizer_spec.add_dummy_prefix);
        assert!(model.normalizer_spec.remove_extra_whitespaces && model.normalizer_spec.escape_whitespaces);
        assert!(model.denormalizer_spec.is_none());
        // Nothing at all is an empty model (a default ModelProto), refused later for lacking pieces.
        assert_eq!(parse(Path::new("m.model"), &[]).unwrap(), ModelProto::default());
    }

    #[test]
    fn truncated_fields_are_refused_with_their_place() {
        let file = bytes_field(1, &piece_msg("abc", 0.0, 1));
        for cut in 1..file.len() {
            let e = err(&file[..cut]);
            assert!(e.starts_with("tokenizer m.model: not a SentencePiece model: "), "{cut}: {e}");
            assert!(e.contains("at byte "), "{e}");
        }
        assert!(err(&file[..file.len() - 1]).contains("declares"), "{}", err(&file[..file.len() - 1]));
        assert!(err(&[0x0a]).contains("cut off"), "{}", err(&[0x0a]));
    }

    #[test]
    fn garbage_overflow_groups_and_wrong_wire_types_are_refused() {
        assert!(err(&[0x0a; 12]).contains("cut off") || err(&[0x0a; 12]).contains("declares"));
        let overflow = [vec![0x48], vec![0xff; 9], vec![0x02]].concat();
        assert!(err(&overflow).contains("overflows 64 bits"), "{}", err(&overflow));
        let long = [vec![0x48], vec![0x80; 11]].concat();
        assert!(err(&long).contains("runs past ten bytes"), "{}", err(&long));
        // The largest varint reads.
        let max = [vec![0x48], vec![0xff; 9], vec![0x01]].concat();
        assert!(parse(Path::new("m.model"), &max).is_ok());
        assert!(err(&[0x0b]).contains("group (wire type 3)"), "{}", err(&[0x0b]));
        assert!(err(&[0x0f]).contains("wire type 7"), "{}", err(&[0x0f]));
        assert!(err(&[0x00]).contains("field number 0"), "{}", err(&[0x00]));
        // pieces (field 1) sent as a varint.
        assert!(err(&[0x08, 0x01]).contains("field 1 has wire type 0, expected 2"), "{}", err(&[0x08, 0x01]));
        // A score sent as a varint.
        let bad_score = bytes_field(1, &[bytes_field(1, b"a"), varint(2 << 3), varint(1)].concat());
        assert!(err(&bad_score).contains("expected 5 (a 32-bit float)"), "{}", err(&bad_score));
        // A declared length beyond the file.
        let huge = [varint(1 << 3 | 2), varint(u64::MAX >> 1)].concat();
        assert!(err(&huge).contains("only 0 remain"), "{}", err(&huge));
        // Random bytes never panic.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..2000 {
            let len = (state % 64) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect();
            let _ = parse(Path::new("m.model"), &bytes);
        }
    }

    #[test]
    fn bad_pieces_are_refused_by_name() {
        let long = "x".repeat(MAX_PIECE_BYTES + 1);
        assert!(err(&bytes_field(1, &piece_msg(&long, 0.0, 1))).contains("1025 bytes long"));
        assert!(err(&bytes_field(1, &piece_msg("a", 0.0, 9))).contains("piece 0 has type 9"));
        assert!(err(&bytes_field(1, &piece_msg("a", f32::NAN, 1))).contains("expected a finite number"));
        assert!(err(&bytes_field(1, &piece_msg("", 0.0, 1))).contains("piece 0 (at byte 2) is empty"));
        let not_utf8 = bytes_field(1, &bytes_field(1, &[0xff, 0xfe]));
        assert!(err(&not_utf8).contains("piece 0 is not UTF-8"), "{}", err(&not_utf8));
    }
}
