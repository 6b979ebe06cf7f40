//! The AMP GEMM kernel (`device/gemm_f16_amp.S`) on the single-tile
//! executor: every variant (f16 or FP8 inputs, interleaved or plain memory)
//! assembled from the real source through the kernel pipeline, linked, and
//! run by a supervisor that starts all six workers.
//!
//! Results are checked two ways: bit for bit against a host emulation of
//! the AMP's documented arithmetic (f32 products and sums within a K block,
//! f16 partials between blocks), which pins the data movement exactly, and
//! within a tolerance against an f64 reference, which pins the meaning.
//! Every byte outside the output's slots must be left untouched.
//!
//! The f32-output kernel (`device/gemm_f16_f32out.S`) runs through the same
//! harness: its emulation carries the partials in f32 between K blocks, and
//! its exact-product bound has no f16 rounding in it.

use camino::Utf8Path;
use expect_test::expect;
use half::f16;
use ipub::asm::{self, Placement};
use ipub::exec::{StepStats, Tile};
use ipub::isa::text::assemble_program;
use ipub::isa::Fp8Format;
use ipub::kernels::{self, eval_cost};
use ipub::partition::KernelId;
use ipub::pipeline::kernels::variant_of;
use ipub::target::IPU21;
use ipub::vfs::OsFs;
use std::collections::BTreeMap;

const SUPERVISOR: u32 = 0x4C000;
const KERNEL: u32 = 0x4C100;
const STATE: u32 = 0x4F000;
/// Plain buffers go here (region 0, not interleaved).
const PLAIN_DATA: u32 = 0x50000;
const REGION1: u32 = 0x80000;
const MEMORY_END: u32 = 0xE8000;
const WATCHDOG: u64 = 1 << 32;
const GUARD: u8 = 0xA5;

/// The FP8 formats and scales of the two operands.
#[derive(Clone, Copy, Debug)]
struct Fp8 {
    lhs: Fp8Format,
    lhs_scale: i32,
    rhs: Fp8Format,
    rhs_scale: i32,
}

#[derive(Clone, Copy, Debug)]
struct Case {
    batch: usize,
    rows: usize,
    inner: usize,
    cols: usize,
    fp8: Option<Fp8>,
    interleaved: bool,
    seed: u32,
    /// The f32-output kernel (f16 inputs only).
    f32_out: bool,
}

impl Case {
    fn new(batch: usize, rows: usize, inner: usize, cols: usize) -> Case {
        Case {
            batch,
            rows,
            inner,
            cols,
            fp8: None,
            interleaved: true,
            seed: 1,
            f32_out: false,
        }
    }

    fn fp8(mut self, lhs: Fp8Format, lhs_scale: i32, rhs: Fp8Format, rhs_scale: i32) -> Case {
        self.fp8 = Some(Fp8 {
            lhs,
            lhs_scale,
            rhs,
            rhs_scale,
        });
        self
    }

    fn plain(mut self) -> Case {
        self.interleaved = false;
        self
    }

    fn f32_out(mut self) -> Case {
        self.f32_out = true;
        self
    }

    /// Bytes of one output value.
    fn out_bytes(&self) -> usize {
        if self.f32_out {
            4
        } else {
            2
        }
    }

    fn seed(mut self, seed: u32) -> Case {
        self.seed = seed;
        self
    }

    /// Inputs per K block: one CWEI row.
    fn kb(&self) -> usize {
        if self.fp8.is_some() {
            32
        } else {
            16
        }
    }

    fn k_blocks(&self) -> usize {
        self.inner.div_ceil(self.kb())
    }

    fn col_blocks(&self) -> usize {
        self.cols.div_ceil(16)
    }

    fn element_bytes(&self) -> usize {
        if self.fp8.is_some() {
            1
        } else {
            2
        }
    }

