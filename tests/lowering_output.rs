//! Lowering output is pinned: each example project lowers to a program
//! whose JSON serialisation has the blake3 hash recorded here. Any change
//! to the lowered program (buffer order, transfer merging, views) changes a
//! hash, so optimisations of lowering must leave these untouched; a real
//! change of lowering updates them deliberately.

use ipub::db::{Database, Db};
use ipub::graph::OpId;
use ipub::lower::Program;
use ipub::pipeline;

fn lowered(project: &str) -> Program {
    let db = Database::on_disk();
    let path = camino::Utf8PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(project);
    let file = db.file(&path);
    let graph = pipeline::graph(&db, file).expect("the example project validates");
    let partitions = pipeline::selected_partitions(&db, file);
    let plan_of = |op: OpId| partitions[op.0 as usize].clone();
    let program = ipub::lower::lower(&graph, &plan_of).expect("the example project lowers");
    ipub::lower::verify::verify(&graph, &program).expect("the lowered program verifies");
    program
}

fn hash(program: &Program) -> String {
    let json = serde_json::to_vec(program).expect("programs serialise");
    blake3::hash(&json).to_hex().to_string()
}

#[test]
fn example_projects_lower_to_the_recorded_programs() {
    let actual: Vec<String> = [
        "projects/attention-f16.toml",
        "projects/matmul-f8.toml",
        "projects/mlp-f16.toml",
        "projects/vit-fp8.toml",
    ]
    .iter()
    .map(|project| format!("{project} {}\n", hash(&lowered(project))))
    .collect();
    expect_test::expect![[r#"
        projects/attention-f16.toml a45a29487efce15e2515c325b541f367ef45c86ffa1cfa6f41532867ba814a83
        projects/matmul-f8.toml 3c352161990bc2ce78de8975b71a60d92b7ae115c0dbd218fe01cc1cee2991f2
        projects/mlp-f16.toml 12f29941e42b6d1ae38a15949a9c97a109b1f234c48f82edc1ea62b8ca9218c0
        projects/vit-fp8.toml 0aefb266483ed0aeceb8eb4273e69427117de7927dfb98f93d9049c04b727202
    "#]]
    .assert_eq(&actual.concat());
}
