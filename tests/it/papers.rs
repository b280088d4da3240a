//! The guide's page on reproducing the papers (docs/papers.md) checked against the paper recipes,
//! so that its deviations tables stay true. A table follows one `<!-- deviations: PATH -->` line
//! for each recipe it describes (PATH from the repository root) and has the columns
//! `| setting | paper | indolm | why they differ |`. For every recipe so named:
//!
//! - it passes `indolm recipe check`, run in a folder of stand-ins for its downloads;
//! - each row whose `setting` is a recipe key in backticks (`optimizer.eps`; a source's key as
//!   `data.sources[NAME].weight`) names a key the recipe file sets, and its `indolm` cell is that
//!   key's value as one TOML literal in backticks (compared as TOML values, `64` and `64.0` alike);
//! - each row whose paper value differs from its indolm value gives a reason (a `why` that is not
//!   empty or `—`). A cell's value is the cell without a trailing parenthesis (the section, a
//!   note), compared as TOML when both are one literal in backticks, else as words; a paper value
//!   of `not stated` always differs;
//! - every key the recipe file sets is listed in one of its tables, but those that name the run or
//!   a file rather than a setting ([`NOT_SETTINGS`]), so that no setting escapes the comparison.
//!
//! And every paper recipe shipped (`recipes/indobias/*.toml`, `recipes/finetune/*.toml` but the
//! `-tiny` ones) has a table. As in `docs.rs`, the checkers are plain functions over text, also
//! run on planted defects.
use crate::common::{root, scratch, test_data};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The page, from the repository root.
const PAGE: &str = "docs/papers.md";

/// The start of the line before a table that names a recipe the table describes.
const MARKER: &str = "<!-- deviations:";

/// A deviations table's columns.
const HEADER: [&str; 4] = ["setting", "paper", "indolm", "why they differ"];

/// Recipe keys, by their last part, that name the run or a file rather than a setting to compare
/// with a paper, and need no row: the run's kind, name, task (the table's heading names the
/// system), output folder and starting model; the paths of data, tokenizer, pairs and
/// TensorBoard, and the prepared corpus's folder; a source's language tag and format (its name
/// and paths say which corpus it is); the GPU's peak TFLOP/s.
const NOT_SETTINGS: [&str; 15] = [
    "kind",
    "name",
    "task",
    "output_dir",
    "init",
    "path",
    "paths",
    "root",
    "pairs",
    "corpus",
    "corpora_dir",
    "tensorboard",
    "lang",
    "format",
    "peak_tflops",
];

/// One row of a deviations table, its cells as written.
#[derive(Debug)]
struct Row {
    /// Its line in the page.
    line: usize,
    setting: String,
    paper: String,
    indolm: String,
    why: String,
}

/// A deviations table: the recipes its markers name, and its rows.
#[derive(Debug)]
struct Table {
    recipes: Vec<String>,
    rows: Vec<Row>,
}

/// The cells of a table row, split at each `|` outside code spans, trimmed.
fn cells(line: &str) -> Vec<String> {
    let line = line.trim();
    let line = line.strip_prefix('|').unwrap_or(line);
    let line = line.strip_suffix('|').unwrap_or(line);
    let (mut out, mut cell, mut in_code) = (Vec::new(), String::new(), false);
    for c in line.chars() {
        match c {
            '|' if !in_code => out.push(std::mem::take(&mut cell).trim().to_string()),
            '`' => {
                in_code = !in_code;
                cell.push(c);
            }
            _ => cell.push(c),
        }
    }
    out.push(cell.trim().to_string());
    out
}

