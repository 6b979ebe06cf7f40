use super::*;
use crate::isa::fp8::Fp8Format;
use crate::isa::text::assemble_program;
use crate::target::IPU21;
use expect_test::{expect, Expect};
use half::f16;

const CODE: u32 = 0x4C000;
const DATA: u32 = 0x60000;
const INTERLEAVED: u32 = 0x90000;
const WATCHDOG: u64 = 10_000_000;

fn tile_with(code: &str) -> Tile {
    let mut tile = Tile::new(&IPU21, 7);
    let words = assemble_program(code, CODE).unwrap_or_else(|e| panic!("{e}"));
    tile.load_code(CODE, &words).unwrap();
    tile
}

/// Runs `code` as worker 0 and renders its non-zero registers or its fault.
fn check_worker(code: &str, expect: Expect) {
    let mut tile = tile_with(code);
    let out = match tile.run_worker(0, CODE, DATA, WATCHDOG) {
        Ok(stats) => {
            let regs = tile.worker_regs(0).unwrap();
            let mut out = format!(
                "issues {} instructions {}\n",
                stats.counts.issues, stats.counts.instructions
            );
            for (i, v) in regs.m.iter().enumerate().filter(|(_, v)| **v != 0) {
                out.push_str(&format!("m{i} = {v:#x}\n"));
            }
            for (i, v) in regs.a.iter().enumerate().filter(|(_, v)| **v != 0) {
                out.push_str(&format!("a{i} = {v:#010x}\n"));
            }
            out
        }
        Err(fault) => format!("{fault}\n"),
    };
    expect.assert_eq(&out);
}

