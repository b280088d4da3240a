//! The inputs of IndoBias-QA: a folder of four CSV files (docs/bias-qa.md, "the layout indolm
//! reads"). `demographies.csv` names each demography and the indices whose stereotype pairs apply
//! to it; `groups.csv` the demographic groups of each; `stereotypes.csv` the stereotype pairs of
//! the three indices (SPI, O*NET, WGI: the paper's Tables 8-10), each with its positive and
//! negative label in Indonesian and English; `templates.csv` the prompt template of each of the
//! seven tasks (Table 1) in each language, with the placeholders `{group}`, `{positive}` and
//! `{negative}`. Everything is checked as it is read, and every error names the file, the line,
//! the column and what was expected.
use indolm_torch::error::{Error, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The groups file: `demography,group`.
pub(crate) const GROUPS_FILE: &str = "groups.csv";
/// The demographies file: `demography,indices`.
pub(crate) const DEMOGRAPHIES_FILE: &str = "demographies.csv";
/// The stereotype pairs file: `index,category,stereotype,positive,negative,positive_en,negative_en`.
pub(crate) const STEREOTYPES_FILE: &str = "stereotypes.csv";
/// The templates file: `task,language,template`.
pub(crate) const TEMPLATES_FILE: &str = "templates.csv";

/// The tasks, 1 to 7 (the paper's Table 1), by name.
pub(crate) const TASK_NAMES: [&str; 7] = [
    "Simple Forced Choice",
    "Incentivized Choice",
    "Table Entry",
    "Code Variable Assignment",
    "Incentivized Dataset Entry",
    "Story Writing",
    "Code Function",
];

/// The task whose answers are code to run (the paper executes it).
pub(crate) const CODE_TASK: u8 = 7;

/// The index a stereotype pair comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Index {
    /// The Social Progress Index (Table 10).
    Spi,
    /// O*NET's work styles and abilities (Table 9).
    Onet,
    /// The Worldwide Governance Indicators (Table 8).
    Wgi,
}

impl Index {
    /// The name the files and reports use: `SPI`, `O*NET`, `WGI`.
    pub fn name(self) -> &'static str {
        match self {
            Index::Spi => "SPI",
            Index::Onet => "O*NET",
            Index::Wgi => "WGI",
        }
    }

    /// The index named `text` (case-insensitive; `ONET` for `O*NET` too).
    pub(crate) fn parse(text: &str) -> Option<Index> {
        match text.trim().to_ascii_uppercase().as_str() {
            "SPI" => Some(Index::Spi),
            "O*NET" | "ONET" => Some(Index::Onet),
            "WGI" => Some(Index::Wgi),
            _ => None,
        }
    }
}

/// The language of the prompts: the paper's experiments use the Indonesian templates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Language {
    /// Indonesian: the `id` templates and the `positive`/`negative` labels.
    Id,
    /// English: the `en` templates and the `positive_en`/`negative_en` labels.
    En,
}

impl Language {
    /// `id` or `en`.
    pub(crate) fn code(self) -> &'static str {
        match self {
            Language::Id => "id",
            Language::En => "en",
        }
    }

    /// The language named `text` (case-insensitive).
    fn parse(text: &str) -> Option<Language> {
        match text.trim().to_ascii_lowercase().as_str() {
            "id" => Some(Language::Id),
            "en" => Some(Language::En),
            _ => None,
        }
    }
}

/// A demography and the indices that apply to it.
#[derive(Debug, Clone, PartialEq)]
pub struct Demography {
    /// Its name (`Ethnicity`, `Political Party`, ...).
    pub name: String,
    /// The indices whose stereotype pairs its groups are asked about, in the file's order.
    pub indices: Vec<Index>,
    /// Its line in demographies.csv.
    pub line: u64,
}

/// A demographic group.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// Its demography.
    pub demography: String,
    /// Its name, as prompts write it.
    pub name: String,
    /// Its line in groups.csv.
    pub line: u64,
}

/// A stereotype pair: a positive and a negative label of one trait.
#[derive(Debug, Clone, PartialEq)]
pub struct StereotypePair {
    /// The index it comes from.
    pub index: Index,
    /// The index's category (`Basic Human Needs`, `Control of Corruption`, ...).
    pub category: String,
    /// The stereotype (`Nutrition`, `Work Ethic`, ...).
    pub stereotype: String,
    /// The positive label in Indonesian.
    pub positive: String,
    /// The negative label in Indonesian.
    pub negative: String,
    /// The positive label in English.
    pub positive_en: String,
    /// The negative label in English.
    pub negative_en: String,
    /// Its line in stereotypes.csv.
    pub line: u64,
}

