//! Project validation on an in-memory file system, through the salsa query.

use super::project_graph;
use crate::db::{Database, Db};
use crate::vfs::MemoryFs;
use camino::Utf8Path;
use expect_test::{expect, Expect};
use std::sync::Arc;

const LAYER: &str = r#"
[[repeat]]
name = "stack"
count = 2
input = "x"
carry = "h"
result = "h_next"

[[repeat.tensor]]
name = "w"
shape = [16, 16]
dtype = "f143"
scale = -3
role = "weight"
init = { dist = "uniform", scale = 0.25 }

[[repeat.op]]
name = "h_next"
op = "add"
inputs = ["h", "mixed"]
dtype = "f16"

[[repeat.op]]
name = "h_f8"
op = "cast"
inputs = ["h"]
dtype = "f143"

[[repeat.op]]
name = "mixed"
op = "matmul"
inputs = ["h_f8", "w"]
dtype = "f16"
"#;

const ROOT: &str = r#"
include = ["layers/stack.toml"]

[project]
name = "small"
target = "ipu21"
tiles = 4
seed = 9

[[tensor]]
name = "x"
shape = [8, 16]
dtype = "f16"
role = "input"

[[op]]
name = "y"
op = "softmax"
inputs = ["stack"]
dtype = "f16"
scale = 0.5
causal = true

[check]
reference_precision = "f32"
min_cosine_similarity = 0.999
max_abs_error = 0.01
outputs = ["y"]
"#;

fn database() -> (Database, MemoryFs) {
    let fs = MemoryFs::new();
    fs.write("p/small.toml", ROOT);
    fs.write("p/layers/stack.toml", LAYER);
    (Database::new(Arc::new(fs.clone())), fs)
}

fn check(db: &Database, path: &str, expected: Expect) {
    let result = project_graph(db, db.file(Utf8Path::new(path)));
    let graph = result.graph.as_ref().expect("a valid project");
    expected.assert_eq(&graph.dump());
}

