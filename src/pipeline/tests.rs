//! Incrementality of the pipeline queries: record which queries execute
//! after each kind of edit.

use super::*;
use crate::db::{Database, MemoryFs};
use camino::Utf8Path;

const PROJECT: &str = r#"
[project]
name = "two-layers"
target = "ipu21"
tiles = 8
seed = 1

[[tensor]]
name = "x"
shape = [32, 64]
dtype = "f16"
role = "input"

[[tensor]]
name = "w1"
shape = [64, 64]
dtype = "f16"
role = "weight"

[[tensor]]
name = "w2"
shape = [64, 64]
dtype = "f16"
role = "weight"

[[op]]
name = "h"
op = "matmul"
inputs = ["x", "w1"]
dtype = "f16"

[[op]]
name = "a"
op = "gelu"
inputs = ["h"]

[[op]]
name = "y"
op = "matmul"
inputs = ["a", "w2"]
dtype = "f16"

[check]
reference_precision = "device"
min_cosine_similarity = 0.99
max_abs_error = 0.1
outputs = ["y"]
"#;

const PATH: &str = "p/two-layers.toml";

/// An in-memory file system with the crate's kernel sources under
/// `device/` (where `p/*.toml` projects find them).
fn with_kernels() -> MemoryFs {
    let fs = MemoryFs::new();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("device");
    for dir in [root.clone(), root.join("include")] {
        for entry in std::fs::read_dir(&dir).expect("device directory") {
            let path = entry.expect("entry").path();
            if path.is_file() {
                let relative = path
                    .strip_prefix(env!("CARGO_MANIFEST_DIR"))
                    .expect("inside");
                let text = std::fs::read_to_string(&path).expect("kernel source");
                fs.write(relative.to_str().expect("utf-8"), &text);
            }
        }
    }
    fs
}

fn built() -> (Database, MemoryFs, SourceFile) {
    let fs = with_kernels();
    fs.write(PATH, PROJECT);
    let db = Database::new(Arc::new(fs.clone()));
    let file = db.file(Utf8Path::new(PATH));
    build_all(&db, file);
    (db, fs, file)
}

fn build_all(db: &Database, file: SourceFile) {
    let placed = placement(db, file);
    assert!(placed.is_ok(), "{placed:?}");
    let phases = program(db, file).as_ref().map_or(0, |p| p.phases.len());
    for phase in 0..phases as u32 {
        assert!(phase_schedule(db, file, phase).is_some());
    }
}

/// Query names (without ids) executed after `edit`, in order.
fn executed_after(db: &mut Database, fs: &MemoryFs, file: SourceFile, edit: &str) -> Vec<String> {
    fs.write(PATH, edit);
    db.refresh_file(Utf8Path::new(PATH));
    db.execution_log().start();
    build_all(db, file);
    db.execution_log()
        .take()
        .into_iter()
        .map(|q| q.split('(').next().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn identical_operations_share_one_plan() {
    let (db, _, file) = built();
    let graph = graph(&db, file).unwrap();
    assert_eq!(graph.ops.len(), 3);
    // h and y have the same signature: two matmuls plus one gelu.
    let signatures: std::collections::HashSet<_> =
        op_signatures(&db, file).iter().cloned().collect();
    assert_eq!(signatures.len(), 2);
}

#[test]
fn a_comment_edit_stops_after_validation() {
    let (mut db, fs, file) = built();
    let executed = executed_after(&mut db, &fs, file, &format!("# note\n{PROJECT}"));
    assert_eq!(executed, ["project_graph"]);
}

#[test]
fn a_shape_edit_replans_only_the_changed_signature() {
    let (mut db, fs, file) = built();
    let edited = PROJECT.replace(
        "name = \"w2\"\nshape = [64, 64]",
        "name = \"w2\"\nshape = [64, 128]",
    );
    let executed = executed_after(&mut db, &fs, file, &edited);
    let plans = executed.iter().filter(|q| *q == "operator_plans").count();
    assert_eq!(plans, 1, "{executed:?}");
    assert!(executed.contains(&"program".to_string()));
}

#[test]
fn a_revert_reuses_the_earlier_plans() {
    let (mut db, fs, file) = built();
    let edited = PROJECT.replace("shape = [32, 64]", "shape = [48, 64]");
    executed_after(&mut db, &fs, file, &edited);
    let executed = executed_after(&mut db, &fs, file, PROJECT);
    assert!(
        !executed.contains(&"operator_plans".to_string()),
        "{executed:?}"
    );
}

#[test]
fn a_project_that_cannot_fit_reports_the_placement_shortfall() {
    let fs = with_kernels();
    fs.write(
        PATH,
        &PROJECT
            .replace("tiles = 8", "tiles = 1")
            .replace("[64, 64]", "[64, 4096]")
            .replace(
                "name = \"w2\"\nshape = [64, 4096]",
                "name = \"w2\"\nshape = [4096, 64]",
            ),
    );
    let db = Database::new(Arc::new(fs));
    let file = db.file(Utf8Path::new(PATH));
    match placement(&db, file) {
        Err(BuildError::Placement(error)) => {
            assert_eq!(error.tile, 0);
            assert!(error.over > 0);
            assert!(error.to_string().contains("try more tiles"));
        }
        other => panic!("expected a placement error, got {other:?}"),
    }
}

#[test]
fn tile_images_hold_supervisor_routines_for_each_step_and_the_kernels_they_run() {
    let (db, _, file) = built();
    let images = tile_images(&db, file).clone().expect("images");
    let tile0 = images
        .iter()
        .find(|i| i.tile == 0)
        .expect("tile 0 runs code");
    let mut kernels = tile0.kernels.clone();
    kernels.sort();
    assert_eq!(kernels.len(), 2, "{kernels:?}");
    assert!(
        kernels.iter().any(|k| k.starts_with("gemm_f16")),
        "{kernels:?}"
    );
    assert!(kernels.contains(&"gelu_f16".to_string()), "{kernels:?}");
    // Three compute steps: both matmuls and the GELU.
    assert_eq!(tile0.entries.len(), 3);
    let code = tile0.segments.iter().find(|s| s.code).expect("code");
    let first = crate::isa::disassemble(&code.bytes, code.address);
    assert!(first.iter().any(|l| l.text.starts_with("runall")));
}