    fn kernel(&self) -> KernelId {
        if self.f32_out {
            return KernelId::GemmF32Out {
                interleaved: self.interleaved,
                k: self.inner as u32,
                c: self.cols as u32,
                r: self.rows as u32,
            };
        }
        KernelId::Gemm {
            fp8: self.fp8.is_some(),
            interleaved: self.interleaved,
            k: self.inner as u32,
            c: self.cols as u32,
            r: self.rows as u32,
        }
    }
}

/// xorshift32: deterministic test data.
struct Rng(u32);

impl Rng {
    fn new(seed: u32) -> Rng {
        Rng(seed.wrapping_mul(2_654_435_761) | 1)
    }

    /// A value in [-2, 2).
    fn value(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 17;
        self.0 ^= self.0 << 5;
        f64::from(self.0 % 4096) / 1024.0 - 2.0
    }
}

/// One operand quantised to its storage format: the bytes of each element
/// and the value the device decodes from them.
fn quantise(values: &[f64], fp8: Option<(Fp8Format, i32)>) -> (Vec<Vec<u8>>, Vec<f32>) {
    values
        .iter()
        .map(|v| match fp8 {
            None => {
                let h = f16::from_f64(*v);
                (h.to_le_bytes().to_vec(), h.to_f32())
            }
            Some((format, scale)) => {
                let code = format.from_f64(v * 2f64.powi(-scale));
                (vec![code], (format.to_f64(code) * 2f64.powi(scale)) as f32)
            }
        })
        .unzip()
}

/// Host data of a case: `a[b][r][k]`, `b[b][k][n]` as decoded values, and
/// the three device buffers in the kernel's layouts.
struct Data {
    a: Vec<f32>,
    b: Vec<f32>,
    in0: Vec<u8>,
    in1: Vec<u8>,
    out_len: usize,
}

fn data(case: &Case) -> Data {
    let (batch, rows, inner, cols) = (case.batch, case.rows, case.inner, case.cols);
    let mut rng = Rng::new(case.seed);
    let raw_a: Vec<f64> = (0..batch * rows * inner).map(|_| rng.value()).collect();
    // Weights a little smaller, so long sums stay well inside f16.
    let raw_b: Vec<f64> = (0..batch * inner * cols)
        .map(|_| rng.value() / 2.0)
        .collect();
    let (a_bytes, a) = quantise(&raw_a, case.fp8.map(|f| (f.lhs, f.lhs_scale)));
    let (b_bytes, b) = quantise(&raw_b, case.fp8.map(|f| (f.rhs, f.rhs_scale)));
    let (kb, kbs, cbs, es) = (
        case.kb(),
        case.k_blocks(),
        case.col_blocks(),
        case.element_bytes(),
    );
    let zero = vec![0u8; es];
    let mut in0 = Vec::new();
    for bi in 0..batch {
        for kbi in 0..kbs {
            for r in 0..rows {
                for j in 0..kb {
                    let k = kbi * kb + j;
                    in0.extend_from_slice(if k < inner {
                        &a_bytes[(bi * rows + r) * inner + k]
                    } else {
                        &zero
                    });
                }
            }
        }
    }
    let mut in1 = Vec::new();
    for bi in 0..batch {
        for cb in 0..cbs {
            for kbi in 0..kbs {
                for c in 0..16 {
                    for j in 0..kb {
                        let (k, n) = (kbi * kb + j, cb * 16 + c);
                        in1.extend_from_slice(if k < inner && n < cols {
                            &b_bytes[(bi * inner + k) * cols + n]
                        } else {
                            &zero
                        });
                    }
                }
            }
        }
    }
    Data {
        a,
        b,
        in0,
        in1,
        out_len: batch * cbs * rows * 16 * case.out_bytes(),
    }
}

