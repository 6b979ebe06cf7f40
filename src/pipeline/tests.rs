//! Incrementality of the pipeline queries: record which queries execute
//! after each kind of edit.

use super::*;
use crate::db::{Database, Db};
use crate::vfs::MemoryFs;
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
name = "xa"
op = "gelu"
inputs = ["x"]
dtype = "f16"

[[op]]
name = "h"
op = "matmul"
inputs = ["xa", "w1"]
dtype = "f16"

[[op]]
name = "a"
op = "gelu"
inputs = ["h"]
dtype = "f16"

[[op]]
name = "y"
op = "matmul"
inputs = ["a", "w2"]
dtype = "f16"

[check]
reference_precision = "device"
min_cosine_similarity = 0.99
max_abs_error = 0.1
outputs = ["h", "y"]
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
        assert!(phase_schedule(db, PhaseKey::new(db, file, phase)).is_some());
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
    assert_eq!(graph.ops.len(), 4);
    // h and y have the same signature but that the host alone reads y; the
    // GELUs differ (one reads the streamed input).
    let signatures = op_signatures(&db, file);
    let (h, y) = (&signatures[1], &signatures[3]);
    assert!(!h.unread && y.unread);
    let y_read = OpSignature {
        unread: false,
        ..y.clone()
    };
    assert_eq!(&y_read, h);
    assert_ne!(signatures[0], signatures[2]);
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

/// The project with its hidden width `width`, on one tile.
fn on_one_tile(width: usize) -> String {
    PROJECT
        .replace("tiles = 8", "tiles = 1")
        .replace("[64, 64]", &format!("[64, {width}]"))
        .replace(
            &format!("name = \"w2\"\nshape = [64, {width}]"),
            &format!("name = \"w2\"\nshape = [{width}, 64]"),
        )
}

#[test]
fn weights_beyond_the_tiles_memory_are_refused_before_planning() {
    let fs = with_kernels();
    fs.write(PATH, &on_one_tile(4096));
    let db = Database::new(Arc::new(fs));
    let file = db.file(Utf8Path::new(PATH));
    match crate::pipeline::graph(&db, file) {
        Err(BuildError::Project(diagnostics)) => expect_test::expect!["the project's inputs and weights need 1052672 bytes, more than the 637872 bytes of memory of its 1 tiles"]
            .assert_eq(&diagnostics[0].message),
        other => panic!("expected a project error, got {other:?}"),
    }
}

#[test]
fn a_project_that_cannot_fit_reports_the_placement_shortfall() {
    let fs = with_kernels();
    // The weights fit in the tile's memory, but not beside the activations.
    fs.write(PATH, &on_one_tile(2048));
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
    // The GEMM, the GELU and the rearrange of the operand rows tile 0
    // holds itself.
    assert_eq!(kernels.len(), 3, "{kernels:?}");
    assert!(
        kernels.iter().any(|k| k.starts_with("gemm_f16")),
        "{kernels:?}"
    );
    assert!(kernels.contains(&"gelu_f16".to_string()), "{kernels:?}");
    assert!(
        kernels.contains(&"rearrange_blocks".to_string()),
        "{kernels:?}"
    );
    // Four compute steps: both matmuls and both GELUs.
    assert_eq!(tile0.entries.len(), 4);
    let code = tile0.segments.iter().find(|s| s.code).expect("code");
    let first = crate::isa::disassemble(&code.bytes, code.address);
    assert!(first.iter().any(|l| l.text.starts_with("runall")));
}

/// Builds through the package bytes and returns what the expensive queries
/// computed, as (phase, item).
fn computed_after(
    db: &mut Database,
    fs: &MemoryFs,
    edits: &[(&str, &str)],
    file: SourceFile,
) -> Vec<(&'static str, String)> {
    for (path, text) in edits {
        fs.write(*path, text);
        db.refresh_file(Utf8Path::new(path));
    }
    items::forget(db);
    let bytes = package::package_bytes(db, file);
    assert!(bytes.is_ok(), "{bytes:?}");
    items::recomputed(db)
}

