//! GELU, softmax and layernorm against f64 host computations within stated
//! f16 ulps, and the rearrange copy bit-exactly.

use crate::harness::{compile, Rng, Run};
use half::f16;

fn f16_bytes(values: &[f16]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn f16_values(bytes: &[u8]) -> Vec<f16> {
    bytes
        .chunks(2)
        .map(|c| f16::from_le_bytes([c[0], c[1]]))
        .collect()
}

fn random_f16(rng: &mut Rng, n: usize, std: f64) -> Vec<f16> {
    (0..n).map(|_| f16::from_f64(rng.normal(std))).collect()
}

/// Distance in f16 steps between a device value and the f16 nearest the
/// reference (0 and -0 are one apart; fine for these tolerances).
fn ulps(device: f16, reference: f64) -> i32 {
    let ordinal = |v: f16| {
        let b = i32::from(v.to_bits());
        if b & 0x8000 != 0 {
            -(b & 0x7fff)
        } else {
            b
        }
    };
    (ordinal(device) - ordinal(f16::from_f64(reference))).abs()
}

/// Row shapes: fewer rows than workers, odd lengths (misaligned rows),
/// lengths not multiples of 4, and a larger block.
const SHAPES: &[(usize, usize)] = &[
    (1, 1),
    (2, 3),
    (3, 5),
    (5, 7),
    (7, 8),
    (6, 64),
    (13, 33),
    (20, 130),
];

fn base_params(rows: usize, row_length: usize) -> Vec<(&'static str, i64)> {
    vec![
        ("rows", rows as i64),
        ("row_length", row_length as i64),
        ("in_scale", 0),
        ("out_scale", 0),
    ]
}

#[test]
fn gelu_is_within_one_ulp_of_the_exact_function() {
    let kernel = compile("gelu_f16");
    let mut rng = Rng::new(11);
    for &(rows, row_length) in SHAPES {
        let x = random_f16(&mut rng, rows * row_length, 2.5);
        let out = kernel.run(&Run {
            inputs: vec![&f16_bytes(&x)],
            out_bytes: 2 * x.len(),
            params: base_params(rows, row_length),
        });
        for (k, (&v, &y)) in x.iter().zip(&f16_values(&out.out)).enumerate() {
            let v = v.to_f64();
            let exact = 0.5 * v * (1.0 + ipub::isa::fp8::erf(v / std::f64::consts::SQRT_2));
            // For large negative x, `1 + erf` cancels in f32: the formula
            // the kernel evaluates has an absolute error of about |x| f32
            // ulps of 1, visible only among f16 subnormals.
            let d = ulps(y, exact);
            let cancellation = (y.to_f64() - exact).abs() <= v.abs() * 2f64.powi(-23);
            assert!(
                d <= 1 || cancellation,
                "gelu {rows}x{row_length}[{k}]: gelu({v}) = {y}, exact {exact}"
            );
        }
    }
}

#[test]
fn rearrange_copies_rows_exactly() {
    for name in ["rearrange_f16_b16x4", "rearrange_f16_b4x16"] {
        let kernel = compile(name);
        let mut rng = Rng::new(5);
        for &(rows, row_length) in SHAPES {
            let bytes: Vec<u8> = (0..2 * rows * row_length)
                .map(|_| rng.next_u64() as u8)
                .collect();
            let out = kernel.run(&Run {
                inputs: vec![&bytes],
                out_bytes: bytes.len(),
                params: base_params(rows, row_length),
            });
            assert_eq!(out.out, bytes, "{name} {rows}x{row_length}");
        }
    }
}

/// Softmax of `x * scale` over the kept prefix of each row (all of it, or
/// `j <= i` for matrix row i when causal), in f64.
fn softmax_reference(
    x: &[f16],
    row_length: usize,
    scale: f32,
    causal: Option<(usize, usize)>,
) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for (r, row) in x.chunks(row_length).enumerate() {
        let kept = match causal {
            Some((first_row, matrix_rows)) => ((first_row + r) % matrix_rows + 1).min(row_length),
            None => row_length,
        };
        let scaled: Vec<f64> = row[..kept]
            .iter()
            .map(|v| f64::from(v.to_f32() * scale))
            .collect();
        let max = scaled.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let exps: Vec<f64> = scaled.iter().map(|s| (s - max).exp()).collect();
        let sum: f64 = exps.iter().sum();
        out.extend(exps.iter().map(|e| e / sum));
        out.extend(std::iter::repeat_n(0.0, row_length - kept));
    }
    out
}

