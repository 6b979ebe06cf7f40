//! The crate's modules form layers: no module reaches, directly or through
//! others, back into a module that depends on it. Read from the source's
//! own paths (`crate::x`, `super::y`), without test code, this checks two
//! graphs: the top-level modules of `src/` (a file or a folder each), and
//! the sibling files inside each folder (`mod.rs` being the folder's face,
//! which its files may use). A cycle fails with the edges that close it
//! and the items each edge names. It also holds the count of `pub` items
//! to a ceiling (below).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A graph: module -> module it uses -> the first few paths that show it.
type Graph = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("source directory") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The file's code without its comments and its test modules: what ships.
fn shipped_code(text: &str) -> String {
    let mut code = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]") {
            // A test module runs to the end of the file by convention; a
            // single test item (`#[cfg(test)] fn …`) ends at its own line.
            if lines
                .peek()
                .is_some_and(|l| l.trim_start().starts_with("mod "))
            {
                break;
            }
            continue;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        code.push_str(line.split(" //").next().unwrap_or(line));
        code.push('\n');
    }
    code
}

/// Every path that starts with `prefix` (`crate::` or `super::`) in `code`,
/// with brace groups expanded one level: `crate::{a, b::c}` gives `a` and
/// `b::c`.
fn paths_after(code: &str, prefix: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().last();
        rest = &rest[at + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = matching_brace(group);
            for item in split_top_level(&group[..end]) {
                paths.push(item.trim().to_string());
            }
            continue;
        }
        let path: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        paths.push(path);
    }
    paths
}

fn matching_brace(text: &str) -> usize {
    let mut depth = 0;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return i,
            '}' => depth -= 1,
            _ => {}
        }
    }
    text.len()
}

fn split_top_level(text: &str) -> Vec<&str> {
    let (mut items, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&text[start..]);
    items
}

fn first_segment(path: &str) -> &str {
    path.split("::").next().unwrap_or(path).trim()
}

fn add(graph: &mut Graph, from: &str, to: &str, shown_by: &str) {
    if from == to || to.is_empty() {
        return;
    }
    let shown = graph
        .entry(from.to_string())
        .or_default()
        .entry(to.to_string())
        .or_default();
    if shown.len() < 3 {
        shown.insert(shown_by.to_string());
    }
    graph.entry(to.to_string()).or_default();
}

/// The graphs of the crate: top-level modules, and siblings per folder.
fn graphs() -> (Graph, BTreeMap<String, Graph>) {
    let root = src();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let top_level: BTreeSet<String> = std::fs::read_dir(&root)
        .expect("src")
        .map(|e| e.expect("entry").path())
        .filter_map(|p| Some(p.file_stem()?.to_str()?.to_string()))
        .filter(|name| name != "lib" && name != "main")
        .collect();
    let mut modules = Graph::new();
    let mut folders: BTreeMap<String, Graph> = BTreeMap::new();
    for file in &files {
        let relative = file.strip_prefix(&root).expect("under src");
        let parts: Vec<String> = relative
            .iter()
            .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
            .collect();
        if parts[0] == "lib" || parts[0] == "main" || parts.last().is_some_and(|p| p == "tests") {
            continue;
        }
        let code = shipped_code(&std::fs::read_to_string(file).expect("source"));
        let module = &parts[0];
        for path in paths_after(&code, "crate::") {
            let used = first_segment(&path);
            if top_level.contains(used) {
                add(&mut modules, module, used, &format!("crate::{path}"));
            }
        }
        // Siblings inside a folder: `super::x` from a file that is not the
        // folder's `mod.rs`.
        if parts.len() >= 2 && parts.last().is_some_and(|p| p != "mod") {
            let folder = parts[..parts.len() - 1].join("/");
            let dir = root.join(&folder);
            let name = parts.last().expect("file").clone();
            let graph = folders.entry(folder.clone()).or_default();
            graph.entry(name.clone()).or_default();
            for path in paths_after(&code, "super::") {
                let used = first_segment(&path);
                let sibling = dir.join(format!("{used}.rs")).exists() || dir.join(used).is_dir();
                if sibling {
                    add(graph, &name, used, &format!("super::{path}"));
                }
            }
            let own = format!("crate::{}::", parts[..parts.len() - 1].join("::"));
            for path in paths_after(&code, &own) {
                let used = first_segment(&path);
                if dir.join(format!("{used}.rs")).exists() || dir.join(used).is_dir() {
                    add(graph, &name, used, &format!("{own}{path}"));
                }
            }
        }
    }
    (modules, folders)
}

/// The strongly connected components of more than one module (Tarjan).
fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    struct State<'a> {
        graph: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph[v].keys() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !state.index.contains_key(v.as_str()) {
            visit(&mut state, v);
        }
    }
    state.found
}

