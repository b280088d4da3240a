//! The guide (README.md and docs/*.md) checked against the code, so that it stays true:
//!
//! - every relative link and `#anchor` resolves (anchors by GitHub's heading slugs);
//! - every subcommand and flag of the `indolm --help` tree is shown in a section of the guide
//!   that names its command (`indolm eval bias` … `--resamples`);
//! - the recipe keys each reader accepts are exactly the keys docs/recipes.md lists for that
//!   kind (the tables after `<!-- recipe keys: KIND... -->`), found by asking each reader;
//! - every recipe example (a fenced block opened with `` ```toml recipe ``) passes
//!   `indolm recipe check`.
//!
//! Each problem is reported with the file and line it comes from. The checkers are plain
//! functions over text, each also run on a planted defect (the `*_are_found` tests), so a check
//! that stopped finding what it looks for fails too.
use crate::common::{root, scratch};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One Markdown file of the guide: its path relative to the repository root and its text.
struct Page {
    path: PathBuf,
    text: String,
}

/// README.md and every docs/*.md, in name order.
fn guide() -> Vec<Page> {
    let mut paths = vec![PathBuf::from("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ is the guide's folder")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| p.strip_prefix(root()).unwrap().to_path_buf())
        .collect();
    docs.sort();
    paths.extend(docs);
    paths
        .into_iter()
        .map(|path| {
            let text =
                std::fs::read_to_string(root().join(&path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            Page { path, text }
        })
        .collect()
}

/// Fails the test with every problem, one a line.
fn assert_no_problems(what: &str, problems: &[String]) {
    assert!(problems.is_empty(), "{what}: {} problem(s):\n{}", problems.len(), problems.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// Markdown: lines outside code, headings, sections.

/// The lines of a Markdown text with their 1-based numbers, and whether each is inside a fenced
/// code block (the fences themselves count as inside).
fn lines_with_fences(text: &str) -> Vec<(usize, &str, bool)> {
    let mut fence: Option<&str> = None;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => {
                fence = Some(m);
                out.push((i + 1, line, true));
            }
            (Some(open), Some(m)) if open == m && trimmed.trim_end() == m => {
                fence = None;
                out.push((i + 1, line, true));
            }
            _ => out.push((i + 1, line, fence.is_some())),
        }
    }
    out
}

/// A line with its inline code spans removed (links inside code are not links).
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
        } else if !in_code {
            out.push(c);
        }
    }
    out
}

/// The text of an ATX heading line (`## Bias statistics` → `Bias statistics`).
fn heading_text(line: &str) -> Option<&str> {
    let hashes = line.chars().take_while(|&c| c == '#').count();
    if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
        return None;
    }
    Some(line[hashes..].trim().trim_end_matches('#').trim())
}

/// GitHub's anchor for a heading: the rendered text lowercased, everything but letters, digits,
/// `-`, `_` and spaces dropped, spaces made hyphens.
fn slug(heading: &str) -> String {
    // Rendered text: code spans keep their content, links their text, emphasis markers go.
    let mut rendered = String::new();
    let mut rest = heading;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        match (after.find("]("), after.find(')')) {
            (Some(close), Some(end)) if close < end => {
                rendered.push_str(&rest[..open]);
                rendered.push_str(&after[..close]);
                rest = &after[end + 1..];
            }
            _ => {
                rendered.push_str(&rest[..=open]);
                rest = after;
            }
        }
    }
    rendered.push_str(rest);
    rendered
        .to_lowercase()
        .chars()
        .filter(|&c| c.is_alphanumeric() || c == '-' || c == '_' || c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a page's headings, with GitHub's `-1`, `-2` suffixes for repeated ones.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for (_, line, in_code) in lines_with_fences(text) {
        if let Some(h) = heading_text(line).filter(|_| !in_code) {
            let s = slug(&h.replace('`', ""));
            let n = seen.entry(s.clone()).or_insert(0);
            out.insert(if *n == 0 { s.clone() } else { format!("{s}-{n}") });
            *n += 1;
        }
    }
    out
}