fn check_softmax(
    kernel: &str,
    rows: usize,
    row_length: usize,
    scale: f32,
    causal: Option<(usize, usize)>,
    rng: &mut Rng,
) -> u64 {
    let compiled = compile(kernel);
    let x = random_f16(rng, rows * row_length, 3.0);
    let (first_row, matrix_rows) = causal.unwrap_or((0, rows));
    let mut params = base_params(rows, row_length);
    params.extend([
        ("first_row", first_row as i64),
        ("matrix_rows", matrix_rows as i64),
        ("scale_bits", i64::from(scale.to_bits())),
        ("causal", i64::from(causal.is_some())),
    ]);
    let out = compiled.run(&Run {
        inputs: vec![&f16_bytes(&x)],
        out_bytes: 2 * x.len(),
        params,
    });
    let expected = softmax_reference(&x, row_length, scale, causal);
    for (k, (&y, &e)) in f16_values(&out.out).iter().zip(&expected).enumerate() {
        assert!(
            ulps(y, e) <= 1,
            "{kernel} {rows}x{row_length} scale {scale} causal {causal:?}: [{}][{}] = {y}, expected {e}",
            k / row_length,
            k % row_length
        );
    }
    out.cycles
}

#[test]
fn softmax_is_within_one_ulp() {
    let mut rng = Rng::new(7);
    for &(rows, row_length) in SHAPES {
        for scale in [0.125f32, 1.0, -0.5] {
            check_softmax("softmax_f16", rows, row_length, scale, None, &mut rng);
        }
    }
}

#[test]
fn causal_softmax_masks_by_matrix_row() {
    let mut rng = Rng::new(8);
    // (rows, row_length, first_row, matrix_rows): a tile inside one
    // matrix, tiles whose rows wrap into the next matrix, more matrix rows
    // than the row is long, and a far-away first row.
    for (rows, row_length, first_row, matrix_rows) in [
        (10, 12, 0, 12),
        (10, 12, 5, 12),
        (7, 5, 3, 3),
        (9, 4, 2, 1),
        (4, 3, 1000, 7),
        (13, 33, 40, 33),
    ] {
        check_softmax(
            "softmax_f16_causal",
            rows,
            row_length,
            0.25,
            Some((first_row, matrix_rows)),
            &mut rng,
        );
    }
}

#[test]
fn layernorm_is_within_f16_rounding_of_the_f64_reference() {
    let kernel = compile("layernorm_f16");
    let mut rng = Rng::new(9);
    for &(rows, row_length) in SHAPES {
        let x: Vec<f16> = (0..rows * row_length)
            .map(|k| f16::from_f64(rng.normal(2.0) + (k % 7) as f64))
            .collect();
        let gamma = random_f16(&mut rng, row_length, 1.0);
        let beta = random_f16(&mut rng, row_length, 0.5);
        let epsilon = 1e-5f32;
        let mut params = base_params(rows, row_length);
        params.push(("epsilon_bits", i64::from(epsilon.to_bits())));
        let out = kernel.run(&Run {
            inputs: vec![&f16_bytes(&x), &f16_bytes(&gamma), &f16_bytes(&beta)],
            out_bytes: 2 * x.len(),
            params,
        });
        let y = f16_values(&out.out);
        for (r, row) in x.chunks(row_length).enumerate() {
            let n = row_length as f64;
            let mean = row.iter().map(|v| v.to_f64()).sum::<f64>() / n;
            let var = row.iter().map(|v| (v.to_f64() - mean).powi(2)).sum::<f64>() / n;
            let inv = 1.0 / (var + f64::from(epsilon)).sqrt();
            for (j, v) in row.iter().enumerate() {
                let scaled = (v.to_f64() - mean) * inv * gamma[j].to_f64();
                let expected = scaled + beta[j].to_f64();
                let got = y[r * row_length + j];
                // f32 arithmetic leaves an absolute error of a few f32 ulps
                // of the terms, which only shows when they cancel.
                let slack = 2f64.powi(-20) * (scaled.abs() + beta[j].to_f64().abs());
                assert!(
                    ulps(got, expected) <= 1 || (got.to_f64() - expected).abs() <= slack,
                    "layernorm {rows}x{row_length} [{r}][{j}] = {got}, expected {expected}"
                );
            }
        }
    }
}

