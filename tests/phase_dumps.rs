//! Snapshot tests of every phase's text dump (`ipub build --emit …`) on
//! small projects in `tests/data/dumps/`. A dump that changes fails with the
//! differing lines; re-record with
//! `UPDATE_EXPECT=1 cargo test --test phase_dumps` after checking the
//! change is intended (the one way every snapshot here is blessed).

use camino::Utf8PathBuf;
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

fn dumps_match(project: &str) {
    let db = Database::new(Arc::new(OsFs));
    let file = db.file(&data().join(format!("{project}.toml")));
    for (name, emit) in IRS {
        let text = dump(&db, file, emit);
        assert!(!text.is_empty(), "{project}: the {name} dump is empty");
        expect_test::expect_file![data().join(format!("{project}.{name}.txt")).as_std_path()]
            .assert_eq(&text);
    }
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