/// A page cut at its headings: each section's first line number and its text (the heading
/// included, code blocks included).
fn sections(text: &str) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = vec![(1, String::new())];
    for (number, line, in_code) in lines_with_fences(text) {
        if !in_code && heading_text(line).is_some() {
            out.push((number, String::new()));
        }
        let section = &mut out.last_mut().unwrap().1;
        section.push_str(line);
        section.push('\n');
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Check 1: links and anchors.

/// The link targets of a line outside code: `[text](target)`, `![alt](target)` and reference
/// definitions `[label]: target`.
fn link_targets(line: &str) -> Vec<String> {
    let line = without_code_spans(line);
    let mut out = Vec::new();
    if let Some(rest) = line.trim_start().strip_prefix('[') {
        if let Some((_, target)) = rest.split_once("]:") {
            if let Some(t) = target.split_whitespace().next() {
                out.push(t.to_string());
            }
            return out;
        }
    }
    let mut rest = line.as_str();
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        let Some(end) = after.find(')') else { break };
        let target = after[..end].split_whitespace().next().unwrap_or("");
        out.push(target.trim_start_matches('<').trim_end_matches('>').to_string());
        rest = &after[end..];
    }
    out
}

/// Every relative link of `pages` whose file or anchor does not exist. `exists` says whether a
/// repository path exists; `anchors_of` gives a Markdown file's anchors (None: not readable).
fn broken_links(
    pages: &[Page],
    exists: &dyn Fn(&Path) -> bool,
    anchors_of: &dyn Fn(&Path) -> Option<BTreeSet<String>>,
) -> Vec<String> {
    let mut problems = Vec::new();
    for page in pages {
        let dir = page.path.parent().unwrap_or(Path::new(""));
        for (number, line, in_code) in lines_with_fences(&page.text) {
            if in_code {
                continue;
            }
            for target in link_targets(line) {
                if target.contains("://") || target.starts_with("mailto:") || target.is_empty() {
                    continue;
                }
                let at = format!("{}:{number}", page.path.display());
                let (file, anchor) = match target.split_once('#') {
                    Some((f, a)) => (f, Some(a)),
                    None => (target.as_str(), None),
                };
                let resolved = if file.is_empty() { page.path.clone() } else { normalize(&dir.join(file)) };
                if !exists(&resolved) {
                    problems.push(format!("{at}: link `{target}`: {} does not exist", resolved.display()));
                    continue;
                }
                let Some(anchor) = anchor else { continue };
                match anchors_of(&resolved) {
                    Some(known) if known.contains(anchor) => {}
                    Some(_) => problems.push(format!(
                        "{at}: link `{target}`: {} has no heading whose anchor is #{anchor}",
                        resolved.display()
                    )),
                    None => problems.push(format!(
                        "{at}: link `{target}`: an anchor into {}, which is not a Markdown page",
                        resolved.display()
                    )),
                }
            }
        }
    }
    problems
}

/// `a/./b/../c` → `a/c`, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

fn repo_links(pages: &[Page]) -> Vec<String> {
    let exists = |p: &Path| root().join(p).exists();
    let anchors_of = |p: &Path| {
        if p.extension().is_some_and(|e| e == "md") {
            std::fs::read_to_string(root().join(p)).ok().map(|t| anchors(&t))
        } else {
            None
        }
    };
    broken_links(pages, &exists, &anchors_of)
}

#[test]
fn every_relative_link_and_anchor_of_the_guide_resolves() {
    let pages = guide();
    assert!(pages.len() > 5, "README.md and the docs/ pages");
    assert_no_problems("links of README.md and docs/*.md", &repo_links(&pages));
}