impl StereotypePair {
    /// The positive and the negative label in `language`.
    pub(crate) fn labels(&self, language: Language) -> (&str, &str) {
        match language {
            Language::Id => (&self.positive, &self.negative),
            Language::En => (&self.positive_en, &self.negative_en),
        }
    }
}

/// A piece of a template: text, or a placeholder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// Text as it is (`{{` and `}}` already made single braces).
    Text(String),
    /// `{group}`: the group's name.
    Group,
    /// `{positive}`: the positive label.
    Positive,
    /// `{negative}`: the negative label.
    Negative,
}

/// A task's prompt template in one language.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    /// The task, 1 to 7.
    pub task: u8,
    /// Its language.
    pub language: Language,
    /// The template as written.
    pub text: String,
    /// The template read into text and placeholders.
    pub parts: Vec<Part>,
    /// Its line in templates.csv.
    pub line: u64,
}

impl Template {
    /// The prompt for `group` with the labels `positive` and `negative`.
    pub(crate) fn fill(&self, group: &str, positive: &str, negative: &str) -> String {
        self.parts
            .iter()
            .map(|part| match part {
                Part::Text(text) => text.as_str(),
                Part::Group => group,
                Part::Positive => positive,
                Part::Negative => negative,
            })
            .collect()
    }
}

/// The four files of an IndoBias-QA folder, read and checked.
#[derive(Debug, Clone)]
pub struct QaData {
    /// The folder.
    pub dir: PathBuf,
    /// demographies.csv, in its order.
    pub demographies: Vec<Demography>,
    /// groups.csv, in its order.
    pub groups: Vec<Group>,
    /// stereotypes.csv, in its order.
    pub stereotypes: Vec<StereotypePair>,
    /// templates.csv, in its order.
    pub templates: Vec<Template>,
}

/// One row of a CSV file: its line and the fields of the asked columns, trimmed.
struct Row {
    line: u64,
    fields: Vec<String>,
}

/// An error about `column` of the row on `line` of `path`.
fn at(path: &Path, line: u64, column: &str, message: impl std::fmt::Display) -> Error {
    Error::invalid(path, format!("line {line}, column `{column}`: {message}"))
}

/// The rows of `dir/name` with the fields of `columns` (found by name in the header, any order;
/// other columns are ignored). A missing file, a missing or repeated column, a malformed row and a
/// file without rows are errors naming the file and the line.
fn read_rows(dir: &Path, name: &str, columns: &[&str]) -> Result<(PathBuf, Vec<Row>)> {
    let path = dir.join(name);
    let text = indolm_core::files::read_to_string(&path).map_err(|e| match e {
        Error::MissingFile { path, .. } => Error::MissingFile {
            path,
            hint: "an IndoBias-QA folder holds demographies.csv, groups.csv, stereotypes.csv and templates.csv \
                   (docs/bias-qa.md)"
                .into(),
        },
        other => other,
    })?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let mut reader = csv::ReaderBuilder::new().from_reader(text.as_bytes());
    let csv_error = |e: csv::Error| match e.position() {
        Some(p) => Error::invalid(&path, format!("line {}: not CSV as expected: {e}", p.line())),
        None => Error::invalid(&path, format!("not CSV as expected: {e}")),
    };
    let header: Vec<String> = reader.headers().map_err(csv_error)?.iter().map(|h| h.trim().to_lowercase()).collect();
    let mut positions = Vec::with_capacity(columns.len());
    for &column in columns {
        let found: Vec<usize> = header.iter().enumerate().filter(|(_, h)| *h == column).map(|(i, _)| i).collect();
        match found[..] {
            [i] => positions.push(i),
            [] => {
                return Err(Error::invalid(
                    &path,
                    format!(
                        "line 1: no column `{column}` in the header {header:?}; expected the columns {}",
                        columns.join(", ")
                    ),
                ))
            }
            _ => return Err(Error::invalid(&path, format!("line 1: the column `{column}` appears twice"))),
        }
    }
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = record.map_err(csv_error)?;
        let line = record.position().map_or(0, |p| p.line());
        if record.iter().all(|field| field.trim().is_empty()) {
            continue;
        }
        let fields = positions.iter().map(|&i| record.get(i).unwrap_or("").trim().to_string()).collect();
        rows.push(Row { line, fields });
    }
    if rows.is_empty() {
        return Err(Error::invalid(
            &path,
            format!("no rows after the header: expected one row a line with {}", columns.join(", ")),
        ));
    }
    Ok((path, rows))
}

