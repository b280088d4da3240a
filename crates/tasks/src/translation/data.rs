//! The NusaX-MT corpus as released (`<root>/mt/{train,valid,test}.csv`: an unnamed row-index
//! column, then one column per language, every row the same sentence in all twelve), read and
//! checked; and the translation directions the paper runs over it.
use indolm_torch::error::{Error, Result};
use std::path::{Path, PathBuf};

/// The NusaX languages (the corpus's column names) in the tables' column order, Indonesian (the
/// pivot) last.
pub const LANGUAGES: [&str; 12] = [
    "acehnese",
    "balinese",
    "toba_batak",
    "banjarese",
    "buginese",
    "english",
    "javanese",
    "madurese",
    "minangkabau",
    "ngaju",
    "sundanese",
    "indonesian",
];

/// The pivot language of Tables 4 and 6.
pub const INDONESIAN: &str = "indonesian";

/// The paper's code for a language (`sun` for `sundanese`, as NusaX's tables head their
/// columns); a name it lacks is its own code.
pub fn code(language: &str) -> &str {
    crate::sentiment::baselines::language_code(language)
}

/// The 11 languages other than Indonesian, in the tables' column order.
pub fn non_pivot_languages() -> impl Iterator<Item = &'static str> {
    LANGUAGES.iter().copied().filter(|l| *l != INDONESIAN)
}

/// English, the other pivot of Table 5.
pub const ENGLISH: &str = "english";

/// Table 5's directions on the English side: English into each of the 11 other languages
/// (`into_english` false), or each of them into English.
pub fn english_directions(into_english: bool) -> Vec<Direction> {
    LANGUAGES
        .iter()
        .copied()
        .filter(|l| *l != ENGLISH)
        .map(|x| match into_english {
            true => Direction { source: x, target: ENGLISH },
            false => Direction { source: ENGLISH, target: x },
        })
        .collect()
}

/// One translation direction, by column name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Direction {
    /// The language translated from.
    pub source: &'static str,
    /// The language translated into.
    pub target: &'static str,
}

impl Direction {
    /// The direction a name of [`Direction::name`]'s form (`sun-ind`) names; `None` for an
    /// unknown code or a language into itself.
    pub fn parse(name: &str) -> Option<Direction> {
        let language = |c: &str| LANGUAGES.iter().copied().find(|l| code(l) == c);
        let (source, target) = name.split_once('-')?;
        let (source, target) = (language(source)?, language(target)?);
        (source != target).then_some(Direction { source, target })
    }

    /// `ace-ind`: the paper's codes joined by a hyphen (file names and JSON keys).
    pub fn name(&self) -> String {
        format!("{}-{}", code(self.source), code(self.target))
    }
}

/// The directions of one of the paper's tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
pub enum Table {
    /// Table 4: every other language into Indonesian (x → ind).
    #[value(name = "x-ind")]
    #[serde(rename = "x-ind")]
    IntoIndonesian,
    /// Table 6: Indonesian into every other language (ind → x).
    #[value(name = "ind-x")]
    #[serde(rename = "ind-x")]
    FromIndonesian,
}

impl Table {
    /// The table whose columns are `direction`'s kind (into or from Indonesian), if either.
    pub fn of(direction: &Direction) -> Option<Table> {
        match (direction.source == INDONESIAN, direction.target == INDONESIAN) {
            (false, true) => Some(Table::IntoIndonesian),
            (true, false) => Some(Table::FromIndonesian),
            _ => None,
        }
    }

    /// Both tables, in the paper's order.
    pub const ALL: [Table; 2] = [Table::IntoIndonesian, Table::FromIndonesian];

    /// The table's number in the paper and its heading.
    pub fn title(&self) -> &'static str {
        match self {
            Table::IntoIndonesian => "Table 4 (x → ind)",
            Table::FromIndonesian => "Table 6 (ind → x)",
        }
    }

    /// The table's directions, one per column, in column order.
    pub fn directions(&self) -> Vec<Direction> {
        non_pivot_languages()
            .map(|x| match self {
                Table::IntoIndonesian => Direction { source: x, target: INDONESIAN },
                Table::FromIndonesian => Direction { source: INDONESIAN, target: x },
            })
            .collect()
    }

    /// The column a direction of this table is headed by: the language that is not Indonesian.
    pub fn column(&self, direction: &Direction) -> &'static str {
        match self {
            Table::IntoIndonesian => direction.source,
            Table::FromIndonesian => direction.target,
        }
    }
}