/// Runs `name` on a `rows x row_length` operand and reports its cycles
/// beside its cost formula's estimate.
fn measure(name: &str, rows: usize, row_length: usize, extra: &[(&'static str, i64)]) -> String {
    let kernel = compile(name);
    let mut rng = Rng::new(3);
    let n = rows * row_length;
    let x = f16_bytes(&random_f16(&mut rng, n, 1.0));
    let row = f16_bytes(&random_f16(&mut rng, row_length, 1.0));
    let inputs: Vec<&[u8]> = match name {
        "add_f16" => vec![&x, &x],
        "layernorm_f16" => vec![&x, &row, &row],
        _ => vec![&x],
    };
    let mut params = base_params(rows, row_length);
    params.extend_from_slice(extra);
    let out_bytes = if name.ends_with("f143") { n } else { 2 * n };
    let out = kernel.run(&Run {
        inputs,
        out_bytes,
        params,
    });
    format!(
        "{name} {rows}x{row_length}: {} cycles ({:.2} per element), cost formula {}",
        out.cycles,
        out.cycles as f64 / n as f64,
        kernel.estimate(rows, row_length),
    )
}

/// Cycles of each kernel for one tile's share of a representative
/// operand. The figures are exact (the executor is deterministic), so a
/// change in a kernel's speed or cost formula shows here as a diff.
#[test]
fn cycles_of_representative_shapes() {
    let softmax = [
        ("scale_bits", i64::from(0.125f32.to_bits())),
        ("first_row", 0),
        ("matrix_rows", 128),
        ("causal", 0),
    ];
    let lines = [
        measure("cast_f16_f143", 64, 256, &[]),
        measure("add_f16", 64, 256, &[]),
        measure("gelu_f16", 64, 256, &[]),
        measure("rearrange_f16_b16x4", 64, 256, &[]),
        measure("softmax_f16", 128, 128, &softmax),
        measure("softmax_f16_causal", 128, 128, &softmax),
        measure(
            "layernorm_f16",
            64,
            256,
            &[("epsilon_bits", i64::from(1e-5f32.to_bits()))],
        ),
    ];
    expect_test::expect![[r#"
        cast_f16_f143 64x256: 8376 cycles (0.51 per element), cost formula 8312
        add_f16 64x256: 12450 cycles (0.76 per element), cost formula 12408
        gelu_f16 64x256: 90354 cycles (5.51 per element), cost formula 90262
        rearrange_f16_b16x4 64x256: 8334 cycles (0.51 per element), cost formula 8312
        softmax_f16 128x128: 169194 cycles (10.33 per element), cost formula 168598
        softmax_f16_causal 128x128: 100680 cycles (6.15 per element), cost formula 107408
        layernorm_f16 64x256: 121698 cycles (7.43 per element), cost formula 121238"#]]
    .assert_eq(&lines.join("\n"));
}

/// `rearrange_blocks` against a host copy of the same chunks, with fewer
/// and more K blocks than workers and a destination that keeps its other
/// bytes.
#[test]
fn rearrange_blocks_moves_each_chunk_and_nothing_else() {
    let kernel = compile("rearrange_blocks");
    let mut rng = Rng::new(9);
    // (K blocks, rows, words per chunk, rows of the whole blocked buffer,
    // first row held here)
    for &(blocks, rows, words, all_rows, first) in &[
        (1, 3, 4, 5, 2),
        (5, 1, 4, 1, 0),
        (13, 7, 4, 16, 8),
        (2, 2, 1, 4, 1),
    ] {
        let chunk = 8 * words;
        let row_bytes = blocks * chunk;
        let source: Vec<u8> = (0..rows * row_bytes + 24)
            .map(|_| rng.next_u64() as u8)
            .collect();
        let out_bytes = blocks * all_rows * chunk;
        let params = vec![
            ("outer", blocks as i64),
            ("inner", rows as i64),
            ("words", words as i64),
            ("src_offset", 24),
            ("src_outer", chunk as i64),
            ("src_inner", row_bytes as i64),
            ("dst_offset", (first * chunk) as i64),
            ("dst_outer", (all_rows * chunk) as i64),
            ("dst_inner", chunk as i64),
        ];
        let out = kernel.run(&Run {
            inputs: vec![&source],
            out_bytes,
            params,
        });
        let mut expected = vec![0x5A; out_bytes];
        for o in 0..blocks {
            for j in 0..rows {
                let from = 24 + o * chunk + j * row_bytes;
                let to = first * chunk + o * all_rows * chunk + j * chunk;
                expected[to..to + chunk].copy_from_slice(&source[from..from + chunk]);
            }
        }
        assert_eq!(out.out, expected, "{blocks} blocks x {rows} rows");
    }
}
