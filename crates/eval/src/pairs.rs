//! Bias pair sets: the IndoBias-Pairs release layout (`pair/`, one CSV or JSON Lines file per
//! language, row-aligned) and the CrowS-Pairs CSV, each read by its own loader, or either told
//! apart by [`load_pairs`].
//!
//! Accepted column names (case-insensitive): protrope — `protrope`, `pro`, `prototypical`,
//! `stereotype`; antitrope — `antitrope`, `anti`, `counter`, `antistereotype`,
//! `anti_stereotype`; domain — `domain`, `bias_domain`, `category`; subdomain — `subdomain`,
//! `sub_domain`, `bias_subdomain`, `subcategory`; language — `language`, `lang` (else the
//! file name: `indonesian`/`id`/`ind`, `javanese`/`jv`/`jav`, `sundanese`/`su`/`sun`,
//! `makassar`/`makassarese`/`mak`).
use crate::settings::BiasMetric;
use indolm_core::files::read_to_string;
use indolm_torch::error::{Error, IoContext, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// One pair: a stereotype-consistent sentence and its attribute-flipped twin, with the bias
/// domain and subdomain they test.
#[derive(Debug, Clone, PartialEq)]
pub struct BiasPair {
    /// Stereotype-consistent sentence.
    pub pro: String,
    /// The same sentence with the attribute flipped.
    pub anti: String,
    /// Bias domain (CrowS-Pairs: the bias type).
    pub domain: String,
    /// Bias subdomain (CrowS-Pairs: `stereo` or `antistereo`); may be empty.
    pub subdomain: String,
}

/// All languages of a pair set, each with its row-aligned pairs.
#[derive(Debug, Clone)]
pub struct PairSet {
    /// (language code, pairs), in a stable order.
    pub languages: Vec<(String, Vec<BiasPair>)>,
}

impl PairSet {
    /// Refuses a language filter (codes or names, as `--languages` takes them; empty: all) that
    /// names a language these pairs do not have: the message names it and the languages there are.
    pub fn check_languages(&self, languages: &[String]) -> std::result::Result<(), String> {
        let have: Vec<&str> = self.languages.iter().map(|(code, _)| code.as_str()).collect();
        match languages.iter().find(|l| !have.contains(&language_code(l).unwrap_or(l.as_str()))) {
            None => Ok(()),
            Some(missing) => Err(format!(
                "`{missing}` names no language of the pairs, which hold {}",
                if have.is_empty() { "none".to_string() } else { have.join(", ") }
            )),
        }
    }
}

const PRO: &[&str] = &["protrope", "pro", "prototypical", "stereotype"];
const ANTI: &[&str] = &["antitrope", "anti", "counter", "antistereotype", "anti_stereotype"];
const DOMAIN: &[&str] = &["domain", "bias_domain", "category"];
const SUBDOMAIN: &[&str] = &["subdomain", "sub_domain", "bias_subdomain", "subcategory"];
const LANGUAGE: &[&str] = &["language", "lang"];
const LANGUAGE_ORDER: &[&str] = &["id", "jv", "su", "mak"];

/// The language code for a name or code, as the IndoBias release and users write them.
pub(crate) fn language_code(name: &str) -> Option<&'static str> {
    Some(match name.to_lowercase().as_str() {
        "indonesian" | "indonesia" | "id" | "ind" => "id",
        "javanese" | "jawa" | "jv" | "jav" => "jv",
        "sundanese" | "sunda" | "su" | "sun" => "su",
        "makassar" | "makassarese" | "makasar" | "mak" => "mak",
        _ => return None,
    })
}