fn emitted_tiles(computed: &[(&'static str, String)]) -> Vec<u32> {
    let mut tiles: Vec<u32> = computed
        .iter()
        .filter(|(phase, _)| *phase == "emit")
        .filter_map(|(_, item)| item.strip_prefix("image of tile ")?.parse().ok())
        .collect();
    tiles.sort_unstable();
    tiles
}

/// The project plus a small independent branch on few tiles, so an edit to
/// it leaves most tiles alone. The branch is a softmax, which keeps its
/// rows whole on a tile each: an elementwise operation would spread its
/// few rows' elements over every tile.
fn with_branch(rows: usize) -> String {
    PROJECT
        .replace(
            "[check]",
            &format!(
            "[[tensor]]\nname = \"z\"\nshape = [{rows}, 8]\ndtype = \"f16\"\nrole = \"input\"\n\n\
             [[op]]\nname = \"b\"\nop = \"softmax\"\ninputs = [\"z\"]\nscale = 1.0\ndtype = \"f16\"\n\n[check]"
        ),
        )
        .replace("outputs = [\"h\", \"y\"]", "outputs = [\"h\", \"y\", \"b\"]")
}

#[test]
fn a_kernel_edit_recompiles_its_variants_and_re_emits_only_the_tiles_that_run_them() {
    let (mut db, fs, file) = built();
    computed_after(&mut db, &fs, &[], file);
    let gelu_tiles: Vec<u32> = tiles::tile_works(&db, file)
        .as_ref()
        .expect("works")
        .iter()
        .filter(|(_, w)| {
            w.kernels().contains(&crate::partition::KernelId::Gelu {
                dtype: crate::graph::DType::F16,
                add: false,
            })
        })
        .map(|(t, _)| *t)
        .collect();
    let source = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("device/gelu_f16.S"),
    )
    .expect("gelu source");
    // Same size, different instructions: the two multiplies swap (x * 0.5
    // is exact, so the results do not change either).
    let swapped = source.replace(
        "        f32v2mul \\x, \\x, $a12:13\n        f32v2mul \\x, \\x, \\t\n",
        "        f32v2mul \\x, \\x, \\t\n        f32v2mul \\x, \\x, $a12:13\n",
    );
    assert_ne!(swapped, source, "the edit applies");
    let before = package::package_bytes(&db, file).clone().expect("bytes");
    let computed = computed_after(&mut db, &fs, &[("device/gelu_f16.S", &swapped)], file);
    let phases: std::collections::BTreeSet<&str> = computed.iter().map(|(p, _)| *p).collect();
    assert_eq!(
        phases.into_iter().collect::<Vec<_>>(),
        ["emit", "kernels", "package"],
        "{computed:?}"
    );
    let kernels: Vec<&String> = computed
        .iter()
        .filter(|(p, _)| *p == "kernels")
        .map(|(_, i)| i)
        .collect();
    assert_eq!(kernels, ["kernel gelu_f16"]);
    assert_eq!(emitted_tiles(&computed), gelu_tiles);
    let after = package::package_bytes(&db, file).clone().expect("bytes");
    assert_ne!(before, after, "the package is rewritten");
}

#[test]
fn a_shape_edit_re_emits_only_tiles_whose_work_changed() {
    let (mut db, fs, file) = built();
    computed_after(&mut db, &fs, &[(PATH, &with_branch(2))], file);
    let works_before = tiles::tile_works(&db, file).clone().expect("works");
    let computed = computed_after(&mut db, &fs, &[(PATH, &with_branch(3))], file);
    let works_after = tiles::tile_works(&db, file).clone().expect("works");
    let changed: Vec<u32> = works_after
        .iter()
        .filter(|(tile, work)| works_before.get(*tile) != Some(*work))
        .map(|(tile, _)| *tile)
        .collect();
    assert!(
        !changed.is_empty() && changed.len() < works_after.len(),
        "the branch runs on a few tiles: {changed:?}"
    );
    assert_eq!(emitted_tiles(&computed), changed, "{computed:?}");
    let plans = computed.iter().filter(|(p, _)| *p == "plan").count();
    assert_eq!(plans, 1, "only the edited op's signature is re-planned");
}

/// [`with_branch`] with the branch's operation first, so that its buffers
/// come first in the program and a change in their number renumbers every
/// other buffer.
fn with_branch_first(rows: usize) -> String {
    let branch =
        "[[op]]\nname = \"b\"\nop = \"softmax\"\ninputs = [\"z\"]\nscale = 1.0\ndtype = \"f16\"\n\n";
    with_branch(rows)
        .replace(branch, "")
        .replacen("[[op]]", &format!("{branch}[[op]]"), 1)
}

#[test]
fn a_shape_edit_re_places_only_tiles_whose_request_changed() {
    let (mut db, fs, file) = built();
    computed_after(&mut db, &fs, &[(PATH, &with_branch_first(2))], file);
    let before = place::place_requests(&db, file).clone().expect("requests");
    let computed = computed_after(&mut db, &fs, &[(PATH, &with_branch_first(3))], file);
    let after = place::place_requests(&db, file).clone().expect("requests");
    let changed: Vec<u32> = after
        .tiles
        .iter()
        .filter(|(tile, request)| before.tiles.get(*tile) != Some(*request))
        .map(|(tile, _)| *tile)
        .collect();
    assert!(
        !changed.is_empty() && changed.len() < after.tiles.len(),
        "the branch runs on a few tiles: {changed:?}"
    );
    let mut placed: Vec<u32> = computed
        .iter()
        .filter(|(phase, _)| *phase == "place")
        .filter_map(|(_, item)| item.strip_prefix("placement of tile ")?.parse().ok())
        .collect();
    placed.sort_unstable();
    assert_eq!(placed, changed, "{computed:?}");
    // The program's buffer ids moved on tiles whose requests (in tile-local
    // terms) stayed equal.
    assert!(
        after
            .globals
            .iter()
            .any(|(tile, ids)| !changed.contains(tile) && before.globals.get(tile) != Some(ids)),
        "the edit renumbers buffers of unchanged tiles"
    );
}

#[test]
fn a_revert_brings_back_earlier_images_and_package_without_recomputing() {
    let (mut db, fs, file) = built();
    computed_after(&mut db, &fs, &[], file);
    let original = package::package_bytes(&db, file).clone().expect("bytes");
    let edited = PROJECT.replace("shape = [32, 64]", "shape = [48, 64]");
    computed_after(&mut db, &fs, &[(PATH, &edited)], file);
    let computed = computed_after(&mut db, &fs, &[(PATH, PROJECT)], file);
    let expensive: Vec<_> = computed
        .iter()
        .filter(|(p, _)| matches!(*p, "plan" | "kernels" | "emit" | "weights"))
        .collect();
    // Salsa keeps one value per query: the reverted plans are recomputed
    // only if they were evicted by the edit; images and weights are the
    // same tiles' work as before, so their queries re-run.
    let reverted = package::package_bytes(&db, file).clone().expect("bytes");
    assert_eq!(original, reverted);
    assert!(
        !expensive.iter().any(|(p, _)| *p == "kernels"),
        "{expensive:?}"
    );
}

/// `count` matrix products of one input by `[2048, cols]` weights, summed:
/// their weights together are what fills the tiles.
fn weight_heavy(count: usize, cols: usize) -> String {
    let mut text = String::from(
        "[project]\nname = \"weights\"\ntarget = \"ipu21\"\ntiles = 4\n\n\
         [[tensor]]\nname = \"x\"\nshape = [64, 2048]\ndtype = \"f16\"\nrole = \"input\"\n",
    );
    for i in 0..count {
        text += &format!(
            "\n[[tensor]]\nname = \"w{i}\"\nshape = [2048, {cols}]\ndtype = \"f16\"\nrole = \"weight\"\n\
             \n[[op]]\nname = \"y{i}\"\nop = \"matmul\"\ninputs = [\"x\", \"w{i}\"]\ndtype = \"f16\"\n"
        );
    }
    let mut sum = "y0".to_string();
    for i in 1..count {
        text += &format!(
            "\n[[op]]\nname = \"s{i}\"\nop = \"add\"\ninputs = [\"{sum}\", \"y{i}\"]\ndtype = \"f16\"\n"
        );
        sum = format!("s{i}");
    }
    text + &format!(
        "\n[check]\nreference_precision = \"device\"\nmin_cosine_similarity = 0.99\n\
         max_abs_error = 0.1\noutputs = [\"{sum}\"]\n"
    )
}

fn fitted(project: &str) -> (Database, SourceFile) {
    let fs = with_kernels();
    fs.write(PATH, project);
    let db = Database::new(Arc::new(fs));
    let file = db.file(Utf8Path::new(PATH));
    (db, file)
}

/// Each product's own plan fits a tile, but together their weights
/// overfill tile 0: the pipeline re-plans them to spread further, and the
/// program it settles on places.
#[test]
fn plans_that_overfill_a_tile_together_are_spread_further_until_they_place() {
    let (db, file) = fitted(&weight_heavy(3, 128));
    let fitted = fitted_program(&db, file).clone().expect("lowers");
    assert!(
        !fitted.attempts.is_empty(),
        "the first plans should not fit"
    );
    assert!(fitted.spreads.iter().any(|&level| level > 0));
    assert_eq!(fitted.unresolved, None);
    let placed = placement(&db, file);
    assert!(placed.is_ok(), "{placed:?}");
    // The plan dump shows the levels the program was planned at.
    let spread = planned_signatures(&db, file)
        .iter()
        .filter(|s| s.spread > 0)
        .count();
    assert!(spread > 0);
}

/// Weights that fit four tiles' memory in total (validation accepts them)
/// but not in the regions and shares a plan can give each tile: placement
/// fails, and the error says re-planning was tried and why it stopped.
#[test]
fn a_program_that_cannot_fit_says_what_was_tried() {
    let (db, file) = fitted(&weight_heavy(2, 256));
    let error = placement(&db, file).clone().expect_err("cannot fit");
    let text = error.to_string();
    assert!(text.contains("already tried"), "{text}");
    assert!(
        text.contains("can spread further") || text.contains("rounds"),
        "{text}"
    );
}

/// `0.0` and `-0.0` are equal to `==` but written differently into the
/// package: an edit between them must rebuild, and the incremental package
/// must equal a clean build's.
#[test]
fn a_sign_of_zero_edit_rebuilds_like_a_clean_build() {
    let zero = PROJECT.replace("max_abs_error = 0.1", "max_abs_error = 0.0");
    let negative = PROJECT.replace("max_abs_error = 0.1", "max_abs_error = -0.0");
    let fs = with_kernels();
    fs.write(PATH, &zero);
    let mut db = Database::new(Arc::new(fs.clone()));
    let file = db.file(Utf8Path::new(PATH));
    let before = package::package_bytes(&db, file).clone().expect("builds");
    fs.write(PATH, &negative);
    assert!(db.refresh_file(Utf8Path::new(PATH)));
    let after = package::package_bytes(&db, file).clone().expect("builds");
    assert_ne!(*before, *after, "the edit must reach the package");

    let clean_fs = with_kernels();
    clean_fs.write(PATH, &negative);
    let clean = Database::new(Arc::new(clean_fs));
    let clean_file = clean.file(Utf8Path::new(PATH));
    let clean_bytes = package::package_bytes(&clean, clean_file)
        .clone()
        .expect("builds");
    assert_eq!(*after, *clean_bytes);
}

fn phases_of(computed: &[(&'static str, String)]) -> Vec<&'static str> {
    let phases: std::collections::BTreeSet<&str> = computed.iter().map(|(p, _)| *p).collect();
    phases.into_iter().collect()
}

/// A weight's `init` and the check's thresholds do not change the program:
/// nothing is lowered, scheduled or placed again; only what carries them
/// (the weights' bytes, the package) follows.
#[test]
fn init_and_check_edits_neither_lower_nor_schedule_nor_place() {
    let (mut db, fs, file) = built();
    computed_after(&mut db, &fs, &[], file);
    let init = PROJECT.replace(
        "name = \"w1\"\nshape = [64, 64]\ndtype = \"f16\"\nrole = \"weight\"\n",
        "name = \"w1\"\nshape = [64, 64]\ndtype = \"f16\"\nrole = \"weight\"\ninit = { dist = \"uniform\", scale = 0.5 }\n",
    );
    assert_ne!(init, PROJECT, "the edit applies");
    let computed = computed_after(&mut db, &fs, &[(PATH, &init)], file);
    assert_eq!(phases_of(&computed), ["package", "weights"], "{computed:?}");

    let check = init.replace("max_abs_error = 0.1", "max_abs_error = 0.2");
    let computed = computed_after(&mut db, &fs, &[(PATH, &check)], file);
    assert_eq!(phases_of(&computed), ["package"], "{computed:?}");
}

/// A comment-only kernel edit recompiles the kernel, whose machine code is
/// unchanged: no tile is emitted again and the package stays the same.
#[test]
fn a_comment_only_kernel_edit_re_emits_no_tile() {
    let (mut db, fs, file) = built();
    computed_after(&mut db, &fs, &[], file);
    let before = package::package_bytes(&db, file).clone().expect("bytes");
    let source = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("device/gelu_f16.S"),
    )
    .expect("gelu source");
    let commented = format!("// A comment that changes nothing.\n{source}");
    let computed = computed_after(&mut db, &fs, &[("device/gelu_f16.S", &commented)], file);
    assert_eq!(emitted_tiles(&computed), Vec::<u32>::new(), "{computed:?}");
    assert!(computed
        .iter()
        .any(|(p, i)| *p == "kernels" && i == "kernel gelu_f16"));
    let after = package::package_bytes(&db, file).clone().expect("bytes");
    assert_eq!(before, after);
}

const FP8_PROJECT: &str = r#"
[project]
name = "fp8"
target = "ipu21"
tiles = 8

[[tensor]]
name = "x"
shape = [32, 64]
dtype = "f16"
role = "input"

[[tensor]]
name = "w"
shape = [64, 64]
dtype = "f143"
scale = -3
role = "weight"

[[op]]
name = "xq"
op = "cast"
inputs = ["x"]
dtype = "f143"
scale = -2

[[op]]
name = "y"
op = "matmul"
inputs = ["xq", "w"]
dtype = "f16"

[check]
reference_precision = "device"
min_cosine_similarity = 0.99
max_abs_error = 0.1
outputs = ["y"]
"#;

/// An FP8 scale is a kernel parameter's value: the tiles running the op
/// are emitted again with the new value, but nothing is placed again.
#[test]
fn a_scale_edit_re_emits_but_re_places_nothing() {
    let fs = with_kernels();
    fs.write(PATH, FP8_PROJECT);
    let mut db = Database::new(Arc::new(fs.clone()));
    let file = db.file(Utf8Path::new(PATH));
    computed_after(&mut db, &fs, &[], file);
    let rescaled = FP8_PROJECT.replace("scale = -3", "scale = -4");
    let computed = computed_after(&mut db, &fs, &[(PATH, &rescaled)], file);
    let phases = phases_of(&computed);
    assert!(phases.contains(&"emit"), "{computed:?}");
    assert!(!phases.contains(&"place"), "{computed:?}");
}

/// A plan read back from the store is used only if it fits its signature;
/// the planner's own plans, for every example project, always do.
#[test]
fn the_planners_own_plans_fit_their_signatures() {
    let db = Database::new(Arc::new(crate::vfs::OsFs));
    let root = camino::Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("projects");
    for name in [
        "matmul-f8",
        "mlp-f16",
        "attention-f16",
        "mixed-f8",
        "vit-fp8",
    ] {
        let file = db.file(&root.join(format!("{name}.toml")));
        for signature in op_signatures(&db, file) {
            let plans = operator_plans(&db, Signature::new(&db, signature.clone()));
            if let Err(problem) = plans.check_against(signature) {
                panic!("{name}: {signature}: {problem}");
            }
        }
    }
}

/// The two-layer project with its weights read from `p/w.safetensors`.
fn from_file(w2_scale: f32) -> (String, Vec<u8>) {
    let project = PROJECT
        .replace(
            "name = \"w1\"\nshape = [64, 64]\ndtype = \"f16\"\nrole = \"weight\"\n",
            "name = \"w1\"\nshape = [64, 64]\ndtype = \"f16\"\nrole = \"weight\"\ninit = { file = \"w.safetensors\", key = \"w1\" }\n",
        )
        .replace(
            "name = \"w2\"\nshape = [64, 64]\ndtype = \"f16\"\nrole = \"weight\"\n",
            "name = \"w2\"\nshape = [64, 64]\ndtype = \"f16\"\nrole = \"weight\"\ninit = { file = \"w.safetensors\", key = \"w2\" }\n",
        );
    let w1: Vec<f32> = (0..64 * 64).map(|i| (i % 7) as f32 / 8.0).collect();
    let w2: Vec<f32> = (0..64 * 64).map(|i| (i % 5) as f32 * w2_scale).collect();
    let arrays = [
        crate::data::Array {
            name: "w1",
            shape: &[64, 64],
            values: &w1,
        },
        crate::data::Array {
            name: "w2",
            shape: &[64, 64],
            values: &w2,
        },
    ];
    (
        project,
        crate::data::safetensors::write_f32(&arrays).expect("a safetensors file"),
    )
}

/// Editing a weight file's values re-converts its entries, and re-runs
/// only the weight whose bytes changed, the tiles' weights that hold it and
/// the package: nothing is validated, lowered or placed again.
#[test]
fn a_tensor_file_edit_re_runs_only_the_weights_it_changes() {
    let fs = with_kernels();
    let (project, weights) = from_file(0.25);
    fs.write(PATH, &project);
    fs.write_bytes("p/w.safetensors", &weights);
    let mut db = Database::new(Arc::new(fs.clone()));
    let file = db.file(Utf8Path::new(PATH));
    computed_after(&mut db, &fs, &[], file);
    let (_, edited) = from_file(0.5);
    fs.write_bytes("p/w.safetensors", &edited);
    assert!(db.refresh_file(Utf8Path::new("p/w.safetensors")));
    db.execution_log().start();
    let computed = computed_after(&mut db, &fs, &[], file);
    assert_eq!(phases_of(&computed), ["package", "weights"], "{computed:?}");
    let executed = db.execution_log().take();
    let count = |name: &str| executed.iter().filter(|q| q.starts_with(name)).count();
    assert_eq!(count("tensor_file_bytes"), 2, "{executed:?}");
    assert_eq!(count("weight_bytes"), 1, "{executed:?}");
    assert_eq!(count("project_graph"), 0, "{executed:?}");
    let package = package::package(&db, file).clone().expect("a package");
    assert_eq!(package.file_values.len(), 2);
    assert_eq!(
        crate::numerics::decode(
            package.file_values[1].bytes.as_slice(),
            crate::graph::DType::F16,
            0
        )[1],
        0.5
    );
}

/// A new process over the same store and kernel cache reuses what the first
/// computed: plans and kernels come from the persistence hooks and
/// are reported as reused, so their queries' executions do not count as
/// recomputed, while the phases that are not persisted do; the package is
/// the same.
#[test]
fn a_new_process_reuses_persisted_results_through_the_hooks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = camino::Utf8PathBuf::from_path_buf(dir.path().to_path_buf()).expect("utf-8");
    let store = crate::store::Store::new(root.join("store"));
    let kernels = crate::kernels::cache::KernelCache::new(root.clone());
    let fs = with_kernels();
    fs.write(PATH, PROJECT);
    let process = || {
        Database::new(Arc::new(fs.clone()))
            .with_store(store.clone())
            .with_kernel_cache(kernels.clone())
    };
    let build = |db: &Database| {
        let file = db.file(Utf8Path::new(PATH));
        let bytes = package::package_bytes(db, file).clone().expect("builds");
        store.flush();
        let reused = db.reused_items().take();
        let executed = db.executed_queries().take();
        let computed = items::executed_minus_reused(db, executed, reused.clone());
        (computed, reused, bytes)
    };
    let (first, first_reused, first_bytes) = build(&process());
    assert!(first_reused.is_empty(), "{first_reused:?}");
    let persisted = ["kernels", "plan"];
    for phase in persisted {
        assert!(phases_of(&first).contains(&phase), "{first:?}");
    }

    let (second, reused, second_bytes) = build(&process());
    assert_eq!(phases_of(&reused), persisted, "{reused:?}");
    for phase in persisted {
        let computed = first.iter().filter(|(p, _)| *p == phase).count();
        let hits = reused.iter().filter(|(p, _)| *p == phase).count();
        assert_eq!(hits, computed, "{phase}: {reused:?}");
    }
    // What is not persisted runs again in a new process, and is named.
    let again = ["emit", "lower", "package", "place", "schedule", "weights"];
    assert_eq!(phases_of(&second), again, "{second:?}");
    assert_eq!(*first_bytes, *second_bytes);
}

/// mlp-f16's products replicate their weights as far as the budget allows
/// and together overfill the tiles; giving up copies (the replication
/// levels) is enough, so no plan is confined to less tile memory, and no
/// operation rises more than one level a round.
#[test]
fn replicated_weights_are_given_up_before_tile_memory() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/projects/mlp-f16.toml");
    let text = std::fs::read_to_string(path).expect("mlp-f16 reads");
    let (db, file) = fitted(&text);
    let fitted = fitted_program(&db, file).clone().expect("lowers");
    assert!(
        !fitted.attempts.is_empty(),
        "the first plans should not fit"
    );
    assert_eq!(fitted.unresolved, None);
    assert!(
        fitted
            .spreads
            .iter()
            .all(|&level| level <= crate::plan::REPLICATION_LEVELS),
        "{:?}",
        fitted.attempts
    );
    assert!(fitted.attempts.len() <= usize::from(crate::plan::REPLICATION_LEVELS));
    assert!(placement(&db, file).is_ok());
}

/// A round's raises are sized from each operation's own estimate, so
/// together they may free more than the tiles needed: vit-fp8's first
/// round raises six products, and the program still fits, estimated
/// faster, with some of them back at their lower level. Each undone raise
/// is one the final program fits without, and the program places.
#[test]
fn raises_the_program_fits_without_are_undone() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("projects");
    let read = |name: &str| std::fs::read_to_string(root.join(name)).expect("project reads");
    let (db, file) = vit_fp8(&read);
    let fitted = fitted_program(&db, file).clone().expect("lowers");
    assert_eq!(fitted.unresolved, None);
    let undone: Vec<&String> = fitted
        .attempts
        .iter()
        .filter(|a| a.contains("back to level"))
        .collect();
    assert!(!undone.is_empty(), "{:?}", fitted.attempts);
    // An undone operation stays below the level its round raised it to.
    let graph = program_graph(&db, file).clone().expect("graph");
    for attempt in &undone {
        let name = attempt.split('`').nth(1).expect("a named operation");
        let op = graph
            .ops
            .iter()
            .position(|o| o.name == name)
            .expect("an operation");
        assert_eq!(fitted.spreads[op], 0, "{attempt}");
    }
    assert!(placement(&db, file).is_ok());
}