/// Checks a name that prompt ids carry (a demography, a group, a stereotype): not empty, one line,
/// no `|` (the ids' separator).
fn check_name(path: &Path, line: u64, column: &str, value: &str) -> Result<()> {
    if value.is_empty() {
        return Err(at(path, line, column, "is empty: expected a name"));
    }
    if value.contains('|') || value.chars().any(char::is_control) {
        return Err(at(
            path,
            line,
            column,
            format!(
                "{} holds `|` or a control character, which prompt ids cannot carry",
                indolm_core::files::quoted(value)
            ),
        ));
    }
    Ok(())
}

/// Checks a pair of labels of one language: neither empty, each with a letter or digit, and not the
/// same once case and spacing are set aside (the parser could not tell them apart).
fn check_labels(path: &Path, line: u64, columns: [&str; 2], positive: &str, negative: &str) -> Result<()> {
    for (column, label) in columns.iter().zip([positive, negative]) {
        if label.is_empty() {
            return Err(at(path, line, column, "is empty: expected a label"));
        }
        if !label.chars().any(char::is_alphanumeric) {
            return Err(at(
                path,
                line,
                column,
                format!("{} has no letter or digit: no answer could mention it", indolm_core::files::quoted(label)),
            ));
        }
    }
    if super::parse::normalize(positive) == super::parse::normalize(negative) {
        return Err(at(
            path,
            line,
            columns[1],
            format!(
                "{} is equal to its opposite {} (case and spacing aside): the two labels of a pair must differ",
                indolm_core::files::quoted(negative),
                indolm_core::files::quoted(positive)
            ),
        ));
    }
    Ok(())
}

/// A template read into its parts: `{group}`, `{positive}` and `{negative}` are placeholders,
/// `{{` and `}}` literal braces, and any other brace is text; an unknown `{name}` is an error, and
/// so is a template without one of the three placeholders.
pub(crate) fn parse_template(text: &str) -> std::result::Result<Vec<Part>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut parts = Vec::new();
    let mut literal = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if (c == '{' && next == Some('{')) || (c == '}' && next == Some('}')) {
            literal.push(c);
            i += 2;
            continue;
        }
        if c == '{' && next.is_some_and(|n| n.is_ascii_alphabetic() || n == '_') {
            let mut j = i + 1;
            while j < chars.len() && (chars[j].is_ascii_alphanumeric() || chars[j] == '_') {
                j += 1;
            }
            if chars.get(j) == Some(&'}') {
                let name: String = chars[i + 1..j].iter().collect();
                let part = match name.as_str() {
                    "group" => Part::Group,
                    "positive" => Part::Positive,
                    "negative" => Part::Negative,
                    _ => {
                        return Err(format!(
                            "unknown placeholder {{{name}}}: expected {{group}}, {{positive}} or {{negative}} \
                             (write {{{{ and }}}} for a literal brace)"
                        ))
                    }
                };
                if !literal.is_empty() {
                    parts.push(Part::Text(std::mem::take(&mut literal)));
                }
                parts.push(part);
                i = j + 1;
                continue;
            }
        }
        literal.push(c);
        i += 1;
    }
    if !literal.is_empty() {
        parts.push(Part::Text(literal));
    }
    for (part, name) in [(Part::Group, "group"), (Part::Positive, "positive"), (Part::Negative, "negative")] {
        if !parts.contains(&part) {
            return Err(format!(
                "has no {{{name}}} placeholder: every template names the group and offers both labels"
            ));
        }
    }
    Ok(parts)
}

impl QaData {
    /// Reads and checks the four files of `dir`.
    pub fn load(dir: &Path) -> Result<QaData> {
        let demographies = read_demographies(dir)?;
        let groups = read_groups(dir, &demographies)?;
        let stereotypes = read_stereotypes(dir)?;
        let templates = read_templates(dir)?;
        let data = QaData { dir: dir.to_path_buf(), demographies, groups, stereotypes, templates };
        data.check_coverage()?;
        Ok(data)
    }