#[test]
fn broken_links_and_anchors_are_found() {
    let page = |path: &str, text: &str| Page { path: path.into(), text: text.into() };
    let pages = [
        page(
            "README.md",
            "# indolm\n\n## Your first run\n\nSee [the guide](docs/guide.md#bias-statistics), [here](#your-first-run),\n\
             [gone](docs/gone.md), [lost](docs/guide.md#no-such-heading) and [web](https://example.org).\n\
             ```\n[not a link](nowhere.md)\n```\n`[in code](nowhere.md)`\n",
        ),
        page("docs/guide.md", "# Guide\n\n## Bias `statistics`\n\nBack to [the README](../README.md#indolm).\n"),
    ];
    let texts: BTreeMap<PathBuf, String> = pages.iter().map(|p| (p.path.clone(), p.text.clone())).collect();
    let problems = broken_links(&pages, &|p| texts.contains_key(p), &|p| texts.get(p).map(|t| anchors(t)));
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(problems[0].starts_with("README.md:6: link `docs/gone.md`"), "{problems:#?}");
    assert!(problems[1].starts_with("README.md:6: link `docs/guide.md#no-such-heading`"), "{problems:#?}");
    assert_eq!(slug("Bias statistics: Wilson, McNemar & Holm (2 runs)"), "bias-statistics-wilson-mcnemar--holm-2-runs");
    assert_eq!(slug("[Links](x.md) and `code_names`"), "links-and-code_names");
    let repeated = anchors("# A\n## Notes\n## Notes\n");
    assert!(repeated.contains("notes") && repeated.contains("notes-1"), "{repeated:?}");
}

// ---------------------------------------------------------------------------------------------
// Check 2: every subcommand and flag of `indolm --help`.

/// A command of the help tree (`["eval", "bias"]`) and its own flags (without those it shares
/// with its parent, which are documented with the parent, and without `--help`).
#[derive(Debug)]
struct HelpCommand {
    path: Vec<String>,
    flags: Vec<String>,
}

/// The subcommands and flags of one `-h` page.
fn parse_help(help: &str) -> (Vec<String>, Vec<String>) {
    let (mut commands, mut flags) = (Vec::new(), Vec::new());
    let mut section = "";
    for line in help.lines() {
        if !line.starts_with(' ') && line.ends_with(':') {
            section = line;
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        match section {
            "Commands:" if indent == 2 => {
                let name = line.split_whitespace().next().unwrap_or("");
                if name != "help" {
                    commands.push(name.to_string());
                }
            }
            // Flags start within 6 columns (`  -h, --help`, `      --out`); wrapped
            // descriptions start further in.
            "Options:" if (2..=6).contains(&indent) => {
                let first = line.trim_start().trim_start_matches(|c: char| c == '-' || c.is_alphanumeric());
                let long = first.strip_prefix(", ").unwrap_or_else(|| line.trim_start());
                if let Some(flag) = long.split([' ', '=']).next().filter(|f| f.starts_with("--")) {
                    if flag != "--help" {
                        flags.push(flag.to_string());
                    }
                }
            }
            _ => {}
        }
    }
    (commands, flags)
}

/// The whole tree, from `indolm -h` down, in depth-first order, each command's subcommands and
/// flags read from its `-h` text. The texts come from one process (`INDOLM_TEST_HELP_TREE=1`,
/// `src/cli/help_tree.rs`: each exactly what `indolm <path> -h` prints) rather than one process,
/// and one load of libtorch, per command; two of them are checked against the real `-h`.
fn help_tree() -> Vec<HelpCommand> {
    let output =
        Command::new(env!("CARGO_BIN_EXE_indolm")).env("INDOLM_TEST_HELP_TREE", "1").output().expect("run indolm");
    assert!(output.status.success(), "INDOLM_TEST_HELP_TREE=1 indolm failed");
    let entries: Vec<serde_json::Value> = serde_json::from_slice(&output.stdout).expect("a JSON array");
    let texts: std::collections::BTreeMap<Vec<String>, String> = entries
        .iter()
        .map(|e| {
            let path = e["path"].as_array().unwrap().iter().map(|p| p.as_str().unwrap().to_string()).collect();
            (path, e["help"].as_str().unwrap().to_string())
        })
        .collect();
    for path in [vec![], vec!["eval".to_string(), "bias".to_string()]] {
        let real = Command::new(env!("CARGO_BIN_EXE_indolm")).args(&path).arg("-h").output().expect("run indolm");
        assert_eq!(
            String::from_utf8_lossy(&real.stdout),
            texts[&path],
            "the tree's `indolm {path:?} -h` is not the real one"
        );
    }
    fn walk(
        path: Vec<String>,
        parent_flags: &[String],
        texts: &std::collections::BTreeMap<Vec<String>, String>,
    ) -> Vec<HelpCommand> {
        let help = texts.get(&path).unwrap_or_else(|| panic!("indolm {path:?} -h is missing from the tree"));
        let (commands, flags) = parse_help(help);
        let own: Vec<String> = flags.iter().filter(|f| !parent_flags.contains(f)).cloned().collect();
        let mut out = vec![HelpCommand { path: path.clone(), flags: own }];
        for command in commands {
            let mut child = path.clone();
            child.push(command);
            out.extend(walk(child, &flags, texts));
        }
        out
    }
    walk(Vec::new(), &[], &texts)
}

/// Whether `text` holds `word` with no letter, digit, `-` or `_` right before or after it.
fn contains_word(text: &str, word: &str) -> bool {
    let is_word = |c: char| c.is_alphanumeric() || c == '-' || c == '_';
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        !before.is_some_and(is_word) && !after.is_some_and(is_word)
    })
}