/// vit-fp8 with its layer include, read with `read`.
fn vit_fp8(read: &dyn Fn(&str) -> String) -> (Database, SourceFile) {
    let fs = with_kernels();
    fs.write(PATH, &read("vit-fp8.toml"));
    fs.write(
        "p/layers/vit-encoder.toml",
        &read("layers/vit-encoder.toml"),
    );
    let db = Database::new(Arc::new(fs));
    let file = db.file(Utf8Path::new(PATH));
    (db, file)
}

/// The estimate of operation `name` in `file`'s package and its selected
/// plan.
fn estimate_and_plan(
    db: &Database,
    file: SourceFile,
    name: &str,
) -> (crate::package::OpEstimate, crate::plan::Candidate) {
    let estimates = super::package::op_estimates(db, file).expect("estimates");
    let signatures = planned_signatures(db, file);
    let i = estimates.iter().position(|e| e.name == name).expect(name);
    let plans = operator_plans(db, Signature::new(db, signatures[i].clone()));
    (estimates[i].clone(), plans.selected().clone())
}

/// The package's per-operation estimates follow the lowered program where
/// the per-signature plans cannot: vit-fp8's first layernorm reads the
/// repeat's carry in place, so it has no exchange phase and is estimated
/// without exchange or sync; `k+k_f8` and `v+v_f8` read the pieces
/// `q+q_f8` gathered, and their reduction phases are merged into `q+q_f8`'s
/// (`crate::lower::merge_phases`), so they are estimated with no exchange
/// or sync of their own; `q+q_f8` keeps its plan's syncs and takes on their
/// exchange.
#[test]
fn estimates_follow_the_lowered_exchange() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("projects");
    let read = |name: &str| std::fs::read_to_string(root.join(name)).expect("project reads");
    let (db, file) = vit_fp8(&read);
    let find = |name: &str| {
        let (estimate, selected) = estimate_and_plan(&db, file, name);
        (estimate, selected.estimate)
    };
    let (ln1, plan) = find("ln1+ln1_f8");
    assert!(plan.exchange_cycles > 0 && plan.sync_cycles > 0, "{plan:?}");
    assert_eq!((ln1.exchange_cycles, ln1.sync_cycles), (0, 0));
    for name in ["k+k_f8", "v+v_f8"] {
        let (merged, plan) = find(name);
        assert!(plan.exchange_cycles > 0 && plan.sync_cycles > 0, "{plan:?}");
        assert_eq!((merged.exchange_cycles, merged.sync_cycles), (0, 0));
    }
    let (q, plan) = find("q+q_f8");
    assert!(q.exchange_cycles > plan.exchange_cycles, "{q:?} {plan:?}");
    assert_eq!(q.sync_cycles, plan.sync_cycles);
}