    /// Every demography has a group, and every index it names has a stereotype pair.
    fn check_coverage(&self) -> Result<()> {
        let path = self.dir.join(DEMOGRAPHIES_FILE);
        for d in &self.demographies {
            if !self.groups.iter().any(|g| g.demography == d.name) {
                return Err(at(
                    &path,
                    d.line,
                    "demography",
                    format!("`{}` has no group in {GROUPS_FILE}: expected at least one row `{},GROUP`", d.name, d.name),
                ));
            }
            for index in &d.indices {
                if !self.stereotypes.iter().any(|s| s.index == *index) {
                    return Err(at(
                        &path,
                        d.line,
                        "indices",
                        format!("`{}` names {}, which no row of {STEREOTYPES_FILE} has", d.name, index.name()),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The groups of demography `name`, in the file's order.
    pub(crate) fn groups_of<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Group> + 'a {
        self.groups.iter().filter(move |g| g.demography == name)
    }

    /// The stereotype pairs of `index`, in the file's order.
    pub(crate) fn pairs_of(&self, index: Index) -> impl Iterator<Item = &StereotypePair> + '_ {
        self.stereotypes.iter().filter(move |s| s.index == index)
    }
}

/// demographies.csv: each demography once, with one or more known indices.
fn read_demographies(dir: &Path) -> Result<Vec<Demography>> {
    let (path, rows) = read_rows(dir, DEMOGRAPHIES_FILE, &["demography", "indices"])?;
    let mut seen: HashMap<String, u64> = HashMap::new();
    let mut out = Vec::new();
    for Row { line, fields } in rows {
        let (name, indices) = (&fields[0], &fields[1]);
        check_name(&path, line, "demography", name)?;
        if let Some(first) = seen.insert(name.clone(), line) {
            return Err(at(
                &path,
                line,
                "demography",
                format!("duplicate demography `{name}` (first on line {first})"),
            ));
        }
        if indices.is_empty() {
            return Err(at(
                &path,
                line,
                "indices",
                format!("`{name}` has no index: expected one or more of SPI, O*NET and WGI, separated by `;`"),
            ));
        }
        let mut parsed = Vec::new();
        for piece in indices.split(';').map(str::trim) {
            let index = Index::parse(piece).ok_or_else(|| {
                at(
                    &path,
                    line,
                    "indices",
                    format!(
                        "unknown index {}: expected SPI, O*NET or WGI, separated by `;`",
                        indolm_core::files::quoted(piece)
                    ),
                )
            })?;
            if parsed.contains(&index) {
                return Err(at(&path, line, "indices", format!("{} is named twice", index.name())));
            }
            parsed.push(index);
        }
        out.push(Demography { name: name.clone(), indices: parsed, line });
    }
    Ok(out)
}

/// groups.csv: each group of a known demography, once.
fn read_groups(dir: &Path, demographies: &[Demography]) -> Result<Vec<Group>> {
    let (path, rows) = read_rows(dir, GROUPS_FILE, &["demography", "group"])?;
    let mut seen: HashMap<(String, String), u64> = HashMap::new();
    let mut out = Vec::new();
    for Row { line, fields } in rows {
        let (demography, name) = (&fields[0], &fields[1]);
        check_name(&path, line, "demography", demography)?;
        check_name(&path, line, "group", name)?;
        if !demographies.iter().any(|d| d.name == *demography) {
            let known: Vec<&str> = demographies.iter().map(|d| d.name.as_str()).collect();
            return Err(at(
                &path,
                line,
                "demography",
                format!("`{demography}` is not in {DEMOGRAPHIES_FILE}; expected one of {known:?}"),
            ));
        }
        if let Some(first) = seen.insert((demography.clone(), name.clone()), line) {
            return Err(at(
                &path,
                line,
                "group",
                format!("duplicate group `{name}` of `{demography}` (first on line {first})"),
            ));
        }
        out.push(Group { demography: demography.clone(), name: name.clone(), line });
    }
    Ok(out)
}

/// stereotypes.csv: each stereotype of an index once, its labels present and different.
fn read_stereotypes(dir: &Path) -> Result<Vec<StereotypePair>> {
    let columns = ["index", "category", "stereotype", "positive", "negative", "positive_en", "negative_en"];
    let (path, rows) = read_rows(dir, STEREOTYPES_FILE, &columns)?;
    let mut seen: HashMap<(Index, String), u64> = HashMap::new();
    let mut out = Vec::new();
    for Row { line, fields } in rows {
        let index = Index::parse(&fields[0]).ok_or_else(|| {
            let found = indolm_core::files::quoted(&fields[0]);
            at(&path, line, "index", format!("unknown index {found}: expected SPI, O*NET or WGI"))
        })?;
        if fields[1].is_empty() {
            return Err(at(&path, line, "category", "is empty: expected the index's category"));
        }
        check_name(&path, line, "stereotype", &fields[2])?;
        check_labels(&path, line, ["positive", "negative"], &fields[3], &fields[4])?;
        check_labels(&path, line, ["positive_en", "negative_en"], &fields[5], &fields[6])?;
        if let Some(first) = seen.insert((index, fields[2].clone()), line) {
            return Err(at(
                &path,
                line,
                "stereotype",
                format!("duplicate stereotype `{}` of {} (first on line {first})", fields[2], index.name()),
            ));
        }
        let mut fields = fields.into_iter();
        let mut next = || fields.next().unwrap_or_default();
        let _index = next();
        out.push(StereotypePair {
            index,
            category: next(),
            stereotype: next(),
            positive: next(),
            negative: next(),
            positive_en: next(),
            negative_en: next(),
            line,
        });
    }
    Ok(out)
}

/// templates.csv: one template a task (1 to 7) and language (`id` or `en`), each with its three
/// placeholders and no other.
fn read_templates(dir: &Path) -> Result<Vec<Template>> {
    let (path, rows) = read_rows(dir, TEMPLATES_FILE, &["task", "language", "template"])?;
    let mut seen: HashMap<(u8, Language), u64> = HashMap::new();
    let mut out = Vec::new();
    for Row { line, fields } in rows {
        let task = match fields[0].parse::<u64>() {
            Ok(n) if (1..=7).contains(&n) => n as u8,
            Ok(n) => {
                return Err(at(&path, line, "task", format!("task {n} is outside 1..7 (the paper's seven tasks)")))
            }
            Err(_) => {
                return Err(at(
                    &path,
                    line,
                    "task",
                    format!("{} is not a task number: expected 1 to 7", indolm_core::files::quoted(&fields[0])),
                ))
            }
        };
        let language = Language::parse(&fields[1]).ok_or_else(|| {
            let found = indolm_core::files::quoted(&fields[1]);
            at(&path, line, "language", format!("unknown language {found}: expected id or en"))
        })?;
        if fields[2].is_empty() {
            return Err(at(&path, line, "template", "is empty: expected the task's prompt template"));
        }
        let parts = parse_template(&fields[2]).map_err(|message| at(&path, line, "template", message))?;
        if let Some(first) = seen.insert((task, language), line) {
            return Err(at(
                &path,
                line,
                "task",
                format!(
                    "duplicate template: task {task} in `{}` already has one on line {first} (one a task and language)",
                    language.code()
                ),
            ));
        }
        out.push(Template { task, language, text: fields[2].clone(), parts, line });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_read_placeholders_and_literal_braces() {
        let text = r#"Pilih "{positive}" atau "{negative}" untuk {{"kelompok": "{group}"}}."#;
        let parts = parse_template(text).unwrap();
        let template = Template { task: 7, language: Language::Id, text: String::new(), parts, line: 2 };
        let filled = r#"Pilih "sehat" atau "tidak sehat" untuk {"kelompok": "Kota Alfa"}."#;
        assert_eq!(template.fill("Kota Alfa", "sehat", "tidak sehat"), filled);
        // Braces that are not a placeholder are text; `{{group}}` is the text `{group}`.
        let parts = parse_template("{group} {positive} {negative} {0} { group } {{group}} {\"a\": 1}").unwrap();
        let template = Template { task: 1, language: Language::Id, text: String::new(), parts, line: 2 };
        assert_eq!(template.fill("G", "P", "N"), "G P N {0} { group } {group} {\"a\": 1}");
        let err = parse_template("{group} {positive} {negative} {kelompok}").unwrap_err();
        assert!(err.starts_with("unknown placeholder {kelompok}"), "{err}");
        let err = parse_template("{group} {positive}").unwrap_err();
        assert!(err.contains("no {negative} placeholder"), "{err}");
    }

    #[test]
    fn indices_and_languages_are_read_by_name() {
        assert_eq!(Index::parse(" o*net "), Some(Index::Onet));
        assert_eq!(Index::parse("ONET"), Some(Index::Onet));
        assert_eq!(Index::parse("wgi"), Some(Index::Wgi));
        assert_eq!(Index::parse("SPI2"), None);
        assert_eq!(Language::parse("ID"), Some(Language::Id));
        assert_eq!(Language::parse("jv"), None);
    }
}
