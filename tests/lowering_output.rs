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
        projects/attention-f16.toml 1eab3a1dd3d95e32e07bec83df1e6b5528aa4e5a3b2d80734d7d97ad08eadf4b
        projects/matmul-f8.toml 6336e91266f0eed61e1b580c1ff4cf4dada92750cb1f54eeabe874aab59ab1a7
        projects/mlp-f16.toml 9d8e333c0a380a49f923d3da0938dcc66cecfe45ceb18dfc7d1dbd7a7dbd4e6d
        projects/vit-fp8.toml 14e2f306dc0f16ed2426dd3b694bfdc240730bacfba98683396750bb947c6cce
    "#]]
    .assert_eq(&actual.concat());
}