/// An operation syncs only for the exchange phases its lowered program
/// has: vit-head-f16's `qkv` plans a gather and a reduction (two syncs),
/// but the host writes its input where the plan reads it, so it lowers to
/// the reduction alone and is estimated with one sync.
#[test]
fn an_operation_syncs_only_for_the_phases_it_lowers_to() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("projects");
    let fs = with_kernels();
    fs.write(
        PATH,
        &std::fs::read_to_string(root.join("vit-head-f16.toml")).expect("project reads"),
    );
    let db = Database::new(Arc::new(fs));
    let file = db.file(Utf8Path::new(PATH));
    let (qkv, selected) = estimate_and_plan(&db, file, "qkv");
    let plan = selected.estimate;
    assert_eq!(plan.sync_cycles, 1200, "{plan:?}");
    assert_eq!(qkv.sync_cycles, 600, "{qkv:?}");
    let refined = selected.refined.expect("the selected plan is refined");
    assert_eq!(qkv.exchange_cycles, refined.scheduled_exchange_cycles);
}

/// An operation's exchange is estimated as its lowered phase is
/// scheduled, here what refinement scheduled: on a single tile, an f32
/// subtraction reads its operands where they already are, so its phase
/// moves a few bytes on the tile, where the analytical figure has every
/// operand byte cross the exchange.
#[test]
fn an_operation_is_estimated_with_its_scheduled_exchange() {
    let fs = with_kernels();
    fs.write(
        PATH,
        r#"
[project]
name = "one-tile"
target = "ipu21"
tiles = 1

[[tensor]]
name = "x"
shape = [77, 256]
dtype = "f16"
role = "input"

[[op]]
name = "wide"
op = "cast"
inputs = ["x"]
dtype = "f32"

[[op]]
name = "mean"
op = "reduce_mean"
inputs = ["wide"]
dtype = "f32"

[[op]]
name = "centred"
op = "sub"
inputs = ["wide", "mean"]
dtype = "f32"

[check]
reference_precision = "device"
min_cosine_similarity = 0.99
max_abs_error = 0.1
outputs = ["centred"]
"#,
    );
    let db = Database::new(Arc::new(fs));
    let file = db.file(Utf8Path::new(PATH));
    let (centred, selected) = estimate_and_plan(&db, file, "centred");
    let refined = selected.refined.expect("the selected plan is refined");
    assert!(
        refined.scheduled_exchange_cycles < selected.estimate.exchange_cycles,
        "{selected:?}"
    );
    assert_eq!(centred.exchange_cycles, refined.scheduled_exchange_cycles);
}
