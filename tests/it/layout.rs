//! The layering of `src/`, checked from the source text: which top-level module each
//! file's `crate::` paths reach. The core (`src/core/`, holding `Tracker`) reaches
//! nothing but itself and `record.rs`, not even in its doc links; and no two top-level
//! modules reach each other in a circle, nor two modules one level below (`format::edit`,
//! `core::calls`: `crate::`, `super::` and `self::` paths, a parent and its own
//! children aside). Paths in comments count for the core (a doc link upward is a
//! dependency a reader follows) but not for the circle checks, where docs may point
//! either way.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The crate's top-level modules (a file or a folder under `src/`).
const MODULES: [&str; 9] = [
    "core", "record", "snapshot", "compact", "policy", "stream", "format", "testing", "lib",
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("src is readable") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file under `src/` belongs to.
fn module_of(path: &Path) -> String {
    let rel = path.strip_prefix(src()).expect("under src");
    let first = rel.components().next().expect("a component");
    let name = first.as_os_str().to_string_lossy();
    name.trim_end_matches(".rs").to_owned()
}

/// The root's re-exported names and the module each comes from, read from `lib.rs`'s
/// `pub use` items (`pub use crate::core::{A, B};`, `pub use record::{C};`).
fn root_names() -> BTreeMap<String, String> {
    let lib = fs::read_to_string(src().join("lib.rs")).expect("lib.rs");
    let mut names = BTreeMap::new();
    let mut rest = lib.as_str();
    while let Some(at) = rest.find("pub use ") {
        rest = &rest[at + "pub use ".len()..];
        let end = rest.find(';').expect("a use item ends");
        let item = rest[..end].trim_start_matches("crate::");
        let (module, list) = item.split_once("::").expect("module::names");
        for name in list.trim_matches(|c| c == '{' || c == '}').split(',') {
            let name = name.trim();
            if !name.is_empty() {
                names.insert(name.to_owned(), module.to_owned());
            }
        }
        rest = &rest[end..];
    }
    names
}

/// The modules a piece of source text reaches through `crate::` paths.
fn reached(text: &str, roots: &BTreeMap<String, String>, file: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        let after = &rest[at + "crate::".len()..];
        rest = after;
        // A braced list (`crate::{A, b::C}`): the first name of each item, at depth 1.
        let idents: Vec<String> = match after.strip_prefix('{') {
            Some(list) => {
                let mut depth = 1;
                let mut names = Vec::new();
                let mut start_of_item = true;
                for (i, c) in list.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 1 => break,
                        '}' => depth -= 1,
                        ',' if depth == 1 => start_of_item = true,
                        c if start_of_item && depth == 1 && (c.is_alphanumeric() || c == '_') => {
                            names.push(leading_ident(&list[i..]));
                            start_of_item = false;
                        }
                        _ => {}
                    }
                }
                names
            }
            None => vec![leading_ident(after)],
        };
        for ident in idents {
            let target = if MODULES.contains(&ident.as_str()) {
                ident
            } else if let Some(module) = roots.get(&ident) {
                module.clone()
            } else {
                panic!(
                    "{}: `crate::{ident}` names neither a top-level module nor a root re-export",
                    file.display()
                );
            };
            out.insert(target);
        }
    }
    out
}