/// The commands no section of the guide shows (as `indolm <command>`), and the flags no section
/// that shows their command mentions.
fn undocumented_commands(tree: &[HelpCommand], pages: &[Page]) -> Vec<String> {
    let sections: Vec<(String, String)> = pages
        .iter()
        .flat_map(|p| sections(&p.text).into_iter().map(move |(n, s)| (format!("{}:{n}", p.path.display()), s)))
        .collect();
    let mut problems = Vec::new();
    for command in tree {
        let name =
            if command.path.is_empty() { "indolm".to_string() } else { format!("indolm {}", command.path.join(" ")) };
        let showing: Vec<&(String, String)> = sections.iter().filter(|(_, s)| contains_word(s, &name)).collect();
        if showing.is_empty() {
            problems.push(format!(
                "`{name}` (in `{name} -h`) is shown in no section of README.md or docs/*.md: document it as `{name} ...`"
            ));
            continue;
        }
        for flag in &command.flags {
            if !showing.iter().any(|(_, s)| contains_word(s, flag)) {
                let places: Vec<&str> = showing.iter().take(3).map(|(at, _)| at.as_str()).collect();
                problems.push(format!(
                    "`{name} {flag}` (in `{name} -h`) is undocumented: no section that shows `{name}` mentions \
                     `{flag}` (sections showing it: {}{})",
                    places.join(", "),
                    if showing.len() > 3 { ", ..." } else { "" }
                ));
            }
        }
    }
    problems
}

#[test]
fn every_subcommand_and_flag_of_the_help_is_in_the_guide() {
    let tree = help_tree();
    assert!(tree.len() > 30, "the help tree has {} commands", tree.len());
    let bias = tree.iter().find(|c| c.path == ["eval", "bias"]).expect("indolm eval bias");
    assert!(bias.flags.contains(&"--resamples".to_string()) && !bias.flags.contains(&"--device".to_string()));
    assert_no_problems("commands and flags of `indolm --help`", &undocumented_commands(&tree, &guide()));
}

#[test]
fn undocumented_commands_and_flags_are_found() {
    let help = "About\n\nUsage: indolm x [OPTIONS]\n\nCommands:\n  bias  Stereotype win rates, with a description\n  \
                help  Print this message\n\nOptions:\n      --pairs <PAIRS>  The pairs; see --not-a-flag\n  \
                -o, --out <OUT>\n          A long description starting --with-a-flag-like-word\n  -h, --help  Print help\n";
    assert_eq!(parse_help(help), (vec!["bias".to_string()], vec!["--pairs".to_string(), "--out".to_string()]));
    let tree = [
        HelpCommand { path: vec!["eval".into()], flags: vec![] },
        HelpCommand { path: vec!["eval".into(), "bias".into()], flags: vec!["--pairs".into(), "--out".into()] },
        HelpCommand { path: vec!["eval".into(), "pll".into()], flags: vec![] },
    ];
    let page = Page {
        path: "docs/bias.md".into(),
        text: "# Bias\n\n`indolm eval bias --pairs P` scores pairs.\n\n## Elsewhere\n\n`--out` writes files, \
               and `indolm eval pll-like` is another word.\n"
            .into(),
    };
    let problems = undocumented_commands(&tree, &[page]);
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(
        problems[0].starts_with("`indolm eval bias --out` (in `indolm eval bias -h`) is undocumented"),
        "{problems:#?}"
    );
    assert!(problems[0].contains("docs/bias.md:1"), "{problems:#?}");
    assert!(problems[1].starts_with("`indolm eval pll`"), "{problems:#?}");
}

