//! What a downloaded file must be, checked by its content before it counts as complete, whether
//! or not the host publishes a size or checksum: an xz file's stream structure (header, index
//! and footer of every stream, their CRC32s and sizes adding up to the file's), a parquet
//! file's footer and metadata, a CSV's header columns and every row. A failure says what came
//! back instead (an HTML page, a JSON document, text, binary data).
use crate::error::{IoContext, Result};
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// The kind of content a download must have.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    /// An `.xz` file (one or more streams, with stream padding).
    Xz,
    /// A parquet file whose footer and metadata read.
    Parquet,
    /// A UTF-8 CSV with a header holding these columns and at least one row, every row with the
    /// header's number of fields.
    Csv {
        /// Columns the header must hold.
        columns: Vec<String>,
    },
}

impl Content {
    /// A CSV with these columns.
    pub(crate) fn csv(columns: &[&str]) -> Self {
        Content::Csv { columns: columns.iter().map(|c| c.to_string()).collect() }
    }

    /// What the content is called in messages.
    pub fn name(&self) -> &'static str {
        match self {
            Content::Xz => "xz data",
            Content::Parquet => "a parquet file",
            Content::Csv { .. } => "a CSV file",
        }
    }

    /// `Ok(None)` when the file at `path` is this content, else why not.
    pub(crate) fn check(&self, path: &Path) -> Result<Option<String>> {
        match self {
            Content::Xz => check_xz(path),
            Content::Parquet => Ok(check_parquet(path)),
            Content::Csv { columns } => Ok(check_csv(path, columns)),
        }
    }
}

/// What a file that failed its check holds: `an HTML page (296 bytes)`, `text starting "…"`.
pub(crate) fn describe(path: &Path) -> Result<String> {
    let len = std::fs::metadata(path).with_path(path)?.len();
    let mut head = Vec::new();
    std::fs::File::open(path).with_path(path)?.take(512).read_to_end(&mut head).with_path(path)?;
    let text = String::from_utf8_lossy(&head);
    let lower = text.trim_start().to_lowercase();
    let what = if len == 0 {
        return Ok("an empty file".into());
    } else if lower.starts_with("<!doctype html") || lower.starts_with("<html") || lower.contains("<html") {
        "an HTML page".to_string()
    } else if lower.starts_with('{') || lower.starts_with('[') {
        "a JSON document".to_string()
    } else if std::str::from_utf8(&head).is_ok() || head.len() == 512 && std::str::from_utf8(&head[..500]).is_ok() {
        let start: String = text.chars().take(40).collect();
        format!("text starting {start:?}")
    } else {
        let start: Vec<String> = head.iter().take(8).map(|b| format!("{b:02x}")).collect();
        format!("binary data starting {}", start.join(" "))
    };
    Ok(format!("{what} ({len} bytes)"))
}

const XZ_HEADER_MAGIC: [u8; 6] = [0xFD, b'7', b'z', b'X', b'Z', 0x00];
const XZ_FOOTER_MAGIC: [u8; 2] = [b'Y', b'Z'];

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = flate2::Crc::new();
    crc.update(bytes);
    crc.sum()
}

/// Reads `len` bytes at `offset`.
fn read_at(file: &mut std::fs::File, path: &Path, offset: u64, len: usize) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    file.seek(SeekFrom::Start(offset)).with_path(path)?;
    file.read_exact(&mut buf).with_path(path)?;
    Ok(buf)
}

/// An xz multibyte integer at `bytes[*at..]` (at most 9 bytes), advancing `at`.
fn xz_varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for i in 0..9 {
        let b = *bytes.get(*at)?;
        *at += 1;
        value |= u64::from(b & 0x7F) << (7 * i);
        if b & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// The xz file format's structure, walked from the end as `xz --list` does: for each stream its
/// footer (magic, CRC32), its index (indicator, records, padding, CRC32), and the header its
/// sizes point at (magic, the footer's flags, CRC32); stream padding between them.
fn check_xz(path: &Path) -> Result<Option<String>> {
    let mut file = std::fs::File::open(path).with_path(path)?;
    let mut end = file.metadata().with_path(path)?.len();
    if end < 32 {
        return Ok(Some(format!("{end} bytes is shorter than the smallest xz stream (32)")));
    }
    let first = read_at(&mut file, path, 0, 6)?;
    if first != XZ_HEADER_MAGIC {
        return Ok(Some("no xz header magic at the start".into()));
    }
    let mut streams = 0;
    while end > 0 {
        // Stream padding: zero bytes in multiples of four.
        while end >= 4 && read_at(&mut file, path, end - 4, 4)? == [0, 0, 0, 0] {
            end -= 4;
        }
        if end < 24 {
            return Ok(Some(format!("{end} bytes before stream {} from the end, too few for a stream", streams + 1)));
        }
        let footer = read_at(&mut file, path, end - 12, 12)?;
        if footer[10..12] != XZ_FOOTER_MAGIC {
            return Ok(Some("no xz stream footer at the end: the file is cut short".into()));
        }
        if crc32(&footer[4..10]) != u32::from_le_bytes(footer[0..4].try_into().unwrap()) {
            return Ok(Some("the stream footer's CRC32 does not match".into()));
        }
        let index_size = (u64::from(u32::from_le_bytes(footer[4..8].try_into().unwrap())) + 1) * 4;
        if index_size + 24 > end {
            return Ok(Some(format!(
                "the stream footer names an index of {index_size} bytes, more than the file holds"
            )));
        }
        let index = read_at(&mut file, path, end - 12 - index_size, index_size as usize)?;
        let (body, stored) = index.split_at(index.len() - 4);
        if body.first() != Some(&0) || crc32(body) != u32::from_le_bytes(stored.try_into().unwrap()) {
            return Ok(Some("the stream index is not where the footer points, or its CRC32 does not match".into()));
        }
        let mut at = 1;
        let Some(records) = xz_varint(body, &mut at) else {
            return Ok(Some("the stream index's record count does not parse".into()));
        };
        let mut blocks = 0u64;
        for _ in 0..records {
            let (Some(unpadded), Some(_)) = (xz_varint(body, &mut at), xz_varint(body, &mut at)) else {
                return Ok(Some("a stream index record does not parse".into()));
            };
            blocks = blocks.saturating_add(unpadded.div_ceil(4) * 4);
        }
        if at.div_ceil(4) * 4 != body.len() {
            return Ok(Some("the stream index's records do not fill it".into()));
        }
        let Some(start) = end.checked_sub(12 + index_size + blocks + 12) else {
            return Ok(Some("the stream index lists more block bytes than the file holds".into()));
        };
        let header = read_at(&mut file, path, start, 12)?;
        if header[0..6] != XZ_HEADER_MAGIC
            || header[6..8] != footer[8..10]
            || crc32(&header[6..8]) != u32::from_le_bytes(header[8..12].try_into().unwrap())
        {
            return Ok(Some(format!(
                "the stream header is not where the index's sizes put it (byte {start}): blocks are missing"
            )));
        }
        streams += 1;
        end = start;
    }
    Ok(None)
}

/// The parquet footer (magic, metadata length) and the metadata itself.
fn check_parquet(path: &Path) -> Option<String> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) => return Some(e.to_string()),
    };
    match SerializedFileReader::new(file) {
        Ok(reader) if reader.metadata().file_metadata().schema_descr().num_columns() > 0 => None,
        Ok(_) => Some("its schema has no columns".into()),
        Err(e) => Some(e.to_string()),
    }
}

