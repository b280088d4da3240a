//! The workspace's walls, checked (#51): Cargo refuses an import from a crate above (each crate
//! depends only on the crates listed before it in `crates/README.md`), and this module refuses
//! what Cargo cannot see: an import circle between the modules of one folder, at every depth of
//! every crate (`a` uses `b` and `b` uses `a`, directly or around a longer loop).
//!
//! A module's imports are the `crate::…` and `super::…` paths of its code (comments and its
//! `#[cfg(test)]` part left out); an import of `crate::a::b::c` from `crate::a::d` is an edge
//! from `d` to `b` inside folder `a`.
use crate::common::root;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The workspace's crates, lowest first, and the crates each may depend on.
const CRATES: [(&str, &[&str]); 7] = [
    ("build", &[]),
    ("core", &[]),
    ("metrics", &["core"]),
    ("torch", &["core", "build"]),
    ("train", &["core", "metrics", "torch", "build"]),
    ("eval", &["core", "metrics", "torch", "build"]),
    ("tasks", &["core", "metrics", "torch", "train", "eval", "build"]),
];

/// Module path (inside its crate) of a source file: `src/a/b.rs` and `src/a/b/mod.rs` are `[a, b]`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_string());
    }
    parts
}

/// The code of a file without comments and without its `#[cfg(test)]` tail.
fn code(text: &str) -> String {
    let text = text.split("\n#[cfg(test)]").next().unwrap();
    text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

/// The absolute module paths a module's code names (`crate::a::b`, `super::c`), each cut to its
/// lowercase segments (the module part of the path).
fn imports(module: &[String], code: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let bytes = code.as_bytes();
    for start in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(i) = code[from..].find(start).map(|i| i + from) {
            from = i + start.len();
            if i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_' || bytes[i - 1] == b'$') {
                continue;
            }
            let rest: String =
                code[i..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':').collect();
            let mut segments: Vec<&str> = rest.split("::").filter(|s| !s.is_empty()).collect();
            let mut path: Vec<String> = if segments[0] == "crate" {
                segments.remove(0);
                Vec::new()
            } else {
                // `super` is the parent of the module the code is in (a file or a folder's mod.rs).
                let mut base = module.to_vec();
                while segments.first() == Some(&"super") {
                    segments.remove(0);
                    base.pop();
                }
                base
            };
            for s in segments {
                if s.chars().next().is_some_and(|c| c.is_ascii_lowercase()) {
                    path.push(s.to_string());
                } else {
                    break;
                }
            }
            found.push(path);
        }
    }
    found
}

/// Every circle among the children of one folder of one crate, as `crate: a -> b -> a`.
fn circles(krate: &str) -> Vec<String> {
    let src = root().join("crates").join(krate).join("src");
    let mut files = Vec::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "rs") {
                files.push(p);
            }
        }
    }
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(&src, f)).collect();
    // folder -> child -> children it uses
    let mut edges: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for file in &files {
        let module = module_of(&src, file);
        for mut target in imports(&module, &code(&std::fs::read_to_string(file).unwrap())) {
            // Cut the path to a module that exists (the rest names items).
            while !target.is_empty() && !modules.contains(&target) {
                target.pop();
            }
            let common = module.iter().zip(&target).take_while(|(a, b)| a == b).count();
            if common == module.len() || common == target.len() {
                continue; // a module using its own parent or child is not an edge between siblings
            }
            let folder = module[..common].to_vec();
            edges.entry(folder).or_default().entry(module[common].clone()).or_default().insert(target[common].clone());
        }
    }
    let mut found = Vec::new();
    for (folder, graph) in &edges {
        for circle in find_circles(graph) {
            let place = if folder.is_empty() { krate.to_string() } else { format!("{krate}::{}", folder.join("::")) };
            found.push(format!("{place}: {}", circle.join(" -> ")));
        }
    }
    found
}

/// The circles of a directed graph, one per strongly connected component of more than one node,
/// shown as one loop through it.
fn find_circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let nodes: BTreeSet<&String> = graph.keys().chain(graph.values().flatten()).collect();
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from];
        while let Some(n) = todo.pop() {
            for m in graph.get(n).into_iter().flatten() {
                if seen.insert(m) {
                    todo.push(m);
                }
            }
        }
        seen
    };
    let mut out = Vec::new();
    let mut done: BTreeSet<&String> = BTreeSet::new();
    for n in &nodes {
        if done.contains(n) {
            continue;
        }
        let from_n = reach(n);
        if !from_n.contains(n) {
            continue;
        }
        let component: Vec<String> =
            nodes.iter().filter(|m| from_n.contains(*m) && reach(m).contains(n)).map(|m| m.to_string()).collect();
        for m in &component {
            done.insert(nodes.iter().find(|x| **x == m).unwrap());
        }
        let mut circle = component.clone();
        circle.push(component[0].clone());
        out.push(circle);
    }
    out
}

/// No folder of any crate has modules that use each other: a folder's modules form layers too
/// (#51 removed the last two circles, IndoMMLU <-> the scorer and IndoMMLU's causal scorer <-> its
/// report).
#[test]
fn no_module_of_any_crate_imports_in_a_circle() {
    let found: Vec<String> = CRATES.iter().filter(|(k, _)| *k != "build").flat_map(|(k, _)| circles(k)).collect();
    assert!(found.is_empty(), "import circles (a folder's modules that use each other): {found:?}");
}

#[test]
fn a_circle_is_found() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("scorer".to_string(), ["indommlu".to_string()].into()),
        ("indommlu".to_string(), ["pll".to_string(), "scorer".to_string()].into()),
        ("pll".to_string(), BTreeSet::new()),
    ]
    .into();
    assert_eq!(find_circles(&graph), vec![vec!["indommlu".to_string(), "scorer".to_string(), "indommlu".to_string()]]);
    let module = vec!["indommlu".to_string(), "causal".to_string()];
    let paths = imports(&module, "use super::report::x;\nuse crate::pll::SentenceScore;\nlet y = $crate::a;");
    let expected: Vec<Vec<String>> = vec![vec!["pll".into()], vec!["indommlu".into(), "report".into(), "x".into()]];
    assert_eq!(paths, expected, "crate:: and super:: paths to modules; $crate:: is a macro's");
}

#[test]
fn each_crate_depends_only_on_the_crates_below_it() {
    for (krate, allowed) in CRATES {
        let manifest = std::fs::read_to_string(root().join("crates").join(krate).join("Cargo.toml")).unwrap();
        let table: toml::Table = manifest.parse().unwrap();
        for section in ["dependencies", "build-dependencies", "dev-dependencies"] {
            for name in table.get(section).and_then(|t| t.as_table()).into_iter().flat_map(|t| t.keys()) {
                if let Some(other) = name.strip_prefix("indolm-") {
                    assert!(allowed.contains(&other), "indolm-{krate} depends on indolm-{other} ({section})");
                }
            }
        }
    }
}