// ---------------------------------------------------------------------------------------------
// Check 3: recipe keys, each reader against docs/recipes.md.

/// The recipe kinds, as the key tables of docs/recipes.md name them, with their commands: the
/// library's own list (the registered tasks').
fn recipe_kinds() -> Vec<(&'static str, &'static str)> {
    indolm_tasks::registry::recipe_kinds().iter().map(|k| (k.name, k.command)).collect()
}

/// The name of a key no reader accepts, used to make each reader list the keys it accepts.
const PROBE: &str = "indolm_probe_key";

/// A recipe reader (`parse_toml` into the recipe type) over a TOML text: Err holds its message.
type Reader<'a> = &'a dyn Fn(&str) -> Result<(), String>;

/// Reads `text` as a recipe of type `T` through the readers' `parse_toml`.
fn read_as<T: serde::de::DeserializeOwned>(dir: &Path, text: &str) -> Result<(), String> {
    let path = dir.join("probe.toml");
    std::fs::write(&path, text).unwrap();
    indolm_core::recipe::parse_toml::<T>(&path).map(|_| ()).map_err(|e| e.to_string())
}

/// A key path: each key and whether it is an array of tables (`[[data.sources]]`).
type KeyPath = Vec<(String, bool)>;

fn dotted(path: &[(String, bool)]) -> String {
    path.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>().join(".")
}

/// The keys the table at `path` accepts, or None when `path` is not a table: a recipe holding
/// only an unknown key there makes serde's `deny_unknown_fields` name every key it accepts.
fn table_keys(read: Reader, path: &[(String, bool)]) -> Result<Option<Vec<String>>, String> {
    let mut text = String::new();
    for i in 0..path.len() {
        let header = dotted(&path[..=i]);
        if path[i].1 {
            text.push_str(&format!("[[{header}]]\n"));
        } else if i + 1 == path.len() {
            text.push_str(&format!("[{header}]\n"));
        }
    }
    text.push_str(&format!("{PROBE} = 1\n"));
    match read(&text) {
        Ok(()) => Err(format!("the table [{}] accepted the unknown key `{PROBE}`", dotted(path))),
        Err(message) => Ok(message
            .split_once(&format!("unknown field `{PROBE}`"))
            .map(|(_, expected)| expected.split('`').skip(1).step_by(2).map(str::to_string).collect())),
    }
}

/// Every dotted key (`optimizer.lr`, `data.sources.name`) a recipe reader accepts: the leaves
/// of its tables, found table by table.
fn accepted_keys(read: Reader) -> Result<BTreeSet<String>, String> {
    fn walk(read: Reader, path: KeyPath, out: &mut BTreeSet<String>) -> Result<(), String> {
        let (path, keys) = match table_keys(read, &path)? {
            Some(keys) => (path, keys),
            None if path.is_empty() => return Err("the reader does not name the keys it accepts".into()),
            None => {
                let mut as_array = path.clone();
                as_array.last_mut().unwrap().1 = true;
                match table_keys(read, &as_array)? {
                    Some(keys) => (as_array, keys),
                    None => {
                        out.insert(dotted(&path));
                        return Ok(());
                    }
                }
            }
        };
        for key in keys {
            let mut child = path.clone();
            child.push((key, false));
            walk(read, child, out)?;
        }
        Ok(())
    }
    let mut out = BTreeSet::new();
    walk(read, Vec::new(), &mut out)?;
    Ok(out)
}

