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
        projects/attention-f16.toml d7d9fbba9f88825af2836f2b9540e28bff8b06e7bcca6c8103315f0b880ad923
        projects/matmul-f8.toml 52fd74ff16a44f125742ded8407827cf3eac31761eff21db1612a6b00214e605
        projects/mlp-f16.toml 6feb960dd851ef16c3798ae5fd756715abccd373cacfa4ccf7202b2e13e7a872
        projects/vit-fp8.toml 72a17ab2fccce70d9c6661f4df36f1c9fc9ff1dc3566a488ed95fa5b249fa643
    "#]]
    .assert_eq(&actual.concat());
}