/// The deviations tables of a page (`page` names it in problems), and what is malformed: a
/// marker not followed by its table, a table without the four columns, a row of another width.
/// Lines inside code fences are not read.
fn deviation_tables(page: &str, text: &str) -> (Vec<Table>, Vec<String>) {
    let (mut tables, mut problems) = (Vec::new(), Vec::new());
    // The recipes of the markers waiting for their table, and the line of the first.
    let (mut pending, mut pending_at): (Vec<String>, usize) = (Vec::new(), 0);
    let mut current: Option<Table> = None;
    let mut in_fence = false;
    let unfollowed = |at: usize| format!("{page}:{at}: a `deviations` marker must be followed by its table");
    for (i, line) in text.lines().enumerate() {
        let (number, line) = (i + 1, line.trim());
        in_fence ^= line.starts_with("```") || line.starts_with("~~~");
        if let Some(recipe) = line.strip_prefix(MARKER).filter(|_| !in_fence) {
            tables.extend(current.take());
            if pending.is_empty() {
                pending_at = number;
            }
            pending.push(recipe.trim_end_matches("-->").trim().to_string());
        } else if line.starts_with('|') && !in_fence {
            let row = cells(line);
            if let Some(table) = current.as_mut() {
                if row.iter().all(|c| !c.is_empty() && c.chars().all(|ch| matches!(ch, '-' | ':' | ' '))) {
                    continue; // the line under the header
                }
                match <[String; 4]>::try_from(row) {
                    Ok([setting, paper, indolm, why]) => {
                        table.rows.push(Row { line: number, setting, paper, indolm, why });
                    }
                    Err(row) => {
                        let width = row.len();
                        problems.push(format!("{page}:{number}: {width} cells; a deviations table's rows have 4"));
                    }
                }
            } else if !pending.is_empty() {
                if row != HEADER {
                    problems.push(format!(
                        "{page}:{number}: a deviations table's columns are `| {} |`",
                        HEADER.join(" | ")
                    ));
                }
                current = Some(Table { recipes: std::mem::take(&mut pending), rows: Vec::new() });
            }
        } else {
            tables.extend(current.take());
            if !pending.is_empty() {
                problems.push(unfollowed(pending_at));
                pending.clear();
            }
        }
    }
    tables.extend(current.take());
    if !pending.is_empty() {
        problems.push(unfollowed(pending_at));
    }
    (tables, problems)
}

/// A cell's value: the cell without a trailing parenthesis (the paper's section, a note).
fn value_of(cell: &str) -> &str {
    let cell = cell.trim();
    if !cell.ends_with(')') {
        return cell;
    }
    let mut depth = 0;
    for (i, c) in cell.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth -= 1;
                if depth == 0 {
                    return cell[..i].trim_end();
                }
            }
            _ => {}
        }
    }
    cell
}

/// The TOML value of a cell that is one code span holding a TOML literal (`1e-8`, `"linear"`,
/// `[0.9, 0.999]`).
fn literal(cell: &str) -> Option<toml::Value> {
    let inner = cell.trim().strip_prefix('`')?.strip_suffix('`')?;
    if inner.contains('`') {
        return None;
    }
    toml::from_str::<toml::Table>(&format!("v = {inner}")).ok()?.remove("v")
}

/// TOML values alike: numbers by value (`64` and `64.0`), arrays element by element.
fn same_value(a: &toml::Value, b: &toml::Value) -> bool {
    use toml::Value::{Array, Float, Integer};
    match (a, b) {
        (Integer(i), Float(f)) | (Float(f), Integer(i)) => *i as f64 == *f,
        (Array(x), Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_value(a, b)),
        _ => a == b,
    }
}

/// Text compared as words: code-span marks dropped, spaces collapsed, lowercase.
fn words(text: &str) -> String {
    text.replace('`', "").split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// Whether a row's paper and indolm cells agree (see the module's comment).
fn agree(paper: &str, indolm: &str) -> bool {
    let (paper, indolm) = (value_of(paper), value_of(indolm));
    if paper.to_lowercase().starts_with("not stated") {
        return false;
    }
    match (literal(paper), literal(indolm)) {
        (Some(a), Some(b)) => same_value(&a, &b),
        _ => words(paper) == words(indolm),
    }
}

/// Whether a `why` cell gives a reason: not empty, not a dash.
fn has_reason(why: &str) -> bool {
    !matches!(why.trim(), "" | "—" | "–" | "-")
}

/// The recipe key a `setting` cell names: the whole cell one code span of key characters
/// (`optimizer.eps`, `data.sources[cc100-id].weight`); None for a setting in words.
fn setting_key(cell: &str) -> Option<&str> {
    let key = cell.trim().strip_prefix('`')?.strip_suffix('`')?;
    let is_key = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || "_-.[]".contains(c));
    is_key.then_some(key)
}

