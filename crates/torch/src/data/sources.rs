//! Text sources: where pretraining text comes from and how each format is read into
//! documents (lists of paragraphs). Formats: plain text (`.txt`, `.txt.gz`, `.txt.xz`; one
//! paragraph a line, blank lines between documents, as CC-100 ships), JSON Lines with a text
//! field, CoNLL-U `# text =` lines, NusaX-style CSV with a text column, and the Liputan6
//! processed layout (`clean_article` as lists of token lists).
use crate::error::{Error, IoContext, Result};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// How a source file is read: the recipe's `format` (lowercase names), else detected from the
/// file name by `SourceSpec::format_of` (never `Liputan6`, which must be named).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Plain text, optionally `.gz` or `.xz`: one paragraph a line, a blank line between documents.
    Text,
    /// JSON Lines: the `text_field` string of each record is a document, its lines paragraphs.
    Jsonl,
    /// CoNLL-U: each `# text = ` line a paragraph, `# newdoc` starting a document.
    Conllu,
    /// CSV with a header: the `text_field` column of each row is a one-paragraph document.
    Csv,
    /// Parquet (the Wikipedia shards): the `text_field` string column, each row a document, its
    /// lines paragraphs.
    Parquet,
    /// Liputan6 processed JSON: one document per `.json` file, each `clean_article` sentence a
    /// paragraph (tokens joined with spaces); other files are skipped.
    Liputan6,
}

/// One named source of a corpus, as written in a recipe's `[[data.sources]]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceSpec {
    /// Source name in the recipe; also names its prepared shard.
    pub name: String,
    /// Language tag (`id`, `jv`, `su`, ...), reported in statistics.
    pub lang: String,
    /// Files, directories or globs.
    pub paths: Vec<String>,
    /// Detected from the file extension when omitted (`.jsonl`, `.conllu`, `.csv`, else text).
    #[serde(default)]
    pub format: Option<Format>,
    /// Field of a JSON Lines record, or column of a CSV file, holding the text.
    #[serde(default = "default_text_field")]
    pub text_field: String,
    /// Mixture weight (normalised over all sources).
    #[serde(default = "default_weight")]
    pub weight: f64,
}

fn default_text_field() -> String {
    "text".into()
}
fn default_weight() -> f64 {
    1.0
}

/// What reading a source found and skipped, to be reported.
#[derive(Debug, Default, Clone, Serialize, Deserialize, PartialEq)]
pub struct ReadStats {
    /// Files read.
    pub files: usize,
    /// Documents emitted (empty ones are not counted).
    pub documents: usize,
    /// Paragraphs in those documents.
    pub paragraphs: usize,
    /// Lines skipped because they are not valid UTF-8 (line-based formats).
    pub invalid_utf8_lines: usize,
}

impl SourceSpec {
    /// Expands `paths` (files, directories, globs) relative to `base`, sorted; an entry that
    /// matches nothing is an error naming it.
    pub fn files(&self, base: &Path) -> Result<Vec<PathBuf>> {
        let mut out = Vec::new();
        for entry in &self.paths {
            let full = if Path::new(entry).is_absolute() { PathBuf::from(entry) } else { base.join(entry) };
            let pattern = full.to_string_lossy().to_string();
            let mut matched: Vec<PathBuf> = if pattern.contains(['*', '?', '[']) {
                glob::glob(&pattern)
                    .map_err(|e| Error::data(format!("source `{}`", self.name), format!("bad glob {entry:?}: {e}")))?
                    .filter_map(|p| p.ok())
                    .filter(|p| p.is_file())
                    .collect()
            } else if full.is_dir() {
                walk_files(&full)?
            } else if full.is_file() {
                vec![full.clone()]
            } else {
                Vec::new()
            };
            if matched.is_empty() {
                return Err(Error::MissingFile {
                    path: full,
                    hint: format!("source `{}`: path or glob {entry:?} matches no file", self.name),
                });
            }
            matched.sort();
            out.extend(matched);
        }
        Ok(out)
    }

    /// The format of `file`: `format` when given, else from its name, case-insensitive and with a
    /// `.gz`/`.xz` suffix ignored: `.jsonl`, `.conllu`, `.csv`, `.parquet`, anything else text.
    pub(crate) fn format_of(&self, file: &Path) -> Format {
        if let Some(f) = self.format {
            return f;
        }
        let name = file.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
        let name = name.trim_end_matches(".gz").trim_end_matches(".xz");
        if name.ends_with(".jsonl") {
            Format::Jsonl
        } else if name.ends_with(".conllu") {
            Format::Conllu
        } else if name.ends_with(".csv") {
            Format::Csv
        } else if name.ends_with(".parquet") {
            Format::Parquet
        } else {
            Format::Text
        }
    }