#[test]
fn ops_are_ordered_by_dependency_across_includes() {
    let (db, _) = database();
    check(
        &db,
        "p/small.toml",
        expect![[r#"
            project small target=ipu21 tiles=4 seed=9
            Input x: f16[8, 16] init=Normal { std: 1.0 }
            Weight w: f143[16, 16] scale=-3 init=Uniform { scale: 0.25 } per-iteration of repeat 0
            repeat stack x2: h = x -> stack = h_next
                h_f8 = Cast(h) : f143[8, 16] scale=0
                mixed = Matmul { transpose_rhs: false, epilogue: [] }(h_f8, w) : f16[8, 16]
                h_next = Add(h, mixed) : f16[8, 16]
            y = Softmax { scale: 0.5, causal: true }(stack) : f16[8, 16]
            outputs y
            check F32 min_cosine_similarity=0.999 max_abs_error=0.01 outputs y
        "#]],
    );
}

#[test]
fn a_comment_edit_gives_an_equal_result() {
    let (mut db, fs) = database();
    let path = Utf8Path::new("p/small.toml");
    let before = project_graph(&db, db.file(path)).clone();
    fs.write(path, &format!("# a comment\n{ROOT}\n\n"));
    assert!(db.refresh_file(path));
    db.execution_log().start();
    let after = project_graph(&db, db.file(path)).clone();
    assert_eq!(db.execution_log().take().len(), 1, "validation re-ran once");
    assert_eq!(before, after);
}

#[test]
fn an_include_edit_reaches_the_including_project_only() {
    let (mut db, fs) = database();
    fs.write(
        "p/other.toml",
        &ROOT
            .replace("include = [\"layers/stack.toml\"]", "")
            .replace("inputs = [\"stack\"]", "inputs = [\"x\"]"),
    );
    let small = db.file(Utf8Path::new("p/small.toml"));
    let other = db.file(Utf8Path::new("p/other.toml"));
    project_graph(&db, small);
    project_graph(&db, other);
    fs.write(
        "p/layers/stack.toml",
        &LAYER.replace("count = 2", "count = 5"),
    );
    assert!(db.refresh_file(Utf8Path::new("p/layers/stack.toml")));
    db.execution_log().start();
    let result = project_graph(&db, small);
    project_graph(&db, other);
    let executed = db.execution_log().take();
    assert_eq!(executed.len(), 1, "{executed:?}");
    let graph = result.graph.as_ref().expect("valid");
    assert_eq!(graph.repeats[0].count, 5);
}

#[test]
fn broken_include_is_reported_at_its_own_file() {
    let (mut db, fs) = database();
    fs.write(
        "p/layers/stack.toml",
        &LAYER.replace("\"mixed\"]", "\"mixd\"]"),
    );
    db.refresh_file(Utf8Path::new("p/layers/stack.toml"));
    let result = project_graph(&db, db.file(Utf8Path::new("p/small.toml")));
    assert!(result.graph.is_none());
    let rendered: Vec<String> = result
        .diagnostics
        .iter()
        .map(|d| {
            crate::diagnostic::render(d, &|p| {
                db.file(p).contents(&db).as_deref().ok().map(str::to_string)
            })
        })
        .collect();
    expect![[r#"
        error: unknown tensor `mixd`
          --> p/layers/stack.toml:20:16
           |
        20 | inputs = ["h", "mixd"]
           |                ^^^^^^
    "#]]
    .assert_eq(&rendered.join("\n"));
}

/// The first error's message for a project of `files`.
fn first_error(files: &[(&str, String)]) -> String {
    let fs = MemoryFs::new();
    for (path, text) in files {
        fs.write(*path, text);
    }
    let db = Database::new(Arc::new(fs));
    let result = project_graph(&db, db.file(Utf8Path::new(files[0].0)));
    assert!(result.graph.is_none());
    result.diagnostics[0].message.clone()
}

#[test]
fn include_chains_and_name_counts_are_bounded() {
    // Forty files, each including the next.
    let root = ROOT.replace("layers/stack.toml", "1.toml");
    let mut files = vec![("p/0.toml", root)];
    let names: Vec<String> = (1..40).map(|i| format!("p/{i}.toml")).collect();
    for (i, name) in names.iter().enumerate() {
        files.push((name.as_str(), format!("include = [\"{}.toml\"]\n", i + 2)));
    }
    expect!["includes nested deeper than 32 files or more than 1024 files in all"]
        .assert_eq(&first_error(&files));
    let tensors = "[[tensor]]\nname = \"t\"\nshape = [1]\ndtype = \"f16\"\nrole = \"input\"\n"
        .repeat(super::limits::MAX_NAMES + 1);
    expect!["the project declares 65537 names (tensors, operations, repeats), more than 65536"]
        .assert_eq(&first_error(&[("p.toml", tensors)]));
}

/// Thousands of operations, declared last to first: ordering them takes a
/// moment, not a scan per operation.
#[test]
fn many_operations_are_ordered_in_declaration_order_when_ready() {
    let mut project = ROOT.replace("include = [\"layers/stack.toml\"]", "");
    project = project.replace("inputs = [\"stack\"]", "inputs = [\"g0\"]");
    for i in (0..5000).rev() {
        let input = if i == 4999 {
            "x".to_string()
        } else {
            format!("g{}", i + 1)
        };
        project.push_str(&format!(
            "\n[[op]]\nname = \"g{i}\"\nop = \"gelu\"\ninputs = [\"{input}\"]\ndtype = \"f16\"\n"
        ));
    }
    let fs = MemoryFs::new();
    fs.write("p.toml", &project);
    let db = Database::new(Arc::new(fs));
    let result = project_graph(&db, db.file(Utf8Path::new("p.toml")));
    let graph = result.graph.as_ref().expect("valid");
    assert_eq!(graph.ops.len(), 5001);
    assert_eq!(graph.ops[0].name, "g4999");
    assert_eq!(graph.ops[5000].name, "y");
}

/// The warnings of a project of one root file (and `extra` files), rendered.
fn check_warnings(root: &str, extra: &[(&str, &str)], expected: Expect) {
    let fs = MemoryFs::new();
    fs.write("w/root.toml", root);
    for (path, text) in extra {
        fs.write(*path, text);
    }
    let db = Database::new(Arc::new(fs));
    let file = db.file(Utf8Path::new("w/root.toml"));
    let errors = &project_graph(&db, file).diagnostics;
    assert!(errors.is_empty(), "{errors:?}");
    let rendered: Vec<String> = super::project_warnings(&db, file)
        .iter()
        .map(|d| {
            let code = d.code.as_deref().unwrap_or("-");
            let text = crate::diagnostic::render(d, &|p| {
                db.file(p).contents(&db).as_deref().ok().map(str::to_string)
            });
            format!("[{code}] {text}")
        })
        .collect();
    expected.assert_eq(&rendered.join("\n"));
}

#[test]
fn a_clean_project_has_no_warnings() {
    let (db, _) = database();
    let file = db.file(Utf8Path::new("p/small.toml"));
    assert!(super::project_warnings(&db, file).is_empty());
}

#[test]
fn unused_declarations_unread_results_empty_includes_and_checked_weights_warn() {
    let root = r#"include = ["empty.toml", "dead.toml"]

[project]
name = "w"
target = "ipu21"
tiles = 4

[[tensor]]
name = "x"
shape = [8, 16]
dtype = "f16"
role = "input"

[[tensor]]
name = "unused"
shape = [4]
dtype = "f16"
role = "weight"

[[op]]
name = "y"
op = "gelu"
inputs = ["x"]
dtype = "f16"

[check]
reference_precision = "f32"
min_cosine_similarity = 0.99
max_abs_error = 0.1
outputs = ["y", "x"]
"#;
    let dead = r#"[[op]]
name = "dead"
op = "gelu"
inputs = ["x"]
dtype = "f16"
"#;
    check_warnings(
        root,
        &[("w/empty.toml", "# nothing yet\n"), ("w/dead.toml", dead)],
        expect![[r#"
            [unread-result] warning: the result of op `dead` is never read
             --> w/dead.toml:2:8
              |
            2 | name = "dead"
              |        ^^^^^^ nothing reads this
              = note: it is removed before planning and costs no tiles or cycles
              = help: read it in another op, or list it in `[check] outputs`

            [unused-include] warning: include `empty.toml` contributes nothing
             --> w/root.toml:1:12
              |
            1 | include = ["empty.toml", "dead.toml"]
              |            ^^^^^^^^^^^^ nothing the checked outputs depend on comes from this file
              = help: remove the include, or read what it defines

            [unused-include] warning: include `dead.toml` contributes nothing
             --> w/root.toml:1:26
              |
            1 | include = ["empty.toml", "dead.toml"]
              |                          ^^^^^^^^^^^ nothing the checked outputs depend on comes from this file
              = help: remove the include, or read what it defines

            [unused-tensor] warning: unused tensor `unused`
              --> w/root.toml:15:8
               |
            15 | name = "unused"
               |        ^^^^^^^^ no op or repeat reads it
               = help: remove it, or use it as an op's input

            [checked-declared-tensor] warning: `x` is an input, not something the program computes
              --> w/root.toml:30:17
               |
            30 | outputs = ["y", "x"]
               |                 ^^^ not checked
               = note: the device would only give back the values the host gave it
               = help: check the output of an op that reads it instead
        "#]],
    );
}

#[test]
fn checking_only_inputs_and_weights_is_an_error() {
    let root = ROOT.replace("outputs = [\"y\"]", "outputs = [\"x\"]");
    let fs = MemoryFs::new();
    fs.write("p/small.toml", &root);
    fs.write("p/layers/stack.toml", LAYER);
    let db = Database::new(Arc::new(fs));
    let result = project_graph(&db, db.file(Utf8Path::new("p/small.toml")));
    assert!(result.graph.is_none());
    assert_eq!(
        result.diagnostics[0].message,
        "none of the `[check] outputs` is computed by the program"
    );
}

/// A safetensors file of f32 tensors `(key, shape)` with values 0, 1, ...
fn weights_file(tensors: &[(&str, Vec<usize>)]) -> Vec<u8> {
    let values: Vec<Vec<f32>> = tensors
        .iter()
        .map(|(_, shape)| {
            (0..shape.iter().product::<usize>())
                .map(|v| v as f32)
                .collect()
        })
        .collect();
    let arrays: Vec<crate::data::Array<'_>> = tensors
        .iter()
        .zip(&values)
        .map(|((name, shape), values)| crate::data::Array {
            name,
            shape,
            values,
        })
        .collect();
    crate::data::safetensors::write_f32(&arrays).expect("a safetensors file")
}

/// The project `p/small.toml` with `x` and the repeat's `w` read from
/// files, on a file system that also holds `p/x.npy` and
/// `p/weights.safetensors`.
fn database_with_files(x_init: &str, w_init: &str) -> (Database, MemoryFs) {
    let (db, fs) = database();
    fs.write(
        "p/small.toml",
        &ROOT.replace(
            "dtype = \"f16\"\nrole = \"input\"",
            &format!("dtype = \"f16\"\nrole = \"input\"\ninit = {x_init}"),
        ),
    );
    fs.write(
        "p/layers/stack.toml",
        &LAYER.replace("{ dist = \"uniform\", scale = 0.25 }", w_init),
    );
    let x: Vec<f32> = (0..128).map(|v| v as f32 / 64.0).collect();
    fs.write_bytes(
        "p/x.npy",
        &crate::data::npy::write_f32(&crate::data::Array {
            name: "x",
            shape: &[8, 16],
            values: &x,
        }),
    );
    fs.write_bytes(
        "p/weights.safetensors",
        &weights_file(&[
            ("layers.0.w", vec![16, 16]),
            ("layers.1.w", vec![16, 16]),
            ("layers.0.b", vec![16]),
            ("head", vec![4, 16]),
        ]),
    );
    (db, fs)
}

/// The tensor lines of the graph, or every diagnostic rendered.
fn check_files(db: &Database, expected: Expect) {
    let result = project_graph(db, db.file(Utf8Path::new("p/small.toml")));
    let text = match &result.graph {
        Some(graph) => graph
            .dump()
            .lines()
            .filter(|l| l.starts_with("Input") || l.starts_with("Weight"))
            .collect::<Vec<_>>()
            .join("\n"),
        None => result
            .diagnostics
            .iter()
            .map(|d| {
                crate::diagnostic::render(d, &|p| {
                    db.file(p).contents(db).as_deref().ok().map(str::to_string)
                })
            })
            .collect::<Vec<_>>()
            .join("\n"),
    };
    expected.assert_eq(&text);
}

#[test]
fn inits_from_tensor_files_resolve_against_their_file() {
    let (db, _) = database_with_files(
        r#"{ file = "x.npy" }"#,
        r#"{ file = "../weights.safetensors", key = "layers.{i}.w" }"#,
    );
    check_files(
        &db,
        expect![[r#"
            Input x: f16[8, 16] init=File { path: "p/x.npy", key: None }
            Weight w: f143[16, 16] scale=-3 init=File { path: "p/weights.safetensors", key: Some("layers.{i}.w") } per-iteration of repeat 0"#]],
    );
}

#[test]
fn bad_inits_from_files_are_located() {
    let w = r#"{ file = "../weights.safetensors", key = "layers.{i}.w" }"#;
    let check = |x: &str, w: &str, expected: Expect| {
        let (db, _) = database_with_files(x, w);
        check_files(&db, expected);
    };
    check(
        r#"{ file = "missing.npy" }"#,
        w,
        expect![[r#"
            error: cannot read tensor file `p/missing.npy`: it does not exist
              --> p/small.toml:15:8
               |
            15 | init = { file = "missing.npy" }
               |        ^^^^^^^^^^^^^^^^^^^^^^^^ `x` reads its values here
        "#]],
    );
    check(
        r#"{ file = "weights.safetensors", key = "layers.0.b" }"#,
        w,
        expect![[r#"
            error: `p/weights.safetensors`: `layers.0.b` has shape [16], but `x` is declared [8, 16]
              --> p/small.toml:15:8
               |
            15 | init = { file = "weights.safetensors", key = "layers.0.b" }
               |        ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
        "#]],
    );
    check(
        r#"{ file = "weights.safetensors", key = "layers.{i}.w" }"#,
        w,
        expect![[r#"
            error: `{i}` in a key stands for the repeat iteration, but `x` is not a repeat's weight
              --> p/small.toml:15:8
               |
            15 | init = { file = "weights.safetensors", key = "layers.{i}.w" }
               |        ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
        "#]],
    );
    check(
        r#"{ file = "x.npy" }"#,
        r#"{ file = "../weights.safetensors", key = "layers.{i}.fc" }"#,
        expect![[r#"
            error: `p/weights.safetensors`: the file has no tensor `layers.0.fc`
              --> p/layers/stack.toml:15:8
               |
            15 | init = { file = "../weights.safetensors", key = "layers.{i}.fc" }
               |        ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
               = note: keys in the file that come close: layers.0.b, layers.0.w
        "#]],
    );
    check(
        r#"{ file = "x.npy" }"#,
        r#"{ file = "../weights.safetensors", key = "layers.0.w" }"#,
        expect![[r#"
            Input x: f16[8, 16] init=File { path: "p/x.npy", key: None }
            Weight w: f143[16, 16] scale=-3 init=File { path: "p/weights.safetensors", key: Some("layers.0.w") } per-iteration of repeat 0"#]],
    );
    check(
        r#"{ file = "weights.safetensors" }"#,
        w,
        expect![[r#"
        error: an init from a `.safetensors` file needs `key`
          --> p/small.toml:15:8
           |
        15 | init = { file = "weights.safetensors" }
           |        ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
           = help: name the entry, for example key = "encoder.layers.{i}.mlp.fc1.weight"
    "#]],
    );
    check(
        r#"{ file = "x.npy", key = "x" }"#,
        w,
        expect![[r#"
        error: `key` does not apply to an `.npy` file, which holds one array
          --> p/small.toml:15:32
           |
        15 | init = { file = "x.npy", key = "x" }
           |                                ^^^
    "#]],
    );
    check(
        r#"{ file = "x.bin" }"#,
        w,
        expect![[r#"
        error: `x.bin` is not a tensor file ipub reads
          --> p/small.toml:15:17
           |
        15 | init = { file = "x.bin" }
           |                 ^^^^^^^
           = help: tensor files end in `.safetensors` (with `key`) or `.npy`
    "#]],
    );
    check(
        r#"{ file = "x.npy", dist = "normal", std = 1.0 }"#,
        w,
        expect![[r#"
        error: `std` does not apply to an init from a file
          --> p/small.toml:15:49
           |
        15 | init = { file = "x.npy", dist = "normal", std = 1.0 }
           |                                                 ^^^
    "#]],
    );
}

#[test]
fn bad_tensor_files_are_errors_of_the_init_that_reads_them() {
    let (mut db, fs) = database_with_files(
        r#"{ file = "x.npy" }"#,
        r#"{ file = "../weights.safetensors", key = "layers.{i}.w" }"#,
    );
    // A repeat of three iterations needs a third key.
    fs.write(
        "p/layers/stack.toml",
        &fs_text(&fs, "p/layers/stack.toml").replace("count = 2", "count = 3"),
    );
    db.refresh_file(Utf8Path::new("p/layers/stack.toml"));
    check_files(
        &db,
        expect![[r#"
        error: `p/weights.safetensors`: the file has no tensor `layers.2.w`
          --> p/layers/stack.toml:15:8
           |
        15 | init = { file = "../weights.safetensors", key = "layers.{i}.w" }
           |        ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
           = note: keys in the file that come close: layers.0.b, layers.0.w, layers.1.w
    "#]],
    );
    // A truncated file, and one holding integers.
    let good = weights_file(&[("layers.0.w", vec![16, 16])]);
    fs.write_bytes("p/weights.safetensors", &good[..good.len() - 3]);
    db.refresh_file(Utf8Path::new("p/weights.safetensors"));
    check_files(
        &db,
        expect![[r#"
        error: cannot read tensor file `p/weights.safetensors`: it is not a valid safetensors file: incomplete metadata, file not fully covered
          --> p/layers/stack.toml:15:8
           |
        15 | init = { file = "../weights.safetensors", key = "layers.{i}.w" }
           |        ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ `w` reads its values here
    "#]],
    );
    let mut npy = crate::data::npy::write_f32(&crate::data::Array {
        name: "x",
        shape: &[8, 16],
        values: &[0.0; 128],
    });
    let at = npy.windows(3).position(|w| w == b"<f4").expect("descr");
    npy[at..at + 3].copy_from_slice(b"<i4");
    fs.write_bytes("p/x.npy", &npy);
    db.refresh_file(Utf8Path::new("p/x.npy"));
    check_files(
        &db,
        expect![[r#"
        error: `p/x.npy`: the array holds numpy `<i4` values; ipub converts f64, f32, f16 and bf16
          --> p/small.toml:15:8
           |
        15 | init = { file = "x.npy" }
           |        ^^^^^^^^^^^^^^^^^^

        error: cannot read tensor file `p/weights.safetensors`: it is not a valid safetensors file: incomplete metadata, file not fully covered
          --> p/layers/stack.toml:15:8
           |
        15 | init = { file = "../weights.safetensors", key = "layers.{i}.w" }
           |        ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ `w` reads its values here
    "#]],
    );
}

fn fs_text(fs: &MemoryFs, path: &str) -> String {
    use crate::vfs::Vfs;
    fs.read(Utf8Path::new(path))
        .expect("a text file")
        .to_string()
}

#[test]
fn editing_a_tensor_file_s_values_does_not_validate_again() {
    let (mut db, fs) = database_with_files(
        r#"{ file = "x.npy" }"#,
        r#"{ file = "../weights.safetensors", key = "layers.{i}.w" }"#,
    );
    let root = db.file(Utf8Path::new("p/small.toml"));
    let before = project_graph(&db, root).clone();
    let x: Vec<f32> = (0..128).map(|v| -(v as f32)).collect();
    fs.write_bytes(
        "p/x.npy",
        &crate::data::npy::write_f32(&crate::data::Array {
            name: "x",
            shape: &[8, 16],
            values: &x,
        }),
    );
    assert!(db.refresh_file(Utf8Path::new("p/x.npy")));
    assert!(
        !db.refresh_file(Utf8Path::new("p/x.npy")),
        "an unchanged file is no change"
    );
    db.execution_log().start();
    let after = project_graph(&db, root).clone();
    let executed = db.execution_log().take();
    assert_eq!(before, after);
    // The file's index is read again, and being equal, stops there.
    assert!(
        executed.iter().any(|e| e.contains("tensor_index")),
        "{executed:?}"
    );
    assert!(
        executed.iter().all(|e| !e.contains("project_graph")),
        "{executed:?}"
    );
}

/// Whether a device operation reads a result: a repeat's carry is read by
/// the next iteration, a view passes the question to its own readers, and
/// a result only the host reads is not.
#[test]
fn results_read_on_device_are_those_an_operation_or_a_carry_reads() {
    let (db, fs) = database();
    let read = |db: &Database, path: &str| -> Vec<(String, bool)> {
        let result = project_graph(db, db.file(Utf8Path::new(path)));
        let graph = result.graph.as_ref().expect("a valid project");
        graph
            .ops
            .iter()
            .map(|op| (op.name.clone(), graph.read_on_device(op.output)))
            .collect()
    };
    let names = |pairs: Vec<(String, bool)>| -> String {
        let mut out: Vec<String> = pairs
            .into_iter()
            .map(|(name, read)| format!("{name}={read}"))
            .collect();
        out.sort();
        out.join(" ")
    };
    expect!["h_f8=true h_next=true mixed=true y=false"]
        .assert_eq(&names(read(&db, "p/small.toml")));
    fs.write(
        "p/views.toml",
        r#"
[project]
name = "views"
target = "ipu21"
tiles = 4
seed = 1

[[tensor]]
name = "x"
shape = [8, 16]
dtype = "f16"
role = "input"

[[op]]
name = "a"
op = "gelu"
inputs = ["x"]
dtype = "f16"

[[op]]
name = "a_t"
op = "transpose"
inputs = ["a"]
perm = [1, 0]

[[op]]
name = "b"
op = "gelu"
inputs = ["a_t"]
dtype = "f16"

[[op]]
name = "b_t"
op = "transpose"
inputs = ["b"]
perm = [1, 0]

[[op]]
name = "c"
op = "gelu"
inputs = ["x"]
dtype = "f16"

[[repeat]]
name = "r"
count = 2
input = "c"
carry = "k"
result = "k_next"

[[repeat.op]]
name = "k_next"
op = "gelu"
inputs = ["k"]
dtype = "f16"

[check]
reference_precision = "f32"
min_cosine_similarity = 0.999
max_abs_error = 0.01
outputs = ["b_t"]
"#,
    );
    expect!["a=true a_t=true b=false b_t=false c=true k_next=true"]
        .assert_eq(&names(read(&db, "p/views.toml")));
}

/// `LAYER` as a second repeat, `stack2`, continuing from `stack`.
fn second_layer() -> String {
    LAYER
        .replace("name = \"stack\"", "name = \"stack2\"")
        .replace("input = \"x\"", "input = \"stack\"")
}

#[test]
fn two_repeats_may_use_the_same_body_names() {
    let fs = MemoryFs::new();
    let root = ROOT
        .replace(
            "\"layers/stack.toml\"",
            "\"layers/stack.toml\", \"layers/stack2.toml\"",
        )
        .replace("inputs = [\"stack\"]", "inputs = [\"stack2\"]");
    fs.write("p/small.toml", &root);
    fs.write("p/layers/stack.toml", LAYER);
    fs.write("p/layers/stack2.toml", &second_layer());
    let db = Database::new(Arc::new(fs));
    // Their weights draw their values under the names as written, so
    // that a second repeat does not change the first one's.
    let result = project_graph(&db, db.file(Utf8Path::new("p/small.toml")));
    let graph = result.graph.as_ref().expect("a valid project");
    let drawn: Vec<(&str, &str)> = (graph.tensors.iter())
        .filter(|t| t.repeat.is_some())
        .map(|t| (t.name.as_str(), t.written_name()))
        .collect();
    assert_eq!(drawn, [("stack.w", "w"), ("stack2.w", "w")]);
    // Outside their bodies, the shared names are qualified with the repeat.
    check(
        &db,
        "p/small.toml",
        expect![[r#"
            project small target=ipu21 tiles=4 seed=9
            Input x: f16[8, 16] init=Normal { std: 1.0 }
            Weight stack.w: f143[16, 16] scale=-3 init=Uniform { scale: 0.25 } per-iteration of repeat 0
            Weight stack2.w: f143[16, 16] scale=-3 init=Uniform { scale: 0.25 } per-iteration of repeat 1
            repeat stack x2: stack.h = x -> stack = stack.h_next
                stack.h_f8 = Cast(stack.h) : f143[8, 16] scale=0
                stack.mixed = Matmul { transpose_rhs: false, epilogue: [] }(stack.h_f8, stack.w) : f16[8, 16]
                stack.h_next = Add(stack.h, stack.mixed) : f16[8, 16]
            repeat stack2 x2: stack2.h = stack -> stack2 = stack2.h_next
                stack2.h_f8 = Cast(stack2.h) : f143[8, 16] scale=0
                stack2.mixed = Matmul { transpose_rhs: false, epilogue: [] }(stack2.h_f8, stack2.w) : f16[8, 16]
                stack2.h_next = Add(stack2.h, stack2.mixed) : f16[8, 16]
            y = Softmax { scale: 0.5, causal: true }(stack2) : f16[8, 16]
            outputs y
            check F32 min_cosine_similarity=0.999 max_abs_error=0.01 outputs y
        "#]],
    );
}

#[test]
fn body_names_still_clash_with_outer_names_and_within_their_body() {
    let files =
        |layer: String, root: String| vec![("p/small.toml", root), ("p/layers/stack.toml", layer)];
    // A body op named like an outer tensor.
    let layer = LAYER
        .replace("name = \"h_f8\"", "name = \"x\"")
        .replace("[\"h_f8\", \"w\"]", "[\"x\", \"w\"]");
    expect!["duplicate name `x`"].assert_eq(&first_error(&files(layer, ROOT.to_string())));
    // Two ops of one body.
    let layer = LAYER.replace("name = \"mixed\"", "name = \"h_f8\"");
    expect!["duplicate name `h_f8`"].assert_eq(&first_error(&files(layer, ROOT.to_string())));
    // A shared body name whose qualified name is taken.
    let root = ROOT
        .replace(
            "\"layers/stack.toml\"",
            "\"layers/stack.toml\", \"layers/stack2.toml\"",
        )
        .replace("inputs = [\"stack\"]", "inputs = [\"stack2\"]")
        .replace("name = \"x\"", "name = \"stack2.w\"")
        .replace("input = \"x\"", "input = \"stack2.w\"");
    let mut all = files(LAYER.replace("input = \"x\"", "input = \"stack2.w\""), root);
    all.push(("p/layers/stack2.toml", second_layer()));
    expect!["`w` of repeat `stack2` is known as `stack2.w`, which names something else too"]
        .assert_eq(&first_error(&all));
}
