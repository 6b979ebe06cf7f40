//! Cold builds of every shipped project the planner supports (fresh
//! database and an empty kernel cache), and for each the modelled cycles,
//! the planner's estimate and its error, the cycles in exchange and sync,
//! and the AMP utilisation against the roofline of its matmul MACs.
//! `cargo bench --bench build`.

use ipub::db::{Database, Db};
use ipub::device::embedded::{Device, EmbeddedModel};
use ipub::package::Call;
use ipub::profile::StepKind;
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let root = camino::Utf8PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let cache = tempfile::tempdir().expect("temporary cache");
    std::env::set_var("IPUB_CACHE_DIR", cache.path());
    for project in [
        "matmul-f8",
        "mixed-f8",
        "mlp-f16",
        "attention-f16",
        "vit-head-f16",
        "vit-fp8",
        "llama-block-f16",
        "siglip-mlp-f8",
        "siglip-block-f8",
        "vit-b16-fp8",
    ] {
        // Remove compiled kernels so every build is cold.
        let _ = std::fs::remove_dir_all(cache.path().join("kernels"));
        let start = Instant::now();
        let db = Database::on_disk();
        let file = db.file(&root.join(format!("projects/{project}.toml")));
        let package = ipub::cli::run::package(&db, file).expect("builds");
        let cold = start.elapsed().as_secs_f64();
        let start = Instant::now();
        let _ = ipub::cli::run::package(&db, file).expect("builds");
        let warm = start.elapsed().as_secs_f64();
        println!(
            "{project}: cold build {:.0} ms, rebuild in the same process {:.1} ms, {} tiles",
            cold * 1000.0,
            warm * 1000.0,
            package.tiles.len()
        );
        let package = Arc::new(package);
        let mut device = EmbeddedModel::new(2_000_000_000);
        device.open().expect("opens");
        device.load(Arc::clone(&package)).expect("loads");
        let mut host = ipub::cli::run::seeded_inputs(&package);
        let record = device.call(Call::Run, &mut host).expect("runs");
        let exchange: u64 = record
            .steps
            .iter()
            .filter(|s| matches!(s.kind, StepKind::Exchange | StepKind::Sync))
            .map(|s| s.cycles)
            .sum();
        let macs = package.graph.matmul_macs();
        let tiles = package.graph.tiles as u64;
        let roofline = macs / (128 * tiles);
        println!(
            "{project}: modelled {} cycles, {} estimated ({:+.1} %), {} in exchange and sync ({:.0} %), {} matmul MACs, roofline {} cycles on {} tiles: AMP utilisation {:.1} %",
            record.cycles,
            package.profile.estimated_cycles,
            100.0 * (package.profile.estimated_cycles as f64 / record.cycles as f64 - 1.0),
            exchange,
            100.0 * exchange as f64 / record.cycles as f64,
            macs,
            roofline,
            tiles,
            100.0 * roofline as f64 / record.cycles as f64
        );
    }
}