/// The keys a page lists per kind, each with its line: the first cell (a code span) of every row
/// of a table that follows a `<!-- recipe keys: KIND ... -->` line. Malformed markers are
/// problems.
fn documented_keys(page: &Page) -> (BTreeMap<String, BTreeMap<String, usize>>, Vec<String>) {
    let mut keys: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    let mut problems = Vec::new();
    let mut kinds: Vec<String> = Vec::new();
    let mut in_table = false;
    for (number, line, in_code) in lines_with_fences(&page.text) {
        let line = line.trim();
        if in_code {
            continue;
        }
        if let Some(rest) = line.strip_prefix("<!-- recipe keys:") {
            kinds = rest.trim_end_matches("-->").split_whitespace().map(str::to_string).collect();
            for kind in &kinds {
                if !recipe_kinds().iter().any(|(k, _)| k == kind) {
                    problems.push(format!(
                        "{}:{number}: unknown recipe kind `{kind}` (known: pretrain sentiment summarize)",
                        page.path.display()
                    ));
                }
            }
            in_table = false;
            continue;
        }
        if line.starts_with('|') && !kinds.is_empty() {
            in_table = true;
            let cell = line.split('|').nth(1).unwrap_or("");
            if let Some(key) = cell.split('`').nth(1) {
                for kind in &kinds {
                    keys.entry(kind.clone()).or_default().insert(key.to_string(), number);
                }
            }
        } else if in_table || !line.is_empty() {
            // The table ended (or never started right after its marker).
            if !in_table && !kinds.is_empty() {
                problems.push(format!(
                    "{}:{number}: a `recipe keys` marker must be followed by its table",
                    page.path.display()
                ));
            }
            kinds.clear();
            in_table = false;
        }
    }
    (keys, problems)
}

/// Keys a reader accepts that the page does not list for its kind, and keys the page lists that
/// the reader refuses.
fn recipe_key_problems(accepted: &BTreeMap<&str, BTreeSet<String>>, page: &Page) -> Vec<String> {
    let (documented, mut problems) = documented_keys(page);
    let file = page.path.display();
    for (kind, keys) in accepted {
        let command = recipe_kinds().into_iter().find(|(k, _)| k == kind).map_or("", |(_, c)| c);
        let listed = documented.get(*kind).cloned().unwrap_or_default();
        for key in keys.iter().filter(|k| !listed.contains_key(*k)) {
            problems.push(format!(
                "{file}: `{key}` is accepted by {kind} recipes (`{command}`) but no table marked \
                 `<!-- recipe keys: ... {kind} ... -->` lists it"
            ));
        }
        for (key, line) in listed.iter().filter(|(k, _)| !keys.contains(*k)) {
            problems.push(format!(
                "{file}:{line}: `{key}` is listed for {kind} recipes, whose reader refuses it (`{command}`)"
            ));
        }
    }
    problems
}

/// What each recipe reader accepts, asked of the readers themselves.
fn accepted_by_readers() -> BTreeMap<&'static str, BTreeSet<String>> {
    let dir = scratch("recipe-keys");
    indolm_tasks::TASKS
        .iter()
        .map(|task| {
            let kind = task.kind.name;
            let read: Reader = &|t| {
                let path = dir.join("probe.toml");
                std::fs::write(&path, t).unwrap();
                (task.parse_recipe)(&path).map_err(|e| e.to_string())
            };
            (kind, accepted_keys(read).unwrap_or_else(|e| panic!("{kind} recipes: {e}")))
        })
        .collect()
}

#[test]
fn recipe_keys_of_every_reader_are_exactly_those_the_recipes_page_lists() {
    let accepted = accepted_by_readers();
    assert!(accepted["pretrain"].contains("optimizer.lr") && accepted["pretrain"].contains("data.sources.text_field"));
    assert!(accepted["summarize"].contains("abs.beam") && !accepted["sentiment"].contains("abs.beam"));
    let path = PathBuf::from("docs/recipes.md");
    let text = std::fs::read_to_string(root().join(&path)).expect("docs/recipes.md");
    assert_no_problems("recipe keys in docs/recipes.md", &recipe_key_problems(&accepted, &Page { path, text }));
}

