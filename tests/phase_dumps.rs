//! Snapshot tests of every phase's text dump (`ipub build --emit …`) on
//! small projects in `tests/data/dumps/`. A dump that changes fails with the
//! first differing lines; re-record with
//! `UPDATE_SNAPSHOTS=1 cargo test --test phase_dumps` after checking the
//! change is intended.

use camino::{Utf8Path, Utf8PathBuf};
use ipub::cli::build::{dump, Emit};
use ipub::db::{Database, Db};
use ipub::vfs::OsFs;
use std::sync::Arc;

const IRS: [(&str, Emit); 6] = [
    ("graph", Emit::Graph),
    ("plan", Emit::Plan),
    ("shards", Emit::Shards),
    ("exchanges", Emit::Exchanges),
    ("placement", Emit::Placement),
    ("tile0", Emit::Tile(0)),
];

fn data() -> Utf8PathBuf {
    Utf8PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/dumps")
}

/// Compares `actual` with the snapshot file, or records it.
fn check(snapshot: &Utf8Path, actual: &str) -> Result<(), String> {
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(snapshot, actual).map_err(|e| format!("{snapshot}: {e}"))?;
        return Ok(());
    }
    let expected = std::fs::read_to_string(snapshot)
        .map_err(|e| format!("{snapshot}: {e} (record it with UPDATE_SNAPSHOTS=1)"))?;
    if expected == actual {
        return Ok(());
    }
    let (e, a): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    let first = e
        .iter()
        .zip(&a)
        .position(|(x, y)| x != y)
        .unwrap_or(e.len().min(a.len()));
    let window = |lines: &[&str]| {
        lines
            .iter()
            .skip(first)
            .take(5)
            .map(|l| format!("    {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    Err(format!(
        "{snapshot} differs from line {}:\n  expected ({} lines):\n{}\n  actual ({} lines):\n{}",
        first + 1,
        e.len(),
        window(&e),
        a.len(),
        window(&a)
    ))
}

fn dumps_match(project: &str) {
    let db = Database::new(Arc::new(OsFs));
    let file = db.file(&data().join(format!("{project}.toml")));
    let failures: Vec<String> = IRS
        .iter()
        .filter_map(|(name, emit)| {
            let text = dump(&db, file, *emit);
            assert!(!text.is_empty(), "{project}: the {name} dump is empty");
            check(&data().join(format!("{project}.{name}.txt")), &text).err()
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn mlp_small_dumps() {
    dumps_match("mlp-small");
}

#[test]
fn fp8_repeat_dumps() {
    dumps_match("fp8-repeat");
}

#[test]
fn split_inner_dimension_dumps() {
    dumps_match("ksplit-small");
}

#[test]
fn swapped_orientation_dumps() {
    dumps_match("swapped-small");
}
