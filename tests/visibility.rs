//! The library's public face stays narrow: an item is `pub` only when the
//! binary, the integration tests, the benches or the fuzz targets use it,
//! and `pub(crate)` otherwise. Read from the source, this counts the items
//! declared plain `pub` in `src/` and fails when the count grows past the
//! ceiling, so a new item starts crate-private unless it must not. When a
//! change narrows more, lower the ceiling with it.

use std::path::{Path, PathBuf};

/// How many plain `pub` items `src/` may declare.
const CEILING: usize = 458;

/// The item keywords a `pub` item declaration starts with.
const ITEM_KEYWORDS: &[&str] = &[
    "fn", "struct", "enum", "mod", "const", "type", "trait", "static", "use", "unsafe", "async",
    "extern", "union",
];

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
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
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