/// A dotted key's last part (`weight` of `data.sources[cc100-id].weight`).
fn last_part(key: &str) -> &str {
    key.rsplit('.').next().unwrap_or(key)
}

/// Every key a recipe's text sets, dotted (`optimizer.eps`), with its value; the tables of an
/// array by their `name` (`data.sources[cc100-id].weight`), or their index when unnamed.
fn recipe_keys(text: &str) -> Result<BTreeMap<String, toml::Value>, String> {
    fn walk(prefix: &str, table: &toml::Table, out: &mut BTreeMap<String, toml::Value>) {
        for (key, value) in table {
            let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
            match value {
                toml::Value::Table(inner) => walk(&path, inner, out),
                toml::Value::Array(items) if !items.is_empty() && items.iter().all(toml::Value::is_table) => {
                    for (i, item) in items.iter().enumerate() {
                        let inner = item.as_table().expect("a table, checked above");
                        let label = inner.get("name").and_then(toml::Value::as_str);
                        walk(&format!("{path}[{}]", label.map_or_else(|| i.to_string(), str::to_string)), inner, out);
                    }
                }
                _ => {
                    out.insert(path, value.clone());
                }
            }
        }
    }
    let table: toml::Table = toml::from_str(text).map_err(|e| format!("not TOML: {e}"))?;
    let mut out = BTreeMap::new();
    walk("", &table, &mut out);
    Ok(out)
}

/// The problems of a page's tables against their recipes; `read` gives a recipe's text by its
/// path, or why it cannot.
fn table_problems(page: &str, tables: &[Table], read: &dyn Fn(&str) -> Result<String, String>) -> Vec<String> {
    let mut problems = Vec::new();
    // Each recipe's rows, from every table that names it.
    let mut rows_of: BTreeMap<&str, Vec<&Row>> = BTreeMap::new();
    for table in tables {
        for recipe in &table.recipes {
            rows_of.entry(recipe.as_str()).or_default().extend(&table.rows);
        }
        for row in table.rows.iter().filter(|r| !agree(&r.paper, &r.indolm) && !has_reason(&r.why)) {
            problems.push(format!(
                "{page}:{}: {}: the paper's value ({}) is not indolm's ({}), and no reason is given",
                row.line, row.setting, row.paper, row.indolm
            ));
        }
    }
    for (recipe, rows) in rows_of {
        let keys = match read(recipe).and_then(|text| recipe_keys(&text)) {
            Ok(keys) => keys,
            Err(e) => {
                problems.push(format!("{page}: {recipe}: {e}"));
                continue;
            }
        };
        let mut listed = BTreeSet::new();
        for row in rows {
            let Some(key) = setting_key(&row.setting) else { continue };
            let at = format!("{page}:{}: {recipe}: `{key}`", row.line);
            if !listed.insert(key) {
                problems.push(format!("{at} is listed twice"));
            }
            match (keys.get(key), literal(&row.indolm)) {
                (None, _) => problems.push(format!(
                    "{at} is not in the recipe file: write it there, a default too, so that the table can be checked"
                )),
                (Some(_), None) => {
                    problems.push(format!("{at}: the indolm cell {} is not one TOML literal in backticks", row.indolm))
                }
                (Some(value), Some(cell)) if !same_value(value, &cell) => {
                    problems.push(format!("{at}: the table says {}, the recipe `{value}`", row.indolm))
                }
                _ => {}
            }
        }
        for key in keys.keys().filter(|k| !listed.contains(k.as_str()) && !NOT_SETTINGS.contains(&last_part(k))) {
            problems.push(format!("{page}: {recipe} sets `{key}`, which none of its deviations tables lists"));
        }
    }
    problems
}