#[test]
fn integer_and_address_arithmetic() {
    check_worker(
        "
        setzi $m1, 0x1fffff
        sethi $m1, 0x8000
        add $m2, $m1, -1
        sub $m3, $mzero, 5
        shr $m4, $m3, 28
        sar $m5, $m3, 1
        mul $m6, $m3, $m3
        cmpslt $m7, $m3, 0
        cmpult $m8, $m3, 0
        min $m9, $m3, 7
        max $m10, $m3, 7
        xor $m11, $m1, $m2
        setzi $m12, 33
        shl $m13, $m1, $m12
        add $mzero, $m1, 1
        exitz $mzero
        ",
        expect![[r#"
            issues 16 instructions 16
            m0 = 0x60000
            m1 = 0x8000ffff
            m2 = 0x8000fffe
            m3 = 0xfffffffb
            m4 = 0xf
            m5 = 0xfffffffd
            m6 = 0x19
            m7 = 0x1
            m9 = 0xfffffffb
            m10 = 0x7
            m11 = 0x1
            m12 = 0x21
        "#]],
    );
}

#[test]
fn loads_and_stores_in_their_three_addressing_forms() {
    check_worker(
        "
        setzi $m1, 0x5678
        sethi $m1, 0x1234
        st32 $m1, $m0, 0
        setzi $m2, 0xff80
        st16 $m2, $m0, 4
        lds8 $m3, $m0, 4
        ldz8 $m4, $m0, 4
        lds16 $m5, $m0, 4
        setzi $m6, 2
        ldz16 $m7, $m0, $m6
        ld64step $a0:1, $m0+=, 8
        st32step $a0, $m0+=, 4
        ld32 $a2, $m0, -4
        ldb16 $a3, $m0, -6
        exitz $mzero
        ",
        expect![[r#"
            issues 15 instructions 15
            m0 = 0x6000c
            m1 = 0x12345678
            m2 = 0xff80
            m3 = 0xffffff80
            m4 = 0x80
            m5 = 0xffffff80
            m6 = 0x2
            m7 = 0x1234
            a0 = 0x12345678
            a1 = 0x0000ff80
            a2 = 0x12345678
        "#]],
    );
}

/// The register-stride step forms: each access at the base, then the
/// base advanced by the third register (negative strides wrap).
#[test]
fn step_loads_and_stores_advance_by_a_register() {
    check_worker(
        "
        setzi $m1, 0x5678
        sethi $m1, 0x1234
        st32 $m1, $m0, 0
        st32 $m1, $m0, 4
        setzi $m2, 16
        mov $m3, $m0
        ld64step $a0:1, $m3+=, $m2
        mov $m4, $m0
        st64step $a0:1, $m4+=, $m2
        sub $m5, $mzero, 8
        st64step $a0:1, $m4+=, $m5
        ld64 $a2:3, $m0, 16
        exitz $mzero
        ",
        expect![[r#"
            issues 13 instructions 13
            m0 = 0x60000
            m1 = 0x12345678
            m2 = 0x10
            m3 = 0x60010
            m4 = 0x60008
            m5 = 0xfffffff8
            a0 = 0x12345678
            a1 = 0x12345678
            a2 = 0x12345678
            a3 = 0x12345678
        "#]],
    );
}

#[test]
fn every_fault_cause_is_reported_with_context_and_pc() {
    let cases = [
        ("out of range", "setzi $m1, 0xe7ffc\nld64 $a0:1, $m1, 0"),
        ("misaligned", "ld32 $m1, $m0, 2"),
        ("outside region 0", "setzi $m1, 0x90000\nbr $m1"),
        ("bad word", ".word 0xffffffff"),
        ("supervisor only", "sync 0"),
        ("control in rpt", "rpt 2, 1\nbr 0x4c000"),
        ("read-only creg", "put $wid, $m0"),
        ("128 bits in region 0", "nop\nld128 $a0:3, $m0, 0"),
        (
            "pace outside interleaved",
            "mov $m4, $m0\nld2xst64pace $a0:1, $a2:3, $a4:5, $m4:6+=",
        ),
        (
            "wide weights outside interleaved",
            "mov $m4, $m0\nld128cwei $m4+=",
        ),
        ("watchdog", "loop:\nbr loop"),
        ("zero words are nops up to the watchdog", "nop"),
    ];
    let mut out = String::new();
    for (name, code) in cases {
        let mut tile = tile_with(code);
        let fault = tile.run_worker(3, CODE, DATA, 6000).unwrap_err();
        out.push_str(&format!("{name}: {fault}\n"));
    }
    let mut tile = tile_with("ld64 $a0:1, $m0, 0");
    let fault = tile.run_supervisor(CODE, 6000).unwrap_err();
    out.push_str(&format!("supervisor float: {fault}\n"));
    expect![[r#"
        out of range: tile 7, worker 3, pc 0x4c004: access of 8 bytes at 0xe7ffc is outside tile memory
        misaligned: tile 7, worker 3, pc 0x4c000: access at 0x60002 is not 4-byte aligned
        outside region 0: tile 7, worker 3, pc 0x90000: execution at 0x90000, outside region 0 or unaligned
        bad word: tile 7, worker 3, pc 0x4c000: invalid instruction 0xffffffff: undecodable word
        supervisor only: tile 7, worker 3, pc 0x4c000: invalid instruction 0x3a000000: supervisor-only instruction in a worker
        control in rpt: tile 7, worker 3, pc 0x4c004: invalid instruction 0x2c04c000: control flow inside a repeat body
        read-only creg: tile 7, worker 3, pc 0x4c000: invalid instruction 0x00200006: write to a read-only control register
        128 bits in region 0: tile 7, worker 3, pc 0x4c004: 128-bit or paired access at 0x60000 is outside interleaved memory
        pace outside interleaved: tile 7, worker 3, pc 0x4c004: 128-bit or paired access at 0x60000 is outside interleaved memory
        wide weights outside interleaved: tile 7, worker 3, pc 0x4c004: 128-bit or paired access at 0x60000 is outside interleaved memory
        watchdog: tile 7, worker 3, pc 0x4c000: watchdog: the step ran past its cycle limit
        zero words are nops up to the watchdog: tile 7, worker 3, pc 0x4cfa0: watchdog: the step ran past its cycle limit
        supervisor float: tile 7, supervisor, pc 0x4c000: invalid instruction 0x4e000000: worker-only instruction in the supervisor
    "#]]
    .assert_eq(&out);
}

#[test]
fn loops_repeat_and_calls() {
    check_worker(
        "
        setzi $m1, 4
        setzi $m2, 0
        loop:
        add $m2, $m2, 1
        brnzdec $m1, loop
        rpt 10, 1
        add $m3, $m3, 2
        rpt 0, 1
        add $m4, $m4, 1
        setzi $m5, 3
        rpt $m5, 2
        add $m6, $m6, 1
        add $m7, $m7, 10
        call $m10, function
        exitz $mzero
        function:
        setzi $m8, 99
        br $m10
        ",
        expect![[r#"
            issues 36 instructions 36
            m0 = 0x60000
            m2 = 0x5
            m3 = 0x14
            m5 = 0x3
            m6 = 0x3
            m7 = 0x1e
            m8 = 0x63
            m10 = 0x4c034
        "#]],
    );
}

#[test]
fn aligned_main_aux_pairs_issue_in_one_slot() {
    // Two pairs: the first at an aligned address issues as one bundle; the
    // same two instructions one word later issue separately.
    check_worker(
        "
        { setzi $m1, 1 ; setzi $a1, 2 }
        nop
        setzi $m2, 3
        setzi $a2, 4
        exitz $mzero
        ",
        expect![[r#"
            issues 5 instructions 6
            m0 = 0x60000
            m1 = 0x1
            m2 = 0x3
            a1 = 0x00000002
            a2 = 0x00000004
        "#]],
    );
}

/// A supervisor that starts `launch` (either `runall` or six `run`s) of a
/// worker doing `n` adds, then syncs.
fn barrel_step(launch: &str, worker_adds: usize) -> StepStats {
    let adds = "add $m1, $m1, 1\n".repeat(worker_adds);
    let code = format!(
        "
        setzi $m1, worker
        setzi $m2, 0x60000
        {launch}
        sync 5
        halt
        worker:
        {adds}
        exitz $m1
        "
    );
    let mut tile = tile_with(&code);
    tile.run_supervisor(CODE, WATCHDOG).unwrap()
}

#[test]
fn barrel_rule_cycle_counts() {
    let runs = "run $m1, $m2\n".repeat(6);
    let one = "run $m1, $m2";
    let out = [
        ("runall, 99 adds", barrel_step("runall $m1, $m2", 99)),
        ("six runs, 99 adds", barrel_step(&runs, 99)),
        ("one run, 99 adds", barrel_step(one, 99)),
        ("seven runs, 9 adds", barrel_step(&(runs + one), 9)),
    ]
    .map(|(name, s)| format!("{name}: {s:?}"))
    .join("\n");
    // runall: the supervisor issues setzi, setzi, runall (18 cycles); six
    // workers of 100 issues run from 18 to 618, during which the supervisor
    // has no barrel slot, so `sync` issues at 618 and ends at 624.
    // Six runs start the workers 6 cycles apart; the last ends at 48 + 600.
    // Seven runs: the seventh issues when worker 0 finishes (78), starts it
    // again at 84, and `sync` waits for it until 144.
    expect![[r#"
        runall, 99 adds: StepStats { cycles: 624, supervisor_instructions: 4, worker_instructions: 600, worker_issues: 600, amp_macs: 0, workers_ok: false, end: Sync { tag: 5 }, next_pc: 311312 }
        six runs, 99 adds: StepStats { cycles: 648, supervisor_instructions: 9, worker_instructions: 600, worker_issues: 600, amp_macs: 0, workers_ok: false, end: Sync { tag: 5 }, next_pc: 311332 }
        one run, 99 adds: StepStats { cycles: 618, supervisor_instructions: 4, worker_instructions: 100, worker_issues: 100, amp_macs: 0, workers_ok: false, end: Sync { tag: 5 }, next_pc: 311312 }
        seven runs, 9 adds: StepStats { cycles: 144, supervisor_instructions: 10, worker_instructions: 70, worker_issues: 70, amp_macs: 0, workers_ok: false, end: Sync { tag: 5 }, next_pc: 311336 }"#]]
    .assert_eq(&out);
}

#[test]
fn steps_resume_after_sync_and_latch_worker_status() {
    let mut tile = tile_with(
        "
        setzi $m1, good
        runall $m1, $m2
        sync 1
        get $m3, $wstatus
        setzi $m1, bad
        run $m1, $m2
        sync 2
        get $m4, $wstatus
        halt
        good:
        exitz $mzero
        bad:
        get $m5, $wid
        exitz $m0
        ",
    );
    let first = tile.run_supervisor(CODE, WATCHDOG).unwrap();
    let second = tile.run_supervisor(first.next_pc, WATCHDOG).unwrap();
    let third = tile.run_supervisor(second.next_pc, WATCHDOG).unwrap();
    let regs = tile.supervisor_regs();
    assert_eq!(
        (first.end, first.workers_ok),
        (StepEnd::Sync { tag: 1 }, true)
    );
    assert_eq!(
        (second.end, second.workers_ok),
        (StepEnd::Sync { tag: 2 }, true)
    );
    assert_eq!(third.end, StepEnd::Halt);
    assert_eq!((regs.m[3], regs.m[4]), (1, 1));
    // `$m0` of the bad worker is the state pointer 0 in `$m2`: exitz $m0
    // with zero is a success; the worker id of the first free context is 0.
    assert_eq!(tile.worker_regs(0).unwrap().m[5], 0);
}

/// The documented AMP semantics, written independently of `amp.rs`.
fn amp_reference(
    inputs: &[Vec<f32>],
    weights: &[Vec<f32>],
    partials: &[Vec<f16>],
) -> Vec<Vec<f16>> {
    let k = weights[0].len();
    let per_phase = k / 4;
    inputs
        .iter()
        .zip(partials)
        .map(|(x, p)| {
            (0..16)
                .map(|c| {
                    let mut acc = 0f32;
                    for phase in 0..4 {
                        let mut s = 0f32;
                        for j in 0..per_phase {
                            let kk = phase * per_phase + j;
                            let term = x[kk] * weights[c][kk];
                            s = if j == 0 { term } else { s + term };
                        }
                        acc += s;
                    }
                    f16::from_f32(acc + p[c].to_f32())
                })
                .collect()
        })
        .collect()
}

/// Deterministic pseudo-random values in [-2, 2).
fn values(seed: u32, n: usize) -> Vec<f32> {
    let mut x = seed.wrapping_mul(2_654_435_761) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x % 4096) as f32 / 1024.0 - 2.0
        })
        .collect()
}

/// The GEMM inner loop of `book/src/isa.md` for one worker: loads a CWEI
/// block with `load` (from `$m7`), streams `rows` input rows with
/// partials, stores 16 channels/row.
fn gemm_kernel(amp: &str, rows: u32, load: &str) -> String {
    format!(
        "
        ld32 $m4, $m0, 0
        ld32 $m5, $m0, 4
        ld32 $m6, $m0, 8
        ld32 $m7, $m0, 12
        ld32 $m8, $m0, 16
        put $fp8cfg, $m8
        ampclr
        {load}
        rpt {}, 2
        {{ ld2xst64pace $a0:1, $a2:3, $a4:5, $m4:6+= ; {amp} $a4:5, $a0:1, $a2:3 }}
        st64step $a4:5, $m6+=, 8
        exitz $mzero
        ",
        4 * (rows + 1)
    )
}

/// How the GEMM of [`run_gemm`] loads its weights.
#[derive(Clone, Copy, Debug, PartialEq)]
enum WeightLoads {
    /// 64 `ldcwei` from ordinary memory.
    Narrow,
    /// 32 `ld128cwei` from interleaved memory.
    Wide,
}

fn run_gemm(
    fp8: Option<(Fp8Format, Fp8Format)>,
    loads: WeightLoads,
) -> (Vec<Vec<f16>>, Vec<Vec<f16>>) {
    let rows = 5usize;
    let k = if fp8.is_some() { 32 } else { 16 };
    let (w_at, load) = match loads {
        WeightLoads::Narrow => (DATA + 0x2000, "rpt 64, 1\nldcwei $m7+="),
        WeightLoads::Wide => (INTERLEAVED + 0x2000, "rpt 32, 1\nld128cwei $m7+="),
    };
    let (x_at, p_at, out_at, state) = (INTERLEAVED, INTERLEAVED + 0x1000, DATA + 0x100, DATA);
    let amp = if fp8.is_some() { "f8v8amp" } else { "f16v4amp" };
    let mut tile = tile_with(&gemm_kernel(amp, rows as u32, load));
    let raw_x = values(1, rows * k);
    let raw_w = values(2, 16 * k);
    let partials: Vec<Vec<f16>> = values(3, rows * 16)
        .chunks(16)
        .map(|c| c.iter().map(|v| f16::from_f32(*v)).collect())
        .collect();
    // Quantise inputs and weights to the device's storage formats.
    let (x_bytes, w_bytes, x, w, cfg): (Vec<u8>, Vec<u8>, Vec<f32>, Vec<f32>, u32) = match fp8 {
        None => {
            let enc = |v: &[f32]| -> (Vec<u8>, Vec<f32>) {
                let h: Vec<f16> = v.iter().map(|v| f16::from_f32(*v)).collect();
                (
                    h.iter().flat_map(|h| h.to_le_bytes()).collect(),
                    h.iter().map(|h| h.to_f32()).collect(),
                )
            };
            let ((xb, xv), (wb, wv)) = (enc(&raw_x), enc(&raw_w));
            (xb, wb, xv, wv, 0)
        }
        Some((xf, wf)) => {
            // Input scale -2, weight scale 3: stored = value × 2^-scale.
            let enc = |v: &[f32], f: Fp8Format, s: i32| -> (Vec<u8>, Vec<f32>) {
                let codes: Vec<u8> = v
                    .iter()
                    .map(|v| f.from_f64(f64::from(*v) * 2f64.powi(-s)))
                    .collect();
                let vals = codes
                    .iter()
                    .map(|c| (f.to_f64(*c) * 2f64.powi(s)) as f32)
                    .collect();
                (codes, vals)
            };
            let ((xb, xv), (wb, wv)) = (enc(&raw_x, xf, -2), enc(&raw_w, wf, 3));
            let bit = |f| u32::from(f == Fp8Format::F152);
            let cfg = bit(xf) | (bit(wf) << 1) | ((-2i8 as u8 as u32) << 8) | (3 << 16);
            (xb, wb, xv, wv, cfg)
        }
    };
    let p_bytes: Vec<u8> = partials
        .iter()
        .flatten()
        .flat_map(|h| h.to_le_bytes())
        .collect();
    tile.write_bytes(x_at, &x_bytes).unwrap();
    tile.write_bytes(p_at, &p_bytes).unwrap();
    tile.write_bytes(w_at, &w_bytes).unwrap();
    let st: Vec<u8> = [x_at, p_at - 32, out_at - 40, w_at, cfg]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    tile.write_bytes(state, &st).unwrap();
    let stats = tile.run_worker(0, CODE, state, WATCHDOG).unwrap();
    assert_eq!(
        stats.counts.amp_macs,
        4 * (rows as u64 + 1) * if fp8.is_some() { 128 } else { 64 }
    );
    let out = tile.read_bytes(out_at, (rows * 32) as u32).unwrap();
    let device: Vec<Vec<f16>> = out
        .chunks(32)
        .map(|row| {
            row.chunks(2)
                .map(|b| f16::from_le_bytes([b[0], b[1]]))
                .collect()
        })
        .collect();
    let inputs: Vec<Vec<f32>> = x.chunks(k).map(<[f32]>::to_vec).collect();
    let weights: Vec<Vec<f32>> = w.chunks(k).map(<[f32]>::to_vec).collect();
    (device, amp_reference(&inputs, &weights, &partials))
}

#[test]
fn f16_amp_gemm_matches_the_scalar_reference_bit_for_bit() {
    let (device, reference) = run_gemm(None, WeightLoads::Narrow);
    assert_eq!(device, reference);
    assert!(device.iter().flatten().any(|v| v.to_f32().abs() > 1.0));
}

#[test]
fn f8_amp_gemm_matches_the_scalar_reference_in_both_formats() {
    for formats in [
        (Fp8Format::F143, Fp8Format::F143),
        (Fp8Format::F152, Fp8Format::F143),
        (Fp8Format::F143, Fp8Format::F152),
    ] {
        let (device, reference) = run_gemm(Some(formats), WeightLoads::Narrow);
        assert_eq!(device, reference, "{formats:?}");
    }
}

#[test]
fn wide_weight_loads_fill_cwei_as_narrow_ones_do() {
    for fp8 in [None, Some((Fp8Format::F143, Fp8Format::F152))] {
        let (wide, reference) = run_gemm(fp8, WeightLoads::Wide);
        assert_eq!(wide, reference, "{fp8:?}");
        assert_eq!(wide, run_gemm(fp8, WeightLoads::Narrow).0, "{fp8:?}");
    }
}

#[test]
fn casts_cover_all_256_fp8_codes_in_both_formats() {
    for (format, bit) in [(Fp8Format::F143, 0u32), (Fp8Format::F152, 1)] {
        for scale in [0i32, 5, -3] {
            let cfg = bit | ((scale as i8 as u8 as u32) << 8);
            let codes: Vec<u8> = (0..=255).collect();
            let mut tile = tile_with(
                "
                ld32 $m1, $m0, 0
                put $fp8cfg, $m1
                setzi $m2, 0x60100
                setzi $m3, 0x60300
                rpt 64, 4
                ld32step $a0, $m2+=, 4
                f8v4tof16 $a2:3, $a0
                f16v4tof8 $a4, $a2:3
                st64step $a2:3, $m3+=, 8
                exitz $mzero
                ",
            );
            tile.write_bytes(DATA, &cfg.to_le_bytes()).unwrap();
            tile.write_bytes(DATA + 0x100, &codes).unwrap();
            tile.run_worker(0, CODE, DATA, WATCHDOG).unwrap();
            let halves = tile.read_bytes(DATA + 0x300, 512).unwrap();
            for code in 0..=255u8 {
                let at = 2 * usize::from(code);
                let h = f16::from_le_bytes([halves[at], halves[at + 1]]);
                let want = format.to_f16(code, scale);
                assert!(
                    h.to_bits() == want.to_bits() || (h.is_nan() && want.is_nan()),
                    "{format:?} {code:#x}"
                );
                // Every code survives the trip back when f16 holds it exactly.
                if f64::from(h.to_f32()) == format.to_f64(code) * 2f64.powi(scale) {
                    assert_eq!(format.from_f16(h, scale), code);
                }
            }
            // The cast back of the last quad (codes 252..255) is left in `$a4`:
            // exact where f16 holds the values, saturated where it overflowed.
            let back = tile.worker_regs(0).unwrap().a[4].to_le_bytes();
            let want: Vec<u8> = (252..=255u8)
                .map(|c| format.from_f16(format.to_f16(c, scale), scale))
                .collect();
            assert_eq!(back.to_vec(), want);
            if (format, scale) == (Fp8Format::F152, 5) {
                assert_eq!(
                    back, [0xFF; 4],
                    "-inf saturates to the largest negative code"
                );
            } else {
                assert_eq!(back, [252, 253, 254, 255]);
            }
        }
    }
}

#[test]
fn float_helpers_round_once() {
    let f = |v: f32| format!("{:#x}", v.to_bits());
    let h2 = |a: f32, b: f32| {
        let lo = u32::from(f16::from_f32(a).to_bits());
        format!("{:#x}", lo | (u32::from(f16::from_f32(b).to_bits()) << 16))
    };
    let code = format!(
        "
        setzi $a0, {one_lo}
        sethi $a0, {one_hi}
        f32exp $a1, $a0
        f32erf $a2, $a0
        f32rsqrt $a3, $a0
        setzi $a4, {h_lo}
        sethi $a4, {h_hi}
        f16v2add $a5, $a4, $a4
        f16v2tof32 $a6:7, $a4
        f32v2hadd $a8, $a6:7
        f32toi32 $a9, $a8
        f32fromi32 $a10, $a9
        f16v2exp $a11, $a4
        f16v2erf $a12, $a4
        exitz $mzero
        ",
        one_lo = 1.0f32.to_bits() & 0xFFFF,
        one_hi = 1.0f32.to_bits() >> 16,
        h_lo = u32::from_str_radix(&h2(1.5, -0.25)[2..], 16).unwrap() & 0xFFFF,
        h_hi = u32::from_str_radix(&h2(1.5, -0.25)[2..], 16).unwrap() >> 16,
    );
    let mut tile = tile_with(&code);
    tile.run_worker(0, CODE, DATA, WATCHDOG).unwrap();
    let a = tile.worker_regs(0).unwrap().a;
    assert_eq!(a[1], (1f64.exp() as f32).to_bits());
    assert_eq!(f(f32::from_bits(a[2])), f(0.842_700_8));
    assert_eq!(f32::from_bits(a[3]), 1.0);
    assert_eq!(format!("{:#x}", a[5]), h2(3.0, -0.5));
    assert_eq!(f32::from_bits(a[8]), 1.25);
    assert_eq!(a[9], 1);
    assert_eq!(f32::from_bits(a[10]), 1.0);
    // Each f16 lane's exponential, rounded to f16 once from f64.
    let lanes = [1.5f64.exp(), (-0.25f64).exp()].map(|v| f16::from_f64(v).to_f32());
    assert_eq!(format!("{:#x}", a[11]), h2(lanes[0], lanes[1]));
    // And its error function, likewise.
    let lanes = [1.5f64, -0.25].map(|v| f16::from_f64(crate::isa::fp8::erf(v)).to_f32());
    assert_eq!(format!("{:#x}", a[12]), h2(lanes[0], lanes[1]));
}

#[test]
fn a_register_repeat_with_a_long_body_does_not_panic_the_host() {
    // `rpt $m, len` keeps the length in an operand field the executor reads
    // like a register index; lengths of 16 and more must still run.
    let body = "    add $m2, $m2, 1\n".repeat(20);
    let code = format!("    setzi $m1, 3\n    rpt $m1, 20\n{body}    exitz $mzero\n");
    let mut tile = tile_with(&code);
    tile.run_worker(0, CODE, DATA, WATCHDOG).expect("runs");
    assert_eq!(tile.worker_regs(0).unwrap().m[2], 60);
}

#[test]
fn vector_accumulators_sum_lanes_in_f32_and_clear_when_read() {
    // Three f16 quads 24 bytes apart: (1, 2, 3, 4), (0.5, 0.25, -1, 2048)
    // and (1, 1, 1, 1). Lane 3 adds 4 + 2048 + 1 in f32 (exactly 2053,
    // which f16 could not hold); the register-stride load walks them.
    // Then the f32 lanes of $a8:11 (1.5, -2, 3, 0) add their squares
    // (2.25 + 1.5, 4 - 2, 9 + 3, 0) and their values, and a second read
    // of pair 0 finds it zeroed.
    let h = |v: [f64; 4]| -> (u32, u32) {
        let b: Vec<u32> = v
            .iter()
            .map(|&x| u32::from(f16::from_f64(x).to_bits()))
            .collect();
        (b[0] | (b[1] << 16), b[2] | (b[3] << 16))
    };
    let quads = [
        h([1.0, 2.0, 3.0, 4.0]),
        h([0.5, 0.25, -1.0, 2048.0]),
        h([1.0; 4]),
    ];
    let mut code = String::new();
    for (i, (lo, hi)) in quads.iter().enumerate() {
        for (k, w) in [lo, hi].iter().enumerate() {
            code.push_str(&format!(
                "setzi $m1, {}\nsethi $m1, {}\nst32 $m1, $m0, {}\n",
                *w & 0xFFFF,
                *w >> 16,
                24 * i + 4 * k
            ));
        }
    }
    let f = |v: f32| (v.to_bits() & 0xFFFF, v.to_bits() >> 16);
    for (reg, v) in [(8, 1.5f32), (9, -2.0), (10, 3.0)] {
        let (lo, hi) = f(v);
        code.push_str(&format!("setzi $a{reg}, {lo}\nsethi $a{reg}, {hi}\n"));
    }
    code.push_str(
        "
        setzi $m2, 24
        mov $m3, $m0
        ld64step $a0:1, $m3+=, $m2
        f16v4acc $a0:1
        ld64step $a0:1, $m3+=, $m2
        f16v4acc $a0:1
        ld64step $a0:1, $m3+=, $m2
        f16v4acc $a0:1
        f32v2gina $a4:5, 0
        f32v2gina $a6:7, 1
        f32v4sqacc $a8:11
        f32v4acc $a8:11
        f32v2gina $a12:13, 0
        f32v2gina $a2:3, 0
        exitz $mzero
        ",
    );
    check_worker(
        &code,
        expect![[r#"
            issues 36 instructions 39
            m0 = 0x60000
            m1 = 0x3c003c00
            m2 = 0x18
            m3 = 0x60048
            a0 = 0x3c003c00
            a1 = 0x3c003c00
            a4 = 0x40200000
            a5 = 0x40500000
            a6 = 0x40400000
            a7 = 0x45005000
            a8 = 0x3fc00000
            a9 = 0xc0000000
            a10 = 0x40400000
            a12 = 0x40700000
            a13 = 0x40000000
        "#]],
    );
}