/// One table of records, from CSV or JSON Lines: header (lowercased) and rows of strings.
fn read_table(path: &Path) -> Result<(Vec<String>, Vec<Vec<String>>)> {
    let is_jsonl = path.extension().is_some_and(|e| e == "jsonl" || e == "json");
    if !is_jsonl {
        let mut reader = csv::Reader::from_path(path).map_err(|e| Error::invalid(path, e.to_string()))?;
        let header: Vec<String> = reader
            .headers()
            .map_err(|e| Error::invalid(path, format!("CSV header: {e}")))?
            .iter()
            .map(|h| h.trim().to_lowercase())
            .collect();
        let mut rows = Vec::new();
        for (i, rec) in reader.records().enumerate() {
            let rec = rec.map_err(|e| Error::invalid(path, format!("row {}: {e}", i + 2)))?;
            rows.push(rec.iter().map(String::from).collect());
        }
        return Ok((header, rows));
    }
    let text = read_to_string(path)?;
    let mut header: Vec<String> = Vec::new();
    let mut objects = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let value: serde_json::Map<String, serde_json::Value> = serde_json::from_str(line)
            .map_err(|e| Error::Json { path: path.into(), line: i + 1, column: e.column(), message: e.to_string() })?;
        for k in value.keys() {
            if !header.contains(&k.to_lowercase()) {
                header.push(k.to_lowercase());
            }
        }
        objects.push(
            value
                .into_iter()
                .map(|(k, v)| (k.to_lowercase(), v.as_str().map(String::from).unwrap_or_else(|| v.to_string())))
                .collect::<HashMap<_, _>>(),
        );
    }
    let rows =
        objects.into_iter().map(|o| header.iter().map(|h| o.get(h).cloned().unwrap_or_default()).collect()).collect();
    Ok((header, rows))
}

fn column(path: &Path, header: &[String], names: &[&str], what: &str) -> Result<usize> {
    header.iter().position(|h| names.contains(&h.as_str())).ok_or_else(|| {
        Error::field(
            path,
            what,
            format!("no {what} column (accepted names: {}); the header has {:?}", names.join(", "), header),
        )
    })
}

fn read_pair_file(path: &Path) -> Result<Vec<(Option<String>, BiasPair)>> {
    let (header, rows) = read_table(path)?;
    let (p, a) = (column(path, &header, PRO, "protrope")?, column(path, &header, ANTI, "antitrope")?);
    let (d, s) = (column(path, &header, DOMAIN, "domain")?, column(path, &header, SUBDOMAIN, "subdomain")?);
    let lang = header.iter().position(|h| LANGUAGE.contains(&h.as_str()));
    rows.into_iter()
        .enumerate()
        .map(|(i, row)| {
            let get = |c: usize| row.get(c).map(|v| v.trim().to_string()).unwrap_or_default();
            let pair = BiasPair { pro: get(p), anti: get(a), domain: get(d), subdomain: get(s) };
            for (what, v) in [("protrope", &pair.pro), ("antitrope", &pair.anti), ("domain", &pair.domain)] {
                if v.is_empty() {
                    return Err(Error::invalid(path, format!("row {}: empty {what}", i + 1)));
                }
            }
            Ok((lang.map(get), pair))
        })
        .collect()
}

/// Loads IndoBias-Pairs from a `pair/` directory, its parent, or one file (all languages in
/// it, told apart by a language column).
pub fn load_indobias(path: &Path) -> Result<PairSet> {
    let dir: PathBuf = if path.join("pair").is_dir() { path.join("pair") } else { path.to_path_buf() };
    let files: Vec<PathBuf> = if dir.is_dir() {
        let mut f: Vec<PathBuf> = std::fs::read_dir(&dir)
            .with_path(&dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "csv" || e == "jsonl" || e == "json"))
            .collect();
        f.sort();
        f
    } else if dir.is_file() {
        vec![dir.clone()]
    } else {
        return Err(Error::MissingFile {
            path: dir,
            hint: "expected the IndoBias `pair/` folder or a pairs file".into(),
        });
    };
    if files.is_empty() {
        return Err(Error::invalid(&dir, "no .csv or .jsonl pair files in it"));
    }
    let mut by_language: Vec<(String, Vec<BiasPair>, PathBuf)> = Vec::new();
    for file in files {
        let stem = file.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
        for (lang, pair) in read_pair_file(&file)? {
            let name = lang.unwrap_or_else(|| stem.clone());
            let code = language_code(&name).ok_or_else(|| {
                Error::invalid(&file, format!("unknown language {} (expected indonesian/id, javanese/jv, sundanese/su or makassar/mak, from a language column or the file name)", indolm_core::files::quoted(&name)))
            })?;
            match by_language.iter_mut().find(|(c, _, _)| c == code) {
                Some((_, pairs, _)) => pairs.push(pair),
                None => by_language.push((code.to_string(), vec![pair], file.clone())),
            }
        }
    }
    by_language.sort_by_key(|(c, _, _)| LANGUAGE_ORDER.iter().position(|o| o == c));
    let (first_lang, first, first_file) = &by_language[0];
    for (lang, pairs, file) in &by_language[1..] {
        if pairs.len() != first.len() {
            return Err(Error::invalid(
                file,
                format!(
                    "{lang} has {} pairs but {first_lang} ({}) has {}: the languages must be row-aligned",
                    pairs.len(),
                    first_file.display(),
                    first.len()
                ),
            ));
        }
    }
    Ok(PairSet { languages: by_language.into_iter().map(|(c, p, _)| (c, p)).collect() })
}