/// The paper recipes shipped, from the repository root: `recipes/indobias/*.toml` and
/// `recipes/finetune/*.toml` but the `-tiny` ones.
fn paper_recipes() -> Vec<String> {
    let mut out = Vec::new();
    for dir in ["recipes/indobias", "recipes/finetune"] {
        for entry in std::fs::read_dir(root().join(dir)).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().to_string();
            if name.ends_with(".toml") && !name.ends_with("-tiny.toml") {
                out.push(format!("{dir}/{name}"));
            }
        }
    }
    out.sort();
    out
}

/// A folder of stand-ins for the downloads the paper recipes name under `corpora/downloads/`,
/// enough for `indolm recipe check` run in it: empty CC-100 and Wikipedia files (the check
/// counts a source's files, it does not read them), the Liputan6 split folders with one sample
/// article, the fixture IndoBias pairs, and the NusaX of `tests/data` (the check reads every
/// file; NusaX-MT's validation split stands in for its test split, which `tests/data` lacks). IndoLEM's vocabulary is left out: without it the check notes the missing
/// tokenizer and passes.
fn downloads_stand_in() -> PathBuf {
    let dir = scratch("paper-recipes");
    let downloads = dir.join("corpora/downloads");
    let touch = |path: PathBuf| {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "").unwrap();
    };
    for lang in ["id", "jv", "su"] {
        touch(downloads.join(format!("cc100/{lang}.txt.xz")));
        touch(downloads.join(format!("wikipedia/20231101.{lang}/train-00000-of-00001.parquet")));
    }
    let article = root().join("corpora/liputan6-sample/train/001.json");
    for split in ["canonical/train", "canonical/dev", "canonical/test", "xtreme/dev", "xtreme/test"] {
        let folder = downloads.join("liputan6").join(split);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::copy(&article, folder.join("001.json")).unwrap();
    }
    let pairs = downloads.join("indobias/pair");
    std::fs::create_dir_all(&pairs).unwrap();
    for entry in std::fs::read_dir(root().join("tests/fixtures/indobias/pair")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, pairs.join(path.file_name().unwrap())).unwrap();
    }
    std::fs::create_dir_all(downloads.join("nusax")).unwrap();
    std::os::unix::fs::symlink(test_data().join("nusax/sentiment"), downloads.join("nusax/sentiment")).unwrap();
    // NusaX-MT's training and validation splits, the latter also standing in for its test split.
    let mt = downloads.join("nusax/mt");
    std::fs::create_dir_all(&mt).unwrap();
    for (from, to) in [("train", "train"), ("valid", "valid"), ("valid", "test")] {
        std::fs::copy(test_data().join(format!("nusax/mt/{from}.csv")), mt.join(format!("{to}.csv"))).unwrap();
    }
    dir
}

