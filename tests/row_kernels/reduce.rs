//! Reduce-add of GEMM partials: bit-exact against f32 sums rounded once
//! (f16 partials), or against f32 sums in partial order (f32 partials).

use crate::host::{check, check_shapes, reduce_case, reduce_plus_case, Settings};
use half::f16;

#[test]
fn reduce_add_sums_partials_in_f32_and_rounds_once() {
    // (count, length): one partial, fewer blocks than workers, blocks not
    // a multiple of six, partials far apart, every unrolled count and the
    // counted loop beyond them.
    check_shapes(
        "reduce_add_f16",
        &[
            (1, 4),
            (2, 16),
            (3, 40),
            (5, 4 * 37),
            (4, 1188),
            (6, 8),
            (7, 28),
            (8, 388),
            (9, 24),
            (16, 384),
        ],
        &Settings::default(),
        7,
    );
}

/// Two partials take the f16 path (`f16v4add` and +0): its bytes must be
/// those of the f32 sum rounded once for every pair, the ones where the
/// two roundings could part among them: signed zeros, exponents far apart
/// (the smaller one just under and over the larger's half ulp), ties,
/// subnormals, sums that overflow, infinities.
/// Values where two roundings of a sum could part: signed zeros,
/// exponents far apart (the smaller one just under and over the larger's
/// half ulp), ties, subnormals, sums that overflow, infinities.
fn edge_values() -> Vec<f16> {
    [
        0.0f32,
        -0.0,
        1.0,
        -1.0,
        2048.0,
        2049.0,
        0.5,
        1.0 + 1.0 / 1024.0,
        1.0 / 2048.0,
        -1.0 / 2048.0,
        1.0 / 2048.0 + 1.0 / 4_194_304.0,
        3.0 / 4096.0,
        1.0 / 8192.0,
        1.0 / 16384.0,
        6.0e-8,
        -6.0e-8,
        6.1e-5,
        65504.0,
        -65504.0,
        32.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1.0e-3,
        0.333,
    ]
    .iter()
    .map(|&v| f16::from_f32(v))
    .collect()
}

/// Every ordered pair of [`edge_values`]: the first partial the left
/// value, the second the right, padded to a multiple of four with a zero
/// and a negative zero; the partials back to back, and their length.
fn edge_pairs() -> (Vec<f16>, usize) {
    let values = edge_values();
    // Every ordered pair: the first partial the left value, the second the
    // right, padded to a multiple of four with zeros.
    let mut first: Vec<f16> = Vec::new();
    let mut second: Vec<f16> = Vec::new();
    for &a in &values {
        for &b in &values {
            first.push(a);
            second.push(b);
        }
    }
    while !first.len().is_multiple_of(4) {
        first.push(f16::ZERO);
        second.push(f16::NEG_ZERO);
    }
    let length = first.len();
    (first.into_iter().chain(second).collect(), length)
}

#[test]
fn two_partials_in_f16_are_the_f32_sums_rounded_once() {
    let (partials, length) = edge_pairs();
    let kernel = crate::harness::compile("reduce_add_f16");
    if let Err(e) = check(&kernel, &reduce_case(&partials, 2, length)) {
        panic!("reduce_add_f16 of two partials: {e}");
    }
}

/// A product's leading adds run by its reduction store the bytes of the
/// reduction and the adds run one after the other: every loop (two
/// partials, the unrolled counts, the counted loop), one and two addends.
#[test]
fn reduce_with_addends_is_the_reduction_then_the_adds() {
    for kernel in ["reduce_add_f16_plus1", "reduce_add_f16_plus2"] {
        check_shapes(
            kernel,
            &[
                (1, 4),
                (2, 4),
                (2, 28),
                (2, 1188),
                (3, 40),
                (4, 1188),
                (8, 388),
                (9, 24),
                (16, 384),
            ],
            &Settings::default(),
            13,
        );
    }
}

/// The edge pairs as two partials with the edge values as addends: the
/// +0 the reduction gives `-0 + -0` must survive a `-0` addend, and the
/// adds round as `add_f16` does at the edges too.
#[test]
fn addends_after_two_partials_keep_the_bytes_at_the_edges() {
    let (partials, length) = edge_pairs();
    let values = edge_values();
    let addend = |shift: usize| -> Vec<f16> {
        (0..length)
            .map(|i| values[(i + shift) % values.len()])
            .collect()
    };
    // With no shift the pair (-0, -0) meets a -0 addend.
    for (kernel, addends) in [
        ("reduce_add_f16_plus1", vec![addend(0)]),
        ("reduce_add_f16_plus1", vec![addend(5)]),
        ("reduce_add_f16_plus2", vec![addend(0), addend(0)]),
        ("reduce_add_f16_plus2", vec![addend(5), addend(11)]),
    ] {
        let compiled = crate::harness::compile(kernel);
        if let Err(e) = check(&compiled, &reduce_plus_case(&partials, 2, length, &addends)) {
            panic!("{kernel} of two partials: {e}");
        }
    }
}

/// The cast to FP8 fused into a reduction stores the bytes of the
/// reduction and the cast run one after the other, in both formats and at
/// scales that saturate and that reach the subnormals: every loop (two
/// partials, the unrolled counts, the counted loop).
#[test]
fn partials_stored_as_fp8_are_the_sum_then_the_cast() {
    for kernel in ["reduce_add_f16_f143", "reduce_add_f16_f152"] {
        for out_scale in [-3, 0, 4] {
            let settings = Settings {
                out_scale,
                ..Settings::default()
            };
            check_shapes(
                kernel,
                &[
                    (2, 4),
                    (2, 20),
                    (2, 100),
                    (2, 1188),
                    (1, 4),
                    (3, 40),
                    (4, 1188),
                    (8, 388),
                    (9, 24),
                    (12, 100),
                ],
                &settings,
                11,
            );
        }
    }
}

#[test]
fn reduce_add_f32_sums_f32_partials_in_partial_order() {
    // (count, length): one partial, fewer blocks than workers, blocks not a
    // multiple of six, partials far apart, many partials.
    check_shapes(
        "reduce_add_f32",
        &[
            (1, 4),
            (2, 16),
            (3, 40),
            (5, 4 * 37),
            (4, 1188),
            (8, 388),
            (16, 384),
        ],
        &Settings::default(),
        7,
    );
}