/// The identifier `text` starts with.
fn leading_ident(text: &str) -> String {
    text.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// A file's text without its comment lines (`//`, `///`, `//!`).
fn code_only(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_core_reaches_nothing_above_it_and_no_modules_form_a_circle() {
    let roots = root_names();
    assert!(
        roots.get("Tracker").is_some_and(|m| m == "core"),
        "lib.rs re-exports Tracker from the core: {roots:?}"
    );
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.sort();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let module = module_of(file);
        assert!(
            MODULES.contains(&module.as_str()),
            "{}: a top-level module this test does not know ({module}); add it",
            file.display()
        );
        let text = fs::read_to_string(file).expect("a source file");
        if module == "core" || module == "record" {
            let reached = reached(&text, &roots, file);
            let upward: Vec<&String> = reached
                .iter()
                .filter(|m| !["core", "record"].contains(&m.as_str()))
                .collect();
            assert!(
                upward.is_empty(),
                "{} ({module}) reaches {upward:?}: the core may reach only itself and record.rs",
                file.display()
            );
        }
        let to = edges.entry(module.clone()).or_default();
        for target in reached(&code_only(&text), &roots, file) {
            if target != module && module != "lib" {
                to.insert(target);
            }
        }
    }
    // Depth-first search for a circle, naming it when found.
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) {
        if let Some(i) = path.iter().position(|p| p == node) {
            panic!("import circle: {} -> {node}", path[i..].join(" -> "));
        }
        if done.contains(node) {
            return;
        }
        path.push(node.to_owned());
        for next in edges.get(node).into_iter().flatten() {
            visit(next, edges, path, done);
        }
        path.pop();
        done.insert(node.to_owned());
    }
    let mut done = BTreeSet::new();
    for node in edges.keys() {
        visit(node, &edges, &mut Vec::new(), &mut done);
    }
    // The layers the docs describe, so a change to them is a change to this test too.
    let want: [(&str, &[&str]); 6] = [
        ("compact", &["core", "record"]),
        ("policy", &["compact", "core", "record"]),
        ("stream", &["compact", "core", "format", "record"]),
        ("format", &["compact", "core", "record"]),
        ("snapshot", &["core"]),
        ("testing", &["core", "format", "record"]),
    ];
    for (module, allowed) in want {
        let reached = edges.get(module).cloned().unwrap_or_default();
        let extra: Vec<&String> = reached
            .iter()
            .filter(|m| !allowed.contains(&m.as_str()))
            .collect();
        assert!(
            extra.is_empty(),
            "{module} reaches {extra:?} beyond its layer {allowed:?}"
        );
    }
}

#[test]
fn the_scanner_sees_through_paths_and_ignores_comments() {
    let roots = BTreeMap::from([("Tracker".to_owned(), "core".to_owned())]);
    let file = Path::new("x.rs");
    let text = "use crate::compact::Log;\n/// [`x`](crate::format::Transcript)\nfn f(_: crate::Tracker) {}";
    assert_eq!(
        reached(text, &roots, file),
        BTreeSet::from(["compact".into(), "format".into(), "core".into()])
    );
    assert_eq!(
        reached(
            "use crate::{policy::X, Tracker, stream::{A, B}};",
            &roots,
            file
        ),
        BTreeSet::from(["policy".into(), "core".into(), "stream".into()])
    );
    assert_eq!(
        reached(&code_only(text), &roots, file),
        BTreeSet::from(["compact".into(), "core".into()])
    );
}

/// The module path of a file under `src/` (`stream/decode/sse.rs` is `stream::decode::sse`,
/// `format/mod.rs` is `format`, `lib.rs` is the root, empty).
fn module_path(path: &Path) -> Vec<String> {
    let rel = path.strip_prefix(src()).expect("under src");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| {
            c.as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_owned()
        })
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// The `crate::`, `super::` and `self::` paths of `text`, resolved from `module` to
/// absolute module paths (braced lists split into their items; the path is cut at the
/// deepest module of `known`).
fn reached_modules(
    text: &str,
    module: &[String],
    known: &BTreeSet<Vec<String>>,
) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < text.len() {
        let rest = &text[i..];
        let start = ["crate::", "super::", "self::"]
            .iter()
            .find(|p| rest.starts_with(**p))
            .filter(|_| {
                i == 0
                    || !(bytes[i - 1].is_ascii_alphanumeric()
                        || bytes[i - 1] == b'_'
                        || bytes[i - 1] == b':')
            });
        let Some(start) = start else {
            i += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        };
        // The base the path starts from, then its `::`-separated names.
        let mut base: Vec<String> = match *start {
            "crate::" => Vec::new(),
            "self::" => module.to_vec(),
            _ => module[..module.len().saturating_sub(1)].to_vec(),
        };
        let mut tail = &rest[start.len()..];
        while let Some(t) = tail.strip_prefix("super::") {
            base.pop();
            tail = t;
        }
        let mut prefixes = vec![(base, tail)];
        while let Some((mut path, tail)) = prefixes.pop() {
            if let Some(list) = tail.strip_prefix('{') {
                // Each item of a braced list, at depth 1.
                let (mut depth, mut item_start) = (1, 0);
                for (k, c) in list.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' | ',' if depth == 1 => {
                            prefixes.push((path.clone(), list[item_start..k].trim_start()));
                            item_start = k + 1;
                            if c == '}' {
                                break;
                            }
                        }
                        '}' => depth -= 1,
                        _ => {}
                    }
                }
                continue;
            }
            let mut rest = tail;
            loop {
                let name = leading_ident(rest);
                if name.is_empty() {
                    break;
                }
                path.push(name.clone());
                rest = &rest[name.len()..];
                match rest.strip_prefix("::") {
                    Some(r) if r.starts_with('{') => {
                        prefixes.push((path.clone(), r));
                        break;
                    }
                    Some(r) => rest = r,
                    None => break,
                }
            }
            while !path.is_empty() && !known.contains(&path) {
                path.pop();
            }
            out.push(path);
        }
        i += start.len();
    }
    out
}