/// One split of the corpus: the languages (column names, in file order) and each row's
/// sentences in that order.
#[derive(Debug, Clone, PartialEq)]
pub struct ParallelSplit {
    /// The file read.
    pub path: PathBuf,
    /// The language columns, in file order (the row-index column left out).
    pub languages: Vec<String>,
    /// One entry per row: its sentence in each of `languages`, as written (cells are not
    /// trimmed: the references are scored as released).
    pub rows: Vec<Vec<String>>,
}

impl ParallelSplit {
    /// Reads `<root>/mt/<split>.csv` (`root` is the NusaX folder of `indolm download nusax`).
    pub fn load(root: &Path, split: &str) -> Result<ParallelSplit> {
        let path = root.join("mt").join(format!("{split}.csv"));
        Self::read(&path)
    }

    /// Reads one corpus file: a header of language names (an unnamed first column, the row
    /// index, is left out), then rows with a non-blank cell in every language.
    pub fn read(path: &Path) -> Result<ParallelSplit> {
        let hint = "the NusaX-MT folder comes from `indolm download nusax` (into corpora/downloads/nusax/mt)";
        let (mut reader, header) = indolm_core::files::open_csv(&csv::ReaderBuilder::new(), path, hint)?;
        let columns: Vec<(usize, String)> =
            header.iter().enumerate().filter(|(_, h)| !h.trim().is_empty()).map(|(i, h)| (i, h.clone())).collect();
        if !columns.iter().any(|(_, h)| h == INDONESIAN) {
            return Err(Error::field(path, INDONESIAN, format!("missing column; the header has {header:?}")));
        }
        let mut rows = Vec::new();
        for (i, record) in reader.records().enumerate() {
            let line = i + 2;
            let record = record.map_err(|e| Error::invalid(path, format!("row {line}: {e}")))?;
            let mut row = Vec::with_capacity(columns.len());
            for (col, name) in &columns {
                let cell = record.get(*col).unwrap_or("");
                if cell.trim().is_empty() {
                    return Err(Error::invalid(path, format!("row {line}: the `{name}` sentence is empty")));
                }
                row.push(cell.to_string());
            }
            rows.push(row);
        }
        if rows.is_empty() {
            return Err(Error::invalid(path, "no rows after the header"));
        }
        Ok(ParallelSplit { path: path.to_path_buf(), languages: columns.into_iter().map(|(_, h)| h).collect(), rows })
    }

    /// Every row's sentence in `language`, or an error naming the columns there are.
    pub fn column(&self, language: &str) -> Result<Vec<&str>> {
        let i = self.languages.iter().position(|l| l == language).ok_or_else(|| {
            Error::field(&self.path, language, format!("missing column; the file has {:?}", self.languages))
        })?;
        Ok(self.rows.iter().map(|r| r[i].as_str()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_reads_its_columns_and_refuses_empty_cells_and_unknown_languages() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("train.csv");
        std::fs::write(&path, ",indonesian,sundanese\n0,\"Saya, makan.\",Abdi tuang.\n1,Dia pergi,Anjeunna angkat\n")
            .unwrap();
        let split = ParallelSplit::read(&path).unwrap();
        assert_eq!(split.languages, ["indonesian", "sundanese"]);
        assert_eq!(split.column("indonesian").unwrap(), ["Saya, makan.", "Dia pergi"]);
        let err = split.column("javanese").unwrap_err().to_string();
        assert!(err.contains("javanese") && err.contains("sundanese"), "{err}");

        std::fs::write(&path, ",indonesian,sundanese\n0,Saya makan, \n").unwrap();
        let err = ParallelSplit::read(&path).unwrap_err().to_string();
        assert!(err.contains("row 2") && err.contains("`sundanese` sentence is empty"), "{err}");
        std::fs::write(&path, ",sundanese\n0,Abdi\n").unwrap();
        assert!(ParallelSplit::read(&path).unwrap_err().to_string().contains("indonesian"));
        let err = ParallelSplit::load(dir.path(), "test").unwrap_err().to_string();
        assert!(err.contains("indolm download nusax"), "{err}");
    }

    #[test]
    fn the_tables_run_eleven_directions_through_indonesian() {
        let into = Table::IntoIndonesian.directions();
        assert_eq!(into.len(), 11);
        assert_eq!(into[0].name(), "ace-ind");
        assert_eq!(Table::FromIndonesian.directions()[10].name(), "ind-sun");
        assert_eq!((code("toba_batak"), code("indonesian"), code("klingon")), ("bbc", "ind", "klingon"));
    }
}