    /// Reads every document of every file, in order, calling `emit` with its paragraphs.
    pub fn read_documents(&self, base: &Path, mut emit: impl FnMut(Vec<String>)) -> Result<ReadStats> {
        let mut stats = ReadStats::default();
        for file in self.files(base)? {
            stats.files += 1;
            let mut count = |doc: Vec<String>| {
                if !doc.is_empty() {
                    stats.documents += 1;
                    stats.paragraphs += doc.len();
                    emit(doc);
                }
            };
            match self.format_of(&file) {
                Format::Text => read_text(&file, &mut count, &mut stats.invalid_utf8_lines)?,
                Format::Jsonl => read_jsonl(&file, &self.text_field, &mut count, &mut stats.invalid_utf8_lines)?,
                Format::Conllu => read_conllu(&file, &mut count, &mut stats.invalid_utf8_lines)?,
                Format::Csv => read_csv(&file, &self.text_field, &mut count)?,
                Format::Parquet => read_parquet(&file, &self.text_field, &mut count)?,
                Format::Liputan6 => read_liputan6(&file, &mut count)?,
            }
        }
        Ok(stats)
    }
}

fn walk_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).with_path(dir)? {
        let path = entry.with_path(dir)?.path();
        if path.is_dir() {
            out.extend(walk_files(&path)?);
        } else {
            out.push(path);
        }
    }
    Ok(out)
}

/// Opens a file, decompressing `.gz` and `.xz` transparently.
pub(crate) fn open_maybe_compressed(path: &Path) -> Result<Box<dyn BufRead>> {
    let file = std::fs::File::open(path).with_path(path)?;
    let name = path.to_string_lossy();
    let reader: Box<dyn Read> = if name.ends_with(".gz") {
        Box::new(flate2::read::MultiGzDecoder::new(file))
    } else if name.ends_with(".xz") {
        Box::new(liblzma::read::XzDecoder::new_multi_decoder(file))
    } else {
        Box::new(file)
    };
    Ok(Box::new(BufReader::with_capacity(1 << 20, reader)))
}

/// Calls `line` with every line of the file; invalid UTF-8 lines are skipped and counted;
/// a read error (a truncated `.gz`/`.xz`) names the file.
fn for_each_line(path: &Path, invalid: &mut usize, mut line: impl FnMut(&str) -> Result<()>) -> Result<()> {
    let mut reader = open_maybe_compressed(path)?;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .map_err(|e| Error::invalid(path, format!("cannot read (truncated or corrupt file?): {e}")))?;
        if n == 0 {
            return Ok(());
        }
        match std::str::from_utf8(&buf) {
            Ok(s) => line(s.trim_end_matches(['\n', '\r']))?,
            Err(_) => *invalid += 1,
        }
    }
}

/// CC-100 layout: one paragraph a line, a blank line ends a document.
fn read_text(path: &Path, emit: &mut impl FnMut(Vec<String>), invalid: &mut usize) -> Result<()> {
    let mut doc = Vec::new();
    for_each_line(path, invalid, |line| {
        let line = line.trim();
        if line.is_empty() {
            emit(std::mem::take(&mut doc));
        } else {
            doc.push(line.to_string());
        }
        Ok(())
    })?;
    emit(doc);
    Ok(())
}

/// One JSON object a line; `field` holds the document (its lines become paragraphs).
fn read_jsonl(path: &Path, field: &str, emit: &mut impl FnMut(Vec<String>), invalid: &mut usize) -> Result<()> {
    let mut line_no = 0;
    for_each_line(path, invalid, |line| {
        line_no += 1;
        if line.trim().is_empty() {
            return Ok(());
        }
        let value: serde_json::Value = serde_json::from_str(line).map_err(|e| Error::Json {
            path: path.into(),
            line: line_no,
            column: e.column(),
            message: e.to_string(),
        })?;
        let text = value.get(field).and_then(|v| v.as_str()).ok_or_else(|| Error::Json {
            path: path.into(),
            line: line_no,
            column: 1,
            message: format!("record has no string field `{field}`"),
        })?;
        emit(text.lines().map(str::trim).filter(|l| !l.is_empty()).map(String::from).collect());
        Ok(())
    })
}

/// CoNLL-U: the raw sentence of each `# text = ` line; `# newdoc` starts a new document.
fn read_conllu(path: &Path, emit: &mut impl FnMut(Vec<String>), invalid: &mut usize) -> Result<()> {
    let mut doc = Vec::new();
    for_each_line(path, invalid, |line| {
        if line.starts_with("# newdoc") {
            emit(std::mem::take(&mut doc));
        } else if let Some(text) = line.strip_prefix("# text = ") {
            doc.push(text.trim().to_string());
        }
        Ok(())
    })?;
    emit(doc);
    Ok(())
}

