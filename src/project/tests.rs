//! Project validation on an in-memory file system, through the salsa query.

use super::project_graph;
use crate::db::{Database, Db, MemoryFs};
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
                mixed = Matmul { transpose_rhs: false }(h_f8, w) : f16[8, 16]
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
                db.file(p).contents(&db).as_deref().map(str::to_string)
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
                db.file(p).contents(&db).as_deref().map(str::to_string)
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
              --> w/root.toml:29:17
               |
            29 | outputs = ["y", "x"]
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
