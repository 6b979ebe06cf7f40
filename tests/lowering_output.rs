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
        projects/attention-f16.toml 638525d0cebcc1621a75e52186113ef2d3e0cef505c310ab88b34055c8824907
        projects/matmul-f8.toml 02f41185b332d8758e46182eaa20897fc0ae43e293e36dc289e8c8cae5e4fa17
        projects/mlp-f16.toml 05e03adb92e1aea84254b3a19678c246c4b9d9f20a4f1f50b2e0341c333aafb9
        projects/vit-fp8.toml 7451c00a00f798ee8c1300b228aa7c49f11f85b5d5657429c4fd1a37ff0be93b
    "#]]
    .assert_eq(&actual.concat());
}
