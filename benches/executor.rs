//! Executor benchmark: simulated instructions per second and the AMP
//! throughput of a hand-written GEMM inner loop on one tile with six
//! workers, against the IPU21 peaks (64 f16 / 128 FP8 MACs per cycle), and
//! the same figures for the real GEMM kernel (`device/gemm_f16_amp.S`,
//! assembled through the kernel pipeline) on a representative shard.
//!
//! Run with `cargo bench --bench executor` (or `cargo test --bench
//! executor` for a quicker unoptimised build); it prints its figures.

use camino::Utf8Path;
use ipub::asm::{self, Placement};
use ipub::exec::{StepStats, Tile};
use ipub::isa::text::assemble_program;
use ipub::kernels;
use ipub::pipeline::kernels::variant_of;
use ipub::target::IPU21;
use ipub::vfs::OsFs;
use std::time::Instant;

const CODE: u32 = 0x4C000;
const STATE: u32 = 0x60000;
const OUT: u32 = 0x62000;
const WEIGHTS: u32 = 0x61000;
const REGION1: u32 = 0x80000;

/// Supervisor: start six workers on the GEMM and sync. Worker: pick its
/// 20-byte state block by `$wid`, load CWEI, stream `rows` rows.
fn gemm_program(amp: &str, rows: u32, pad: bool) -> String {
    format!(
        "
        setzi $m1, worker
        setzi $m2, {STATE:#x}
        runall $m1, $m2
        sync 0
        worker:
        get $m1, $wid
        mul $m1, $m1, 20
        add $m0, $m0, $m1
        ld32 $m4, $m0, 0
        ld32 $m5, $m0, 4
        ld32 $m6, $m0, 8
        ld32 $m7, $m0, 12
        ld32 $m8, $m0, 16
        put $fp8cfg, $m8
        ampclr
        rpt 64, 1
        ldcwei $m7+=
        {}
        rpt {}, 2
        {{ ld2xst64pace $a0:1, $a2:3, $a4:5, $m4:6+= ; {amp} $a4:5, $a0:1, $a2:3 }}
        st64step $a4:5, $m6+=, 8
        exitz $mzero
        ",
        if pad { "nop" } else { "" },
        4 * (rows + 1)
    )
}

fn gemm_tile(amp: &str, rows: u32) -> Tile {
    let words = assemble_program(&gemm_program(amp, rows, false), CODE)
        .or_else(|_| assemble_program(&gemm_program(amp, rows, true), CODE))
        .expect("the benchmark kernel assembles");
    let mut tile = Tile::new(&IPU21, 0);
    tile.load_code(CODE, &words).expect("code fits");
    let row_bytes = 32;
    let stream = rows * row_bytes + 64;
    for w in 0..6u32 {
        // Inputs and partials in interleaved memory, with room for the
        // partial stream's lead and the flush row.
        let x = REGION1 + w * 2 * stream;
        let p = x + stream + 32;
        let out = OUT + w * stream;
        let state: Vec<u8> = [x, p - 32, out, WEIGHTS, 0x0003_0000]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        tile.write_bytes(STATE + 20 * w, &state)
            .expect("state fits");
        let data: Vec<u8> = (0..stream).map(|i| (i * 37 % 61) as u8 & 0x3B).collect();
        tile.write_bytes(x, &data).expect("inputs fit");
        tile.write_bytes(p - 32, &data).expect("partials fit");
    }
    let weights: Vec<u8> = (0..512u32).map(|i| (i * 13 % 29) as u8 & 0x3B).collect();
    tile.write_bytes(WEIGHTS, &weights).expect("weights fit");
    tile
}

fn report(name: &str, tile: &mut Tile, useful_macs_per_step: u64, peak: u64) {
    let mut stats: Option<StepStats> = None;
    let start = Instant::now();
    let mut steps = 0u64;
    while steps < 3 || start.elapsed().as_secs_f64() < 1.0 {
        stats = Some(
            tile.run_supervisor(CODE, 1 << 40)
                .expect("the benchmark runs"),
        );
        steps += 1;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let s = stats.expect("at least one step ran");
    let instructions = (s.supervisor_instructions + s.worker_instructions) * steps;
    println!(
        "{name}: {} tile cycles/step, AMP issued {:.1} MACs/cycle, useful {:.1} MACs/cycle = {:.0}% of peak {peak}",
        s.cycles,
        s.amp_macs as f64 / s.cycles as f64,
        useful_macs_per_step as f64 / s.cycles as f64,
        100.0 * useful_macs_per_step as f64 / s.cycles as f64 / peak as f64,
    );
    println!(
        "{name}: {:.1} M simulated instructions/s, {:.1} M tile cycles/s, {:.1} G MACs/s ({steps} steps in {elapsed:.2} s)",
        instructions as f64 / elapsed / 1e6,
        (s.cycles * steps) as f64 / elapsed / 1e6,
        (s.amp_macs * steps) as f64 / elapsed / 1e9,
    );
}

/// A tile set up to run `device/gemm_f16_amp.S` on one shard of `rows` x
/// `inner` by `inner` x `cols` (batch 1): the supervisor at [`CODE`], the
/// kernel after it, buffers in interleaved memory or in region 0.
fn device_gemm_tile(fp8: bool, interleaved: bool, rows: u32, inner: u32, cols: u32) -> Tile {
    let kernel = ipub::partition::KernelId::Gemm {
        fp8,
        interleaved,
        k: inner,
        c: cols,
        r: rows,
    };
    let dir = Utf8Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/device"));
    let variant = variant_of(kernel, dir).expect("a GEMM variant");
    let pre = asm::preprocess(
        &OsFs,
        &variant.source,
        &variant.defines,
        &variant.include_dirs,
    );
    let compiled = kernels::compile_preprocessed(pre, &variant, &IPU21, "bench")
        .unwrap_or_else(|e| panic!("{kernel}: {e}"));
    let kernel_at = CODE + 0x100;
    let objects = [compiled.object.clone()];
    let linked = asm::link(
        &objects,
        &Placement::pack(&objects, kernel_at, 0x4E000),
        &IPU21,
    )
    .expect("the kernel links");
    let entry = linked.symbols["gemm_amp"].value;
    let state_at = 0x4F000u32;
    let supervisor = assemble_program(
        &format!("setzi $m1, {entry:#x}\nsetzi $m2, {state_at:#x}\nrunall $m1, $m2\nsync 0\n"),
        CODE,
    )
    .expect("the supervisor assembles");
    let mut code: Vec<u8> = supervisor.iter().flat_map(|w| w.to_le_bytes()).collect();
    code.resize((kernel_at - CODE) as usize, 0);
    let text = linked
        .sections
        .iter()
        .find(|s| s.code)
        .expect("a code section");
    code.extend_from_slice(&text.bytes);
    let words: Vec<u32> = code
        .chunks(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    let mut tile = Tile::new(&IPU21, 0);
    tile.load_code(CODE, &words).expect("code fits");

    let kb = if fp8 { 32 } else { 16 };
    let (k_blocks, col_blocks) = (inner.div_ceil(kb), cols.div_ceil(16));
    let in0_len = k_blocks * rows * 32;
    let in1_len = col_blocks * k_blocks * 512;
    let data_at = if interleaved { REGION1 } else { 0x50000 };
    let (in0, in1, out) = (data_at, data_at + in0_len, data_at + in0_len + in1_len);
    // Small finite f16 and FP8 values (no FP8 NaN, no f16 infinities).
    let bytes = |n: u32| -> Vec<u8> { (0..n).map(|i| (i * 37 % 61) as u8 & 0x3B).collect() };
    tile.write_bytes(in0, &bytes(in0_len)).expect("in0 fits");
    tile.write_bytes(in1, &bytes(in1_len)).expect("in1 fits");
    let params = compiled.metadata.entries[0].params.clone();
    for p in params {
        let value: u32 = match p.name.as_str() {
            "in0" => in0,
            "in1" => in1,
            "out" => out,
            "batch" => 1,
            "rows" => rows,
            "inner" => inner,
            "cols" => cols,
            _ => 0,
        };
        tile.write_bytes(state_at + p.offset, &value.to_le_bytes())
            .expect("state fits");
    }
    tile
}

fn main() {
    // The real kernel on a shard of 64 rows, K 384, 96 columns: one
    // column block per worker.
    let (rows, inner, cols) = (64, 384, 96);
    let macs = u64::from(rows * inner * cols);
    for (fp8, interleaved, name) in [
        (false, true, "kernel f16 interleaved"),
        (true, true, "kernel f8 interleaved"),
        (false, false, "kernel f16 plain"),
        (true, false, "kernel f8 plain"),
    ] {
        let mut tile = device_gemm_tile(fp8, interleaved, rows, inner, cols);
        report(name, &mut tile, macs, if fp8 { 128 } else { 64 });
    }

    let rows = 256;
    let mut tile = gemm_tile("f16v4amp", rows);
    report("gemm f16", &mut tile, 6 * u64::from(rows) * 16 * 16, 64);
    let mut tile = gemm_tile("f8v8amp", rows);
    report("gemm f8 ", &mut tile, 6 * u64::from(rows) * 16 * 32, 128);

    // Plain dispatch: integer loops, no memory.
    let code = "
        setzi $m1, worker
        runall $m1, $m2
        sync 0
        worker:
        setzi $m1, 20000
        loop:
        add $m2, $m2, 3
        xor $m3, $m3, $m2
        brnzdec $m1, loop
        exitz $mzero
    ";
    let words = assemble_program(code, CODE).expect("assembles");
    let mut tile = Tile::new(&IPU21, 0);
    tile.load_code(CODE, &words).expect("code fits");
    report("int loop", &mut tile, 0, 1);
}
