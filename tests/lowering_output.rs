//! Lowering output is pinned, readably: each example project's lowered
//! program (as `ipub build` builds it) is dumped step by step, shards and
//! exchange phases with their transfer counts and bytes, into
//! `tests/data/lowering/NAME.txt`, followed by the blake3 hash of the whole
//! program's JSON so that changes the summary does not show (buffer order,
//! transfer merging, addresses) are caught too. Optimisations of lowering
//! must leave these untouched; a real change of lowering updates them
//! deliberately with `UPDATE_EXPECT=1 cargo test --test lowering_output`,
//! and the diff of the text says what changed.

use ipub::db::{Database, Db};
use ipub::graph::OpId;
use ipub::pipeline;

fn check(project: &str) {
    let db = Database::on_disk();
    let root = camino::Utf8PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let file = db.file(&root.join(project));
    let graph = pipeline::graph(&db, file).expect("the example project validates");
    let program = pipeline::program(&db, file)
        .clone()
        .expect("the example project lowers");
    ipub::lower::verify::verify(&graph, &program).expect("the lowered program verifies");
    let names = |op: OpId| graph.op(op).name.clone();
    let json = serde_json::to_vec(&*program).expect("programs serialise");
    let text = format!(
        "{}program blake3 {}\n",
        program.dump(&names),
        blake3::hash(&json).to_hex()
    );
    let name = camino::Utf8Path::new(project)
        .file_stem()
        .expect("a project file name");
    expect_test::expect_file![root.join(format!("tests/data/lowering/{name}.txt"))]
        .assert_eq(&text);
}

#[test]
fn attention_f16() {
    check("projects/attention-f16.toml");
}

#[test]
fn matmul_f8() {
    check("projects/matmul-f8.toml");
}

#[test]
fn mlp_f16() {
    check("projects/mlp-f16.toml");
}

#[test]
fn vit_fp8() {
    check("projects/vit-fp8.toml");
}