/// The device's arithmetic, emulated: per K block, four phases of f32
/// products summed left to right, the phases accumulated in f32, then the
/// block's sum added to the f16 partial and rounded to f16 (or, for the
/// f32-output kernel, added to the f32 partial in f32). Returns `[b][r][n]`
/// as f32 values.
fn emulate(case: &Case, d: &Data) -> Vec<f32> {
    let (rows, inner, cols, kb) = (case.rows, case.inner, case.cols, case.kb());
    let mut out = Vec::new();
    for bi in 0..case.batch {
        for r in 0..rows {
            for n in 0..cols {
                let mut partial = 0f32;
                for kbi in 0..case.k_blocks() {
                    let mut acc = 0f32;
                    for phase in 0..4 {
                        let mut s = 0f32;
                        for j in 0..kb / 4 {
                            let k = kbi * kb + phase * kb / 4 + j;
                            let term = if k < inner {
                                d.a[(bi * rows + r) * inner + k] * d.b[(bi * inner + k) * cols + n]
                            } else {
                                0.0
                            };
                            s = if j == 0 { term } else { s + term };
                        }
                        acc += s;
                    }
                    partial = if case.f32_out {
                        acc + partial
                    } else {
                        f16::from_f32(acc + partial).to_f32()
                    };
                }
                out.push(partial);
            }
        }
    }
    out
}

/// The exact result in f64 and the sum of the products' magnitudes (the
/// scale of the rounding error), `[b][r][n]`.
fn exact(case: &Case, d: &Data) -> Vec<(f64, f64)> {
    let (rows, inner, cols) = (case.rows, case.inner, case.cols);
    let mut out = Vec::new();
    for bi in 0..case.batch {
        for r in 0..rows {
            for n in 0..cols {
                let (mut sum, mut magnitude) = (0f64, 0f64);
                for k in 0..inner {
                    let p = f64::from(d.a[(bi * rows + r) * inner + k])
                        * f64::from(d.b[(bi * inner + k) * cols + n]);
                    sum += p;
                    magnitude += p.abs();
                }
                out.push((sum, magnitude));
            }
        }
    }
    out
}

/// Where a case's buffers go: interleaved cases in region 1 with the inputs
/// ending exactly at the end of tile memory (a read past them faults),
/// plain ones in region 0 (where a paced load faults).
struct Addresses {
    in0: u32,
    in1: u32,
    out: u32,
}

fn addresses(case: &Case, d: &Data) -> Addresses {
    let align = |n: usize| (n as u32).next_multiple_of(16);
    if case.interleaved {
        let in0 = MEMORY_END - align(d.in0.len());
        let in1 = in0 - 64 - align(d.in1.len());
        let out = in1 - 64 - align(d.out_len);
        assert!(out >= REGION1 + 64, "the case fits in region 1");
        Addresses { in0, in1, out }
    } else {
        let out = PLAIN_DATA + 64;
        let in0 = out + align(d.out_len) + 64;
        let in1 = in0 + align(d.in0.len()) + 64;
        assert!(
            in1 + align(d.in1.len()) < 0x80000,
            "the case fits in region 0"
        );
        Addresses { in0, in1, out }
    }
}

/// What one run produced.
struct Run {
    /// `[b][r][n]`, the unpadded result.
    result: Vec<f32>,
    stats: StepStats,
    /// The variant's `.ipub_cost` value.
    cost: i64,
}