/// CSV with a header; each row's `column` is one document.
fn read_csv(path: &Path, column: &str, emit: &mut impl FnMut(Vec<String>)) -> Result<()> {
    let mut reader = csv::Reader::from_reader(open_maybe_compressed(path)?);
    let headers = reader.headers().map_err(|e| Error::invalid(path, format!("CSV header: {e}")))?.clone();
    let index = headers.iter().position(|h| h == column).ok_or_else(|| {
        Error::field(path, column, format!("no such column; the header has {:?}", headers.iter().collect::<Vec<_>>()))
    })?;
    for (row, record) in reader.records().enumerate() {
        let record = record.map_err(|e| Error::invalid(path, format!("CSV row {}: {e}", row + 2)))?;
        let text = record.get(index).unwrap_or("").trim();
        if !text.is_empty() {
            emit(vec![text.to_string()]);
        }
    }
    Ok(())
}

/// Parquet with a string column `column` (Wikipedia shards: `text`); each row a document,
/// its lines paragraphs.
fn read_parquet(path: &Path, column: &str, emit: &mut impl FnMut(Vec<String>)) -> Result<()> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let file = std::fs::File::open(path).with_path(path)?;
    let reader = SerializedFileReader::new(file)
        .map_err(|e| Error::invalid(path, format!("not a readable parquet file: {e}")))?;
    let schema = reader.metadata().file_metadata().schema_descr_ptr();
    let fields = schema.root_schema().get_fields();
    let names: Vec<&str> = fields.iter().map(|f| f.name()).collect();
    let index = names
        .iter()
        .position(|n| *n == column)
        .ok_or_else(|| Error::field(path, column, format!("no such column; the file has {names:?}")))?;
    let projection = parquet::schema::types::Type::group_type_builder("schema")
        .with_fields(vec![fields[index].clone()])
        .build()
        .map_err(|e| Error::invalid(path, e.to_string()))?;
    let rows = reader.get_row_iter(Some(projection)).map_err(|e| Error::invalid(path, e.to_string()))?;
    for (i, row) in rows.enumerate() {
        use parquet::record::RowAccessor;
        let row = row.map_err(|e| Error::invalid(path, format!("row {i}: {e}")))?;
        let text = row
            .get_string(0)
            .map_err(|e| Error::invalid(path, format!("row {i}: column `{column}` is not a string: {e}")))?;
        emit(text.lines().map(str::trim).filter(|l| !l.is_empty()).map(String::from).collect());
    }
    Ok(())
}

/// Liputan6 processed article: `clean_article` is a list of sentences, each a list of tokens.
fn read_liputan6(path: &Path, emit: &mut impl FnMut(Vec<String>)) -> Result<()> {
    if path.extension().is_none_or(|e| e != "json") {
        return Ok(());
    }
    let text = indolm_core::files::read_to_string(path)?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| Error::json(path, &e))?;
    let article = value
        .get("clean_article")
        .and_then(|a| a.as_array())
        .ok_or_else(|| Error::field(path, "clean_article", "missing or not a list of sentences"))?;
    let mut doc = Vec::new();
    for sentence in article {
        let tokens = sentence
            .as_array()
            .ok_or_else(|| Error::field(path, "clean_article", "a sentence is not a list of tokens"))?;
        let words: Vec<&str> = tokens.iter().filter_map(|t| t.as_str()).collect();
        if !words.is_empty() {
            doc.push(words.join(" "));
        }
    }
    emit(doc);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(format: Option<Format>) -> SourceSpec {
        SourceSpec {
            name: "s".into(),
            lang: "id".into(),
            paths: vec!["*".into()],
            format,
            text_field: default_text_field(),
            weight: default_weight(),
        }
    }

    #[test]
    fn format_follows_the_name_without_compression_suffix_unless_given() {
        let detect = |name: &str| spec(None).format_of(Path::new(name));
        assert_eq!(detect("dir/part.JSONL.gz"), Format::Jsonl);
        assert_eq!(detect("id_gsd-ud-train.conllu.xz"), Format::Conllu);
        assert_eq!(detect("train.csv"), Format::Csv);
        assert_eq!(detect("train-00000-of-00002.parquet"), Format::Parquet);
        assert_eq!(detect("id.txt.xz"), Format::Text);
        assert_eq!(detect("README"), Format::Text);
        // Only `.jsonl` is JSON Lines; a `.json` file is read as text.
        assert_eq!(detect("article.json"), Format::Text);
        assert_eq!(spec(Some(Format::Liputan6)).format_of(Path::new("a.csv")), Format::Liputan6);
    }

    #[test]
    fn recipe_defaults_and_lowercase_format_names() {
        let s: SourceSpec =
            toml::from_str("name = \"cc\"\nlang = \"jv\"\npaths = [\"a.txt\"]\nformat = \"conllu\"").unwrap();
        assert_eq!((s.format, s.text_field.as_str(), s.weight), (Some(Format::Conllu), "text", 1.0));
        assert!(toml::from_str::<SourceSpec>("name = \"x\"\nlang = \"id\"\npaths = []\nfromat = \"csv\"").is_err());
    }
}
