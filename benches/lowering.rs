//! Lowering time of each example project: `cargo bench --bench lowering`
//! prints the best of five runs of `lower::lower` and of the verifier, with
//! the plans computed once beforehand so only lowering is timed (the
//! full-chip projects' plans take a few seconds to compute first).

use ipub::db::{Database, Db};
use ipub::graph::OpId;
use std::time::{Duration, Instant};

const PROJECTS: [&str; 6] = [
    "projects/attention-f16.toml",
    "projects/matmul-f8.toml",
    "projects/mlp-f16.toml",
    "projects/vit-fp8.toml",
    "projects/siglip-mlp-f8.toml",
    "projects/vit-b16-fp8.toml",
];
const RUNS: usize = 5;

fn best_of(runs: usize, mut work: impl FnMut()) -> Duration {
    (0..runs)
        .map(|_| {
            let started = Instant::now();
            work();
            started.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn main() {
    println!(
        "{:<30} {:>12} {:>12} {:>9} {:>10}  (best of {RUNS})",
        "project", "lower", "verify", "buffers", "transfers"
    );
    for project in PROJECTS {
        let db = Database::on_disk();
        let path = camino::Utf8PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(project);
        let file = db.file(&path);
        let graph = match ipub::pipeline::graph(&db, file) {
            Ok(graph) => graph,
            Err(error) => {
                eprintln!("{project}: {error}");
                std::process::exit(1);
            }
        };
        let partitions = ipub::pipeline::selected_partitions(&db, file);
        let plan_of = |op: OpId| partitions[op.0 as usize].clone();
        let lower = || ipub::lower::lower(&graph, &plan_of);
        let program = match lower() {
            Ok(program) => program,
            Err(error) => {
                eprintln!("{project}: {error}");
                std::process::exit(1);
            }
        };
        let transfers: usize = program.phases.iter().map(|p| p.transfers.len()).sum();
        let lowering = best_of(RUNS, || {
            std::hint::black_box(lower().ok());
        });
        let verifying = best_of(RUNS, || {
            std::hint::black_box(ipub::lower::verify::verify(&graph, &program).ok());
        });
        println!(
            "{project:<30} {:>9.1} ms {:>9.1} ms {:>9} {:>10}",
            lowering.as_secs_f64() * 1e3,
            verifying.as_secs_f64() * 1e3,
            program.buffers.len(),
            transfers
        );
    }
}