fn run(case: &Case) -> Run {
    let dir = Utf8Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/device"));
    let name = case.kernel().to_string();
    let variant = variant_of(case.kernel(), dir).expect("a GEMM variant");
    let pre = asm::preprocess(
        &OsFs,
        &variant.source,
        &variant.defines,
        &variant.include_dirs,
    );
    let compiled = kernels::compile_preprocessed(pre, &variant, &IPU21, "test")
        .unwrap_or_else(|e| panic!("{name} compiles: {e}"));
    let objects = [compiled.object.clone()];
    let placements = Placement::pack(&objects, KERNEL, 0x4E000);
    let linked = asm::link(&objects, &placements, &IPU21).expect("links");
    let entry_name = variant
        .entry
        .as_deref()
        .expect("GEMM variants name their entry");
    let entry = linked.symbols[entry_name].value as u32;
    let supervisor = assemble_program(
        &format!("setzi $m1, {entry:#x}\nsetzi $m2, {STATE:#x}\nrunall $m1, $m2\nsync 0\n"),
        SUPERVISOR,
    )
    .expect("the supervisor assembles");

    let mut tile = Tile::new(&IPU21, 0);
    let mut code: Vec<u8> = supervisor.iter().flat_map(|w| w.to_le_bytes()).collect();
    for section in &linked.sections {
        if section.code {
            let at = (section.address - SUPERVISOR) as usize;
            code.resize(code.len().max(at), 0);
            code.truncate(at);
            code.extend_from_slice(&section.bytes);
        } else {
            tile.write_bytes(section.address, &section.bytes)
                .expect("data fits");
        }
    }
    let words: Vec<u32> = code
        .chunks(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    tile.load_code(SUPERVISOR, &words).expect("code fits");

    let d = data(case);
    let at = addresses(case, &d);
    // Guard bytes everywhere data may go, so stray stores show.
    let (lo, hi) = if case.interleaved {
        (REGION1, MEMORY_END)
    } else {
        (PLAIN_DATA, REGION1)
    };
    tile.write_bytes(lo, &vec![GUARD; (hi - lo) as usize])
        .expect("guard fits");
    tile.write_bytes(at.in0, &d.in0).expect("in0 fits");
    tile.write_bytes(at.in1, &d.in1).expect("in1 fits");

    let fp8 = case.fp8;
    let mut fields = BTreeMap::from([
        ("in0", at.in0 as i64),
        ("in1", at.in1 as i64),
        ("out", at.out as i64),
        ("batch", case.batch as i64),
        ("rows", case.rows as i64),
        ("inner", case.inner as i64),
        ("cols", case.cols as i64),
        ("out_scale", 0),
    ]);
    if let Some(f) = fp8 {
        let f152 = |format| i64::from(format == Fp8Format::F152);
        fields.insert("lhs_scale", i64::from(f.lhs_scale));
        fields.insert("rhs_scale", i64::from(f.rhs_scale));
        fields.insert("lhs_f152", f152(f.lhs));
        fields.insert("rhs_f152", f152(f.rhs));
    }
    let entry_meta = &compiled.metadata.entries[0];
    for p in &entry_meta.params {
        let value = fields
            .get(p.name.as_str())
            .unwrap_or_else(|| panic!("the emitter knows no field `{}`", p.name));
        tile.write_bytes(STATE + p.offset, &(*value as u32).to_le_bytes())
            .expect("state fits");
    }
    let stats = tile
        .run_supervisor(SUPERVISOR, WATCHDOG)
        .unwrap_or_else(|fault| panic!("{name} faulted: {fault:?}"));
    assert!(stats.workers_ok, "every worker exits with zero");

    // Untouched memory around and inside the buffers' padding.
    let memory = tile.read_bytes(lo, hi - lo).expect("readable").to_vec();
    let out_range = at.out - lo..at.out - lo + d.out_len as u32;
    let in0_range = at.in0 - lo..at.in0 - lo + d.in0.len() as u32;
    let in1_range = at.in1 - lo..at.in1 - lo + d.in1.len() as u32;
    for (i, byte) in memory.iter().enumerate() {
        let i = i as u32;
        if in0_range.contains(&i) || in1_range.contains(&i) || out_range.contains(&i) {
            continue;
        }
        assert_eq!(*byte, GUARD, "{name}: stray store at {:#x}", lo + i);
    }
    assert_eq!(
        &memory[in0_range.start as usize..in0_range.end as usize],
        &d.in0[..]
    );
    assert_eq!(
        &memory[in1_range.start as usize..in1_range.end as usize],
        &d.in1[..]
    );

    // The output: [b][C'/16][rows][16]; padding channels must be zero.
    let out = &memory[out_range.start as usize..out_range.end as usize];
    let mut result = Vec::new();
    let cbs = case.col_blocks();
    for bi in 0..case.batch {
        for r in 0..case.rows {
            for cb in 0..cbs {
                for c in 0..16 {
                    let es = case.out_bytes();
                    let at = (((bi * cbs + cb) * case.rows + r) * 16 + c) * es;
                    let v = if case.f32_out {
                        f32::from_le_bytes([out[at], out[at + 1], out[at + 2], out[at + 3]])
                    } else {
                        f16::from_le_bytes([out[at], out[at + 1]]).to_f32()
                    };
                    if cb * 16 + c < case.cols {
                        result.push(v);
                    } else {
                        assert_eq!(v.to_bits(), 0, "{name}: padding channel {c} of row {r}");
                    }
                }
            }
        }
    }
    let mut defines: BTreeMap<String, i64> = variant
        .defines
        .iter()
        .map(|(k, v)| (k.clone(), v.parse().expect("integer define")))
        .collect();
    defines.insert("batch".to_string(), case.batch as i64);
    let formula = &entry_meta.cost.as_ref().expect("a cost formula").formula;
    let cost = eval_cost(formula, &defines).expect("the cost formula evaluates");
    Run {
        result,
        stats,
        cost,
    }
}

/// Runs a case and checks it against both references; returns the run.
fn check(case: Case) -> Run {
    let d = data(&case);
    let run = run(&case);
    let emulated = emulate(&case, &d);
    let name = case.kernel().to_string();
    for (i, (device, want)) in run.result.iter().zip(&emulated).enumerate() {
        assert_eq!(
            device.to_bits(),
            want.to_bits(),
            "{name} {case:?}: element {i} (b, r, n) = ({}, {}, {}): device {device}, emulated {want}",
            i / (case.rows * case.cols),
            i / case.cols % case.rows,
            i % case.cols,
        );
    }
    // Each K block rounds its partial to f16 once (half an ulp, 2^-11
    // relative), and the f32 sums add a little more. With f32 partials
    // only f32 additions round: at most one half-ulp (2^-24) per addition
    // along the chain, inner + 2 of them.
    let k_blocks = case.k_blocks() as f64;
    for (i, (device, (want, magnitude))) in run.result.iter().zip(exact(&case, &d)).enumerate() {
        let error = (f64::from(*device) - want).abs();
        let bound = if case.f32_out {
            magnitude * (case.inner as f64 + 2.0) * 2f64.powi(-24)
        } else {
            magnitude * (k_blocks * 2f64.powi(-11) + 2f64.powi(-20)) + 1e-6
        };
        assert!(
            error <= bound,
            "{name}: element {i}: device {device}, exact {want}, error {error} > {bound}"
        );
    }
    assert_eq!(run.result.len(), case.batch * case.rows * case.cols);
    run
}

const F143: Fp8Format = Fp8Format::F143;
const F152: Fp8Format = Fp8Format::F152;

#[test]
fn f16_interleaved_matches_the_amp_emulation_and_the_exact_product() {
    check(Case::new(1, 16, 64, 96));
    // K not a multiple of 16, cols not a multiple of 16, batch 2, two
    // column blocks: three row groups of 2, 2 and 1 rows (the last takes
    // the single-row path).
    check(Case::new(2, 5, 40, 20).seed(2));
    // One row, one partial column block: rows < 6 and most workers idle.
    check(Case::new(1, 1, 16, 5).seed(3));
    // Five column blocks: one worker idle; 13 rows.
    check(Case::new(1, 13, 17, 80).seed(4));
    // One column block over six row groups of 11 rows and one of 9.
    check(Case::new(1, 64, 48, 16).seed(10));
    // Three column blocks, two row groups of 4 and 3 rows.
    check(Case::new(1, 7, 16, 48).seed(11));
}

#[test]
fn f16_plain_matches_the_amp_emulation_and_the_exact_product() {
    // Seven column blocks over two batches: fourteen units on six workers.
    check(Case::new(2, 7, 33, 100).plain());
    check(Case::new(1, 2, 16, 16).plain().seed(5));
    check(Case::new(1, 9, 50, 48).plain().seed(6));
}

#[test]
fn fp8_interleaved_matches_the_amp_emulation_and_the_exact_product() {
    check(Case::new(1, 16, 96, 96).fp8(F143, -2, F152, 1));
    check(Case::new(2, 5, 40, 20).fp8(F152, 0, F143, -3).seed(7));
    check(Case::new(1, 3, 50, 16).fp8(F143, 1, F143, 0).seed(8));
}

#[test]
fn fp8_plain_matches_the_amp_emulation_and_the_exact_product() {
    check(Case::new(1, 3, 50, 16).fp8(F143, 0, F152, 2).plain());
    check(
        Case::new(2, 8, 64, 112)
            .fp8(F152, -1, F152, 0)
            .plain()
            .seed(9),
    );
}

/// The throughput of the representative shape (rows 64, K 384, cols 96:
/// one column block per worker, 24 or 12 K blocks) and of a narrow shard,
/// as MACs per cycle against the AMP peak, with the `.ipub_cost` estimate
/// beside it.
#[test]
fn representative_shape_throughput() {
    let shape = |c: Case| {
        let run = check(c);
        let macs = (c.batch * c.rows * c.inner * c.cols) as f64;
        let peak = if c.fp8.is_some() { 128.0 } else { 64.0 };
        let per_cycle = macs / run.stats.cycles as f64;
        format!(
            "{}: {} cycles (cost formula {}), {:.1} MACs/cycle = {:.0}% of {peak}\n",
            c.kernel(),
            run.stats.cycles,
            run.cost,
            per_cycle,
            100.0 * per_cycle / peak
        )
    };
    let mut report = String::new();
    report += &shape(Case::new(1, 64, 384, 96));
    report += &shape(Case::new(1, 64, 384, 96).fp8(F143, 0, F143, 0));
    report += &shape(Case::new(1, 64, 384, 96).plain());
    report += &shape(Case::new(1, 64, 384, 96).fp8(F143, 0, F143, 0).plain());
    // A narrow shard: one column block, so six row groups of 4 or 5 rows
    // each load every weight block; the weights dominate.
    report += &shape(Case::new(1, 25, 384, 16).fp8(F143, 0, F143, 0));
    expect![[r#"
        gemm_f16_interleaved_k384_c96_r64: 43056 cycles (cost formula 43248), 54.8 MACs/cycle = 86% of 64
        gemm_f8_interleaved_k384_c96_r64: 21906 cycles (cost formula 21936), 107.7 MACs/cycle = 84% of 128
        gemm_f16_k384_c96_r64: 119778 cycles (cost formula 121416), 19.7 MACs/cycle = 31% of 64
        gemm_f8_k384_c96_r64: 59460 cycles (cost formula 60936), 39.7 MACs/cycle = 31% of 128
        gemm_f8_interleaved_k384_c16_r25: 5040 cycles (cost formula 4944), 30.5 MACs/cycle = 24% of 128
    "#]]
    .assert_eq(&report);
}

#[test]
fn f32_out_matches_the_amp_emulation_and_the_exact_product() {
    // Several K blocks (a partial last one), two batches, two column
    // blocks over three row groups; one row; five and seven column blocks.
    check(Case::new(2, 5, 72, 20).f32_out().seed(12));
    check(Case::new(1, 1, 16, 5).f32_out().seed(13));
    check(Case::new(1, 13, 130, 80).f32_out().seed(14));
    check(Case::new(2, 7, 33, 100).f32_out().plain().seed(15));
    check(Case::new(1, 64, 48, 16).f32_out().seed(16));
}

/// The f32-output kernel keeps what f16 partials lose: a sum whose terms
/// cancel leaves a remainder far below an f16 ulp of the running sum, and
/// the f32 result holds it where the f16 kernel rounds it away.
#[test]
fn f32_out_keeps_what_f16_partials_round_away() {
    let case = Case::new(1, 6, 256, 32).seed(17);
    let f16_error = max_relative_error(&case);
    let f32_error = max_relative_error(&case.f32_out());
    assert!(
        f32_error * 100.0 < f16_error,
        "f32 partials ({f32_error:e}) should be far closer to the exact product than f16 ones ({f16_error:e})"
    );
}

/// The largest error of a case's result against the exact product,
/// relative to the sum of the products' magnitudes.
fn max_relative_error(case: &Case) -> f64 {
    let d = data(case);
    let run = check(*case);
    run.result
        .iter()
        .zip(exact(case, &d))
        .map(|(device, (want, magnitude))| (f64::from(*device) - want).abs() / magnitude.max(1e-30))
        .fold(0.0, f64::max)
}

/// The f32-output kernel's cycles against its `.ipub_cost` over a grid of
/// shard shapes (K blocks, rows, column blocks and so the work split):
/// every estimate within 15 % of the measured cycles.
#[test]
fn f32_out_cost_formula_fits_the_measured_cycles() {
    let shapes = [
        (1, 16, 16),
        (4, 64, 16),
        (16, 64, 32),
        (13, 130, 80),
        (64, 384, 96),
        (32, 256, 192),
        (25, 384, 16),
        (7, 48, 48),
    ];
    let cases = shapes.into_iter().flat_map(|(rows, inner, cols)| {
        let case = Case::new(1, rows, inner, cols).f32_out();
        [case, case.plain()]
    });
    let batched = [(3, 17, 64, 128), (2, 13, 32, 48)]
        .into_iter()
        .map(|(batch, rows, inner, cols)| Case::new(batch, rows, inner, cols).f32_out());
    formula_fits(cases.chain(batched), 0.15);
}

/// The GEMM's cycles against its `.ipub_cost` over a grid of shard shapes
/// (K blocks, rows, column blocks and so the work split), f16 and FP8 with
/// operands in interleaved memory, as the planner chooses them: every
/// estimate within 10 % of the measured cycles.
#[test]
fn cost_formula_fits_the_measured_cycles() {
    let shapes = [
        (1, 32, 16),
        (2, 32, 48),
        (9, 32, 48),
        (8, 128, 64),
        (16, 128, 32),
        (25, 384, 16),
        (50, 384, 96),
        (50, 192, 48),
        (64, 384, 96),
        (99, 96, 48),
        (7, 64, 200),
        // Single rows a worker (a pass of one row, then the next pass
        // waits for its outputs), and two.
        (1, 1000, 4),
        (4, 1000, 4),
        (7, 1000, 4),
        (1, 1000, 64),
        (13, 197, 5),
        (16, 1000, 3),
    ];
    // Batches share the column blocks' units out over the workers: three
    // batches of eight blocks are four units a worker, not six.
    let batched = [
        (3, 17, 96, 128),
        (3, 17, 128, 17),
        (6, 40, 64, 32),
        (2, 50, 192, 96),
        (4, 9, 64, 208),
        (4, 17, 32, 208),
        (100, 4, 4, 4),
        (10, 3, 7, 1),
    ];
    let cases = shapes
        .into_iter()
        .map(|(rows, inner, cols)| (1, rows, inner, cols))
        .chain(batched)
        .flat_map(|(batch, rows, inner, cols)| {
            let case = Case::new(batch, rows, inner, cols);
            [case.fp8(F143, 0, F143, 0), case]
        });
    formula_fits(cases, 0.10);
}

/// Runs each case and prints its cycles beside its `.ipub_cost`; fails
/// when an estimate is further than `tolerance` from the measured cycles.
fn formula_fits(cases: impl Iterator<Item = Case>, tolerance: f64) {
    let mut table = String::new();
    let mut misfits = Vec::new();
    for case in cases {
        let run = check(case);
        let error = (run.cost as f64 - run.stats.cycles as f64) / run.stats.cycles as f64;
        let line = format!(
            "{}: {} cycles, formula {} ({:+.1}%)",
            case.kernel(),
            run.stats.cycles,
            run.cost,
            100.0 * error
        );
        table += &line;
        table += "\n";
        if error.abs() > tolerance {
            misfits.push(line);
        }
    }
    println!("{table}");
    assert!(
        misfits.is_empty(),
        "formula misses:\n{}",
        misfits.join("\n")
    );
}
