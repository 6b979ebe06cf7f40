//! The model device's speed on vit-fp8 (64 busy tiles): simulated
//! tile-cycles and instructions per second of wall time for one `run` call.
//! `cargo bench --bench model`.

use ipub::db::{Database, Db};
use ipub::device::engine::ExecEngine;
use ipub::device::model::{ComputeEngine, ComputeStats, Fault, ModelDevice};
use ipub::package::Call;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Counts the instructions the executor reports.
struct Counting<'a> {
    inner: &'a ExecEngine,
    instructions: AtomicU64,
}

impl ComputeEngine for Counting<'_> {
    fn run_compute(
        &self,
        tile: u32,
        memory: &mut [u8],
        entry_pc: u32,
        watchdog_cycles: u64,
    ) -> Result<ComputeStats, Fault> {
        let stats = self
            .inner
            .run_compute(tile, memory, entry_pc, watchdog_cycles)?;
        self.instructions
            .fetch_add(stats.instructions, Ordering::Relaxed);
        Ok(stats)
    }
}

fn main() {
    let db = Database::on_disk();
    let path = camino::Utf8PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("projects/vit-fp8.toml");
    let file = db.file(&path);
    let package = Arc::new(ipub::cli::run::package(&db, file).expect("vit-fp8 builds"));
    let mut best = f64::INFINITY;
    let mut result = (0, 0);
    for _ in 0..3 {
        let mut device = ModelDevice::load(Arc::clone(&package)).expect("loads");
        let inner = ExecEngine::new(device.target(), &package);
        let engine = Counting {
            inner: &inner,
            instructions: AtomicU64::new(0),
        };
        let mut host = ipub::cli::run::seeded_inputs(&package);
        let start = Instant::now();
        let record = device
            .run_call(Call::Run, &engine, &mut host)
            .expect("runs");
        let wall = start.elapsed().as_secs_f64();
        if wall < best {
            best = wall;
            result = (record.cycles, engine.instructions.load(Ordering::Relaxed));
        }
    }
    let tiles = package.tiles.len() as f64;
    let (cycles, instructions) = result;
    println!(
        "vit-fp8 on the model: {cycles} cycles on {tiles} tiles in {:.3} s (best of 3)",
        best
    );
    println!(
        "  {:.1} M simulated tile-cycles/s, {:.1} M simulated instructions/s",
        cycles as f64 * tiles / best / 1e6,
        instructions as f64 / best / 1e6
    );
}
