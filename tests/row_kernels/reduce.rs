//! Reduce-add of GEMM partials: bit-exact against f32 sums rounded once
//! (f16 partials), or against f32 sums in partial order (f32 partials).

use crate::host::{check, check_shapes, reduce_case, Settings};
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
#[test]
fn two_partials_in_f16_are_the_f32_sums_rounded_once() {
    let values: Vec<f16> = [
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
    .collect();
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
    let partials: Vec<f16> = first.into_iter().chain(second).collect();
    let kernel = crate::harness::compile("reduce_add_f16");
    if let Err(e) = check(&kernel, &reduce_case(&partials, 2, length)) {
        panic!("reduce_add_f16 of two partials: {e}");
    }
}

/// The cast to FP8 fused into a two-partial reduction stores the bytes of
/// the reduction and the cast run one after the other, in both formats and
/// at scales that saturate and that reach the subnormals.
#[test]
fn two_partials_stored_as_fp8_are_the_sum_then_the_cast() {
    for kernel in ["reduce_pair_f16_f143", "reduce_pair_f16_f152"] {
        for out_scale in [-3, 0, 4] {
            let settings = Settings {
                out_scale,
                ..Settings::default()
            };
            check_shapes(
                kernel,
                &[(2, 4), (2, 20), (2, 100), (2, 1188)],
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