#[test]
fn undocumented_and_refused_recipe_keys_are_found() {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Small {
        name: String,
        #[serde(default)]
        optimizer: Option<Inner>,
        #[serde(default)]
        sources: Vec<Inner>,
        #[serde(default)]
        betas: Vec<f64>,
    }
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        lr: f64,
        #[serde(default)]
        every: u64,
    }
    let dir = scratch("recipe-keys-planted");
    let keys = accepted_keys(&|t| read_as::<Small>(&dir, t)).unwrap();
    let expected = ["betas", "name", "optimizer.every", "optimizer.lr", "sources.every", "sources.lr"];
    assert_eq!(keys, expected.iter().map(|k| k.to_string()).collect());
    let page = Page {
        path: "docs/recipes.md".into(),
        text: "# Recipes\n\n<!-- recipe keys: pretrain -->\n| key | default | meaning |\n| --- | --- | --- |\n\
               | `name` | required | the run |\n| `betas` | [0.9, 0.999] | Adam's |\n| `optimizer.lr` | required | peak |\n\
               | `optimizer.momentum` | 0.9 | not a key |\n| `sources.lr` | | |\n| `sources.every` | | |\n\nText.\n\n\
               | `optimizer.every` | outside a marked table | |\n"
            .into(),
    };
    let problems = recipe_key_problems(&BTreeMap::from([("pretrain", keys)]), &page);
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(
        problems[0].starts_with("docs/recipes.md: `optimizer.every` is accepted by pretrain recipes"),
        "{problems:#?}"
    );
    assert!(
        problems[1].starts_with("docs/recipes.md:9: `optimizer.momentum` is listed for pretrain recipes"),
        "{problems:#?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Check 4: the guide's recipe examples pass `indolm recipe check`.

/// The blocks opened with ```` ```toml recipe ````: where each starts, and its text.
fn recipe_examples(pages: &[Page]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for page in pages {
        let mut current: Option<(String, String)> = None;
        for (number, line, in_code) in lines_with_fences(&page.text) {
            let trimmed = line.trim();
            match &mut current {
                None if in_code && trimmed.starts_with("```") => {
                    let info: Vec<&str> = trimmed.trim_start_matches('`').split_whitespace().collect();
                    if info == ["toml", "recipe"] {
                        current = Some((format!("{}:{number}", page.path.display()), String::new()));
                    }
                }
                Some((at, text)) => {
                    if trimmed.starts_with("```") {
                        out.push((at.clone(), text.clone()));
                        current = None;
                    } else {
                        text.push_str(line);
                        text.push('\n');
                    }
                }
                None => {}
            }
        }
    }
    out
}

/// The examples that `indolm recipe check` refuses, run from the repository root (where the
/// shipped recipes' relative paths start), each with the first line of its error.
fn failing_recipe_examples(examples: &[(String, String)], dir: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    for (i, (at, text)) in examples.iter().enumerate() {
        let file = dir.join(format!("example-{i}.toml"));
        std::fs::write(&file, text).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_indolm"))
            .args(["recipe", "check"])
            .arg(&file)
            .current_dir(root())
            .output()
            .expect("run indolm");
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let error = stderr.lines().next().unwrap_or("").replace(&file.display().to_string(), "the example");
            problems.push(format!("{at}: the recipe example fails `indolm recipe check`: {error}"));
        }
    }
    problems
}

#[test]
fn the_guide_s_recipe_examples_pass_recipe_check() {
    let examples = recipe_examples(&guide());
    assert!(examples.len() >= 3, "one example at least per recipe kind, found {}", examples.len());
    assert_no_problems("recipe examples", &failing_recipe_examples(&examples, &scratch("recipe-examples")));
}

#[test]
fn a_recipe_example_that_recipe_check_refuses_is_found() {
    let good = std::fs::read_to_string(root().join("recipes/tiny/sample.toml")).unwrap();
    let text = format!(
        "# Recipes\n\n```toml recipe\n{good}```\n\nNot checked:\n\n```toml\nname = 1\n```\n\n```toml recipe\n{}```\n",
        good.replace("lr = 1e-3", "lr = 1e-3\nmomentum = 0.9")
    );
    let examples = recipe_examples(&[Page { path: "docs/recipes.md".into(), text }]);
    assert_eq!(examples.len(), 2);
    let problems = failing_recipe_examples(&examples, &scratch("recipe-examples-planted"));
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(problems[0].starts_with(&format!("docs/recipes.md:{}:", 12 + good.lines().count())), "{problems:#?}");
    assert!(problems[0].contains("unknown field `momentum`"), "{problems:#?}");
}