/// `indolm recipe check RECIPE` run in `dir`, where the recipe's relative paths resolve: the
/// binary is started there itself, since `common::indolm` runs commands in the test's folder.
/// Err holds what it printed on stderr.
fn recipe_check_in(dir: &Path, recipe: &str) -> Result<(), String> {
    let out = Command::new(env!("CARGO_BIN_EXE_indolm"))
        .args(["recipe", "check"])
        .arg(root().join(recipe))
        .current_dir(dir)
        .output()
        .expect("run indolm");
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// docs/papers.md tells the truth about the paper recipes: each key's value is the recipe's,
/// every setting a recipe holds is beside the paper's, every difference has its reason, every
/// paper recipe has a table and passes `indolm recipe check`.
#[test]
fn the_papers_page_agrees_with_the_paper_recipes() {
    let text = std::fs::read_to_string(root().join(PAGE)).expect(PAGE);
    let (tables, mut problems) = deviation_tables(PAGE, &text);
    let read = |path: &str| std::fs::read_to_string(root().join(path)).map_err(|e| format!("cannot be read: {e}"));
    problems.extend(table_problems(PAGE, &tables, &read));
    let described: BTreeSet<&str> = tables.iter().flat_map(|t| t.recipes.iter().map(String::as_str)).collect();
    for recipe in paper_recipes().iter().filter(|r| !described.contains(r.as_str())) {
        problems.push(format!("{PAGE}: {recipe} is a paper recipe without a deviations table"));
    }
    let stand_in = downloads_stand_in();
    for recipe in &described {
        if let Err(error) = recipe_check_in(&stand_in, recipe) {
            problems.push(format!("{PAGE}: `indolm recipe check {recipe}` fails: {error}"));
        }
    }
    assert!(tables.len() > 5, "{PAGE}: {} deviations tables", tables.len());
    assert!(problems.is_empty(), "{PAGE}: {} problem(s):\n{}", problems.len(), problems.join("\n"));
}

#[test]
fn unexplained_differences_and_unlisted_keys_are_found() {
    assert_eq!(cells("| `a|b` | c |"), ["`a|b`", "c"]);
    assert_eq!(value_of("`\"noam\"` (§3.1: lr · min(step^-0.5, step · warmup^-1.5))"), "`\"noam\"`");
    assert!(agree("`64` (E.1)", "`64.0`") && agree("Adam (§3)", "adam"));
    assert!(!agree("not stated", "not stated") && !agree("`64` per device", "`64`"));
    assert_eq!(setting_key("`data.sources[cc100-id].weight`"), Some("data.sources[cc100-id].weight"));
    assert_eq!(setting_key("trigram blocking"), None);

    let recipe = "kind = \"pretrain\"\nname = \"x\"\nseed = 1\n[optimizer]\nlr = 1e-4\neps = 1e-6\n\
                  betas = [0.9, 0.999]\nweight_decay = 0.01\n[[data.sources]]\nname = \"a\"\npaths = [\"a.txt\"]\n\
                  weight = 1.0\n";
    let page = "# Papers\n\n<!-- deviations: recipes/x.toml -->\n| setting | paper | indolm | why they differ |\n\
                | --- | --- | --- | --- |\n| `seed` | `1` (§2) | `1` | — |\n| `optimizer.lr` | `0.0001` (§2) | `1e-4` | — |\n\
                | `optimizer.eps` | `1e-8` (§2) | `1e-6` | — |\n| `optimizer.betas` | not stated | `[0.9, 0.98]` | Adam's |\n\
                | `optimizer.warmup_steps` | `10` | `10` | — |\n| casing | lowercased (§3) | lowercased | — |\n\
                | batch | `64` per device | `64` | |\n| `data.sources[a].weight` | `1.0` (Table 4) | `1` | — |\n\n\
                <!-- deviations: recipes/y.toml -->\n\nText.\n";
    let read = |path: &str| match path {
        "recipes/x.toml" => Ok(recipe.to_string()),
        _ => Err(format!("{path}: no such file")),
    };
    let (tables, mut problems) = deviation_tables("docs/papers.md", page);
    assert_eq!((tables.len(), tables[0].rows.len()), (1, 8), "{tables:#?}");
    problems.extend(table_problems("docs/papers.md", &tables, &read));
    assert_eq!(problems.len(), 6, "{problems:#?}");
    let expected = [
        "docs/papers.md:15: a `deviations` marker must be followed by its table",
        "docs/papers.md:8: `optimizer.eps`: the paper's value (`1e-8` (§2)) is not indolm's (`1e-6`)",
        "docs/papers.md:12: batch: the paper's value",
        "docs/papers.md:9: recipes/x.toml: `optimizer.betas`: the table says `[0.9, 0.98]`",
        "docs/papers.md:10: recipes/x.toml: `optimizer.warmup_steps` is not in the recipe file",
        "docs/papers.md: recipes/x.toml sets `optimizer.weight_decay`, which none",
    ];
    for (problem, start) in problems.iter().zip(expected) {
        assert!(problem.starts_with(start), "{problem:?} should start with {start:?}:\n{problems:#?}");
    }

    // A table without the four columns, and a row of three cells.
    let (_, problems) = deviation_tables(
        "p.md",
        "<!-- deviations: r.toml -->\n| setting | paper | indolm |\n| --- | --- | --- |\n| `a` | `1` | `1` |\n",
    );
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(problems[0].starts_with("p.md:2: a deviations table's columns are"), "{problems:#?}");
    assert!(problems[1].starts_with("p.md:4: 3 cells; a deviations table's rows have 4"), "{problems:#?}");
}