fn describe(graph: &Graph, component: &[String]) -> String {
    let members: BTreeSet<&String> = component.iter().collect();
    let mut text = format!("cycle: {}\n", component.join(", "));
    for from in component {
        for (to, shown) in &graph[from] {
            if members.contains(to) {
                let shown: Vec<&str> = shown.iter().map(String::as_str).collect();
                text.push_str(&format!("  {from} -> {to}: {}\n", shown.join(", ")));
            }
        }
    }
    text
}

#[test]
fn top_level_modules_form_layers() {
    let (modules, _) = graphs();
    assert!(modules.len() > 20, "the reader found the modules");
    assert!(
        modules["pipeline"].contains_key("plan") && modules["lower"].contains_key("graph"),
        "the reader sees `crate::` paths"
    );
    let found: Vec<String> = cycles(&modules)
        .iter()
        .map(|c| describe(&modules, c))
        .collect();
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn files_inside_each_folder_form_layers() {
    let (_, folders) = graphs();
    assert!(
        folders["lower"]
            .get("view")
            .is_some_and(|uses| uses.contains_key("layout")),
        "the reader sees `super::` paths"
    );
    let found: Vec<String> = folders
        .iter()
        .flat_map(|(folder, graph)| {
            cycles(graph)
                .into_iter()
                .map(move |c| format!("in src/{folder}/: {}", describe(graph, &c)))
        })
        .collect();
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The planner chooses; it does not lower, schedule or build: those come
/// after it, and refinement (which lowers an operation alone) lives in the
/// pipeline.
#[test]
fn the_planner_does_not_reach_into_later_phases() {
    let (modules, _) = graphs();
    let later = ["lower", "schedule", "place", "emit", "pipeline", "package"];
    let reached: Vec<&String> = modules["plan"]
        .keys()
        .filter(|m| later.contains(&m.as_str()))
        .collect();
    assert!(reached.is_empty(), "plan uses {reached:?}");
}

// The library's public face stays narrow: an item is `pub` only when the
// binary, the integration tests, the benches or the fuzz targets use it,
// and `pub(crate)` otherwise. Read from the source like the layers above,
// this counts the items declared plain `pub` in `src/` and fails when the
// count grows past the ceiling, so a new item starts crate-private unless
// it must not. When a change narrows more, lower the ceiling with it.

/// How many plain `pub` items `src/` may declare.
const CEILING: usize = 417;

/// The item keywords a `pub` item declaration starts with.
const ITEM_KEYWORDS: &[&str] = &[
    "fn", "struct", "enum", "mod", "const", "type", "trait", "static", "use", "unsafe", "async",
    "extern", "union",
];

/// Whether `line` declares a plain `pub` item (not `pub(crate)`, not a
/// field, which has no item keyword).
fn declares_pub_item(line: &str) -> bool {
    line.trim_start()
        .strip_prefix("pub ")
        .and_then(|rest| rest.split_whitespace().next())
        .is_some_and(|word| ITEM_KEYWORDS.contains(&word))
}

/// Each file of `src/` with its plain `pub` items, most first.
fn pub_items() -> Vec<(usize, String)> {
    let src = src();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut counts: Vec<(usize, String)> = files
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path).expect("source file");
            let count = text.lines().filter(|l| declares_pub_item(l)).count();
            let name = path.strip_prefix(&src).unwrap_or(path);
            (count, name.display().to_string())
        })
        .filter(|(count, _)| *count > 0)
        .collect();
    counts.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    counts
}

#[test]
fn the_reader_tells_pub_items_from_restricted_ones() {
    assert!(declares_pub_item("pub mod cli;"));
    assert!(declares_pub_item(
        "    pub fn load(package: Arc<Package>) {"
    ));
    assert!(declares_pub_item(
        "pub const fn name(self) -> &'static str {"
    ));
    assert!(!declares_pub_item(
        "pub(crate) fn align(value: u32) -> u32 {"
    ));
    assert!(!declares_pub_item("    pub path: Utf8PathBuf,"));
    assert!(!declares_pub_item("/// pub fn in a comment"));
}

#[test]
fn public_items_do_not_grow() {
    let counts = pub_items();
    let total: usize = counts.iter().map(|(count, _)| count).sum();
    assert!(
        counts.iter().any(|(_, file)| file == "lib.rs"),
        "the reader sees the crate root's modules"
    );
    let most: Vec<String> = counts
        .iter()
        .take(10)
        .map(|(count, file)| format!("  {count:4} {file}"))
        .collect();
    assert!(
        total <= CEILING,
        "src/ declares {total} `pub` items, more than the ceiling of {CEILING}: make the new \
         ones `pub(crate)` unless code outside the library uses them. The files with most:\n{}",
        most.join("\n")
    );
}