/// The header holds `columns`, and every row parses as UTF-8 with the header's field count.
fn check_csv(path: &Path, columns: &[String]) -> Option<String> {
    let mut reader = match csv::Reader::from_path(path) {
        Ok(r) => r,
        Err(e) => return Some(e.to_string()),
    };
    let header: Vec<String> = match reader.headers() {
        Ok(h) => h.iter().map(String::from).collect(),
        Err(e) => return Some(format!("the header does not parse: {e}")),
    };
    if let Some(missing) = columns.iter().find(|c| !header.contains(c)) {
        return Some(format!("the header has no column {missing:?} (it has {header:?})"));
    }
    let mut rows = 0u64;
    for record in reader.records() {
        if let Err(e) = record {
            return Some(format!("row {} does not parse: {e}", rows + 2));
        }
        rows += 1;
    }
    (rows == 0).then(|| "no rows after the header".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn xz(bytes: &[u8]) -> Vec<u8> {
        let mut enc = liblzma::write::XzEncoder::new(Vec::new(), 1);
        enc.write_all(bytes).unwrap();
        enc.finish().unwrap()
    }

    fn file(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn whole_xz_files_pass_and_cut_or_foreign_ones_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let text: String = (0..5000).map(|i| format!("kalimat {i}\n")).collect();
        let one = xz(text.as_bytes());
        assert_eq!(Content::Xz.check(&file(&dir, "a.xz", &one)).unwrap(), None);
        // Two concatenated streams with stream padding between them, as `xz` accepts.
        let mut two = one.clone();
        two.extend([0u8; 8]);
        two.extend(xz(b"lagi\n"));
        assert_eq!(Content::Xz.check(&file(&dir, "b.xz", &two)).unwrap(), None);
        let half = Content::Xz.check(&file(&dir, "c.xz", &one[..one.len() / 2])).unwrap().unwrap();
        assert!(half.contains("cut short"), "{half}");
        let html = b"<!DOCTYPE html><html><body>Index of /cc-100</body></html>";
        let why = Content::Xz.check(&file(&dir, "d.xz", html)).unwrap().unwrap();
        assert!(why.contains("header magic"), "{why}");
        // A block cut from the middle: the footer and index are whole, the sizes do not add up.
        let mut gap = one[..12].to_vec();
        gap.extend(&one[40..]);
        assert!(Content::Xz.check(&file(&dir, "e.xz", &gap)).unwrap().is_some());
        assert_eq!(describe(&file(&dir, "f", html)).unwrap(), format!("an HTML page ({} bytes)", html.len()));
    }

    #[test]
    fn csv_needs_its_columns_and_whole_rows() {
        let dir = tempfile::tempdir().unwrap();
        let cols = Content::csv(&["text", "label"]);
        assert_eq!(cols.check(&file(&dir, "a.csv", b"id,text,label\n1,bagus,positive\n")).unwrap(), None);
        let why = cols.check(&file(&dir, "b.csv", b"<html><body>404</body></html>\n")).unwrap().unwrap();
        assert!(why.contains("no column \"text\""), "{why}");
        let why = cols.check(&file(&dir, "c.csv", b"id,text,label\n1,bagus,positive\n2,cut\n")).unwrap().unwrap();
        assert!(why.contains("row 3"), "{why}");
        let why = cols.check(&file(&dir, "d.csv", b"id,text,label\n")).unwrap().unwrap();
        assert!(why.contains("no rows"), "{why}");
        let why = cols.check(&file(&dir, "e.csv", b"id,text,label\n1,\xff\xfe,positive\n")).unwrap().unwrap();
        assert!(why.contains("row 2"), "{why}");
    }

    #[test]
    fn parquet_needs_its_footer() {
        let dir = tempfile::tempdir().unwrap();
        let why = Content::Parquet.check(&file(&dir, "a.parquet", b"PAR1 not really PAR1")).unwrap().unwrap();
        assert!(!why.is_empty());
    }
}