#[test]
fn no_two_modules_one_level_below_the_top_form_a_circle() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.sort();
    let known: BTreeSet<Vec<String>> = files.iter().map(|f| module_path(f)).collect();
    // Each file and each path it reaches, at most two levels deep; a module and its own
    // parent or children are not an edge (a parent declares its children and
    // re-exports from them).
    let two = |p: &[String]| p.iter().take(2).cloned().collect::<Vec<_>>().join("::");
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let module = module_path(file);
        let text = fs::read_to_string(file).expect("a source file");
        let from = two(&module);
        for target in reached_modules(&code_only(&text), &module, &known) {
            let to = two(&target);
            let related = from == to
                || from.is_empty()
                || to.is_empty()
                || to.starts_with(&format!("{from}::"))
                || from.starts_with(&format!("{to}::"));
            if !related {
                edges.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    let mut done = BTreeSet::new();
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) {
        if let Some(i) = path.iter().position(|p| p == node) {
            panic!("import circle: {} -> {node}", path[i..].join(" -> "));
        }
        if done.contains(node) {
            return;
        }
        path.push(node.to_owned());
        for next in edges.get(node).into_iter().flatten() {
            visit(next, edges, path, done);
        }
        path.pop();
        done.insert(node.to_owned());
    }
    for node in edges.keys() {
        visit(node, &edges, &mut Vec::new(), &mut done);
    }
    // The scanner sees what it must: the writer reaches the one builder and the shapes.
    assert!(
        edges["format::edit"].contains("format::build"),
        "{:?}",
        edges["format::edit"]
    );
    assert!(
        edges["format::edit"].contains("format::shape"),
        "{:?}",
        edges["format::edit"]
    );
}

#[test]
fn the_module_scanner_resolves_super_self_and_braced_lists() {
    let known: BTreeSet<Vec<String>> = [
        vec![],
        vec!["format".to_owned()],
        vec!["format".to_owned(), "edit".to_owned()],
        vec!["format".to_owned(), "build".to_owned()],
        vec!["format".to_owned(), "live".to_owned()],
        vec!["format".to_owned(), "live".to_owned(), "sse".to_owned()],
        vec!["core".to_owned()],
    ]
    .into();
    let module = vec!["format".to_owned(), "live".to_owned(), "sse".to_owned()];
    let text = "use super::super::{build::X, edit};\nuse self::y;\nfn f(_: crate::core::Z) {}\nuse super::{At, Y};";
    let got: BTreeSet<String> = reached_modules(text, &module, &known)
        .into_iter()
        .map(|p| p.join("::"))
        .collect();
    assert_eq!(
        got,
        BTreeSet::from([
            "format::build".to_owned(),
            "format::edit".to_owned(),
            "format::live::sse".to_owned(),
            "core".to_owned(),
            "format::live".to_owned(),
        ])
    );
}