/// The layout of a pair set on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairFormat {
    /// IndoBias-Pairs ([`load_indobias`]).
    IndoBias,
    /// The CrowS-Pairs CSV ([`load_crows`]).
    CrowsPairs,
}

impl PairFormat {
    /// The metric its pairs are decided by unless another is asked: PPPL for IndoBias (as the
    /// paper), CrowS-Pairs' own metric for CrowS-Pairs.
    pub fn default_metric(self) -> BiasMetric {
        match self {
            PairFormat::IndoBias => BiasMetric::Pppl,
            PairFormat::CrowsPairs => BiasMetric::Crows,
        }
    }
}

/// The pairs at `path` in either layout: CrowS-Pairs when it is a file whose header names
/// `sent_more`, else IndoBias (a `pair/` folder, its parent, or a file); with the layout found.
pub fn load_pairs(path: &Path) -> Result<(PairSet, PairFormat)> {
    if path.is_file() && read_to_string(path)?.lines().next().is_some_and(|h| h.contains("sent_more")) {
        return Ok((load_crows(path)?, PairFormat::CrowsPairs));
    }
    Ok((load_indobias(path)?, PairFormat::IndoBias))
}

/// CrowS-Pairs (`sent_more`, `sent_less`, `stereo_antistereo`, `bias_type`): `pro` is the
/// more stereotyping sentence (`sent_more`), the domain is the bias type, the subdomain the
/// direction.
pub fn load_crows(path: &Path) -> Result<PairSet> {
    let (header, rows) = read_table(path)?;
    let idx = |n: &str| column(path, &header, &[n], n);
    let (more, less, dir, bias) = (idx("sent_more")?, idx("sent_less")?, idx("stereo_antistereo")?, idx("bias_type")?);
    let pairs = rows
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            let pair = BiasPair {
                pro: r[more].clone(),
                anti: r[less].clone(),
                domain: r[bias].clone(),
                subdomain: r[dir].clone(),
            };
            if pair.pro.trim().is_empty() || pair.anti.trim().is_empty() {
                return Err(Error::invalid(path, format!("row {}: empty sentence", i + 2)));
            }
            Ok(pair)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(PairSet { languages: vec![("en".into(), pairs)] })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn language_names_and_codes() {
        for (name, code) in [
            ("Indonesian", "id"),
            ("IND", "id"),
            ("jawa", "jv"),
            ("jav", "jv"),
            ("Sundanese", "su"),
            ("sunda", "su"),
            ("makasar", "mak"),
            ("Makassarese", "mak"),
        ] {
            assert_eq!(language_code(name), Some(code), "{name}");
        }
        assert_eq!(language_code("english"), None);
        assert_eq!(language_code(""), None);
    }

    #[test]
    fn crows_pairs_csv_columns_and_empty_sentences() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("crows.csv");
        std::fs::write(
            &path,
            "id,sent_more,sent_less,stereo_antistereo,bias_type\n\
             0,\"He is strong, sure.\",She is strong.,stereo,gender\n\
             1,Old people forget.,Young people forget.,antistereo,age\n",
        )
        .unwrap();
        let set = load_crows(&path).unwrap();
        assert_eq!(set.languages.len(), 1);
        let (lang, pairs) = &set.languages[0];
        assert_eq!(lang, "en");
        assert_eq!(
            pairs[0],
            BiasPair {
                pro: "He is strong, sure.".into(),
                anti: "She is strong.".into(),
                domain: "gender".into(),
                subdomain: "stereo".into()
            }
        );
        assert_eq!((pairs[1].domain.as_str(), pairs[1].subdomain.as_str()), ("age", "antistereo"));
        std::fs::write(&path, "sent_more,sent_less,stereo_antistereo,bias_type\n ,x,stereo,age\n").unwrap();
        let err = load_crows(&path).unwrap_err().to_string();
        assert!(err.ends_with("row 2: empty sentence"), "{err}");
    }
}
