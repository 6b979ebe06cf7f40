//! Host arithmetic of the row reductions (`reduce_sum_f16`,
//! `reduce_max_f32`, ...) and of the segmented forms' kernels (the f32
//! partials of f16 pieces, `reduce_sum_f16_partial`, and the results of f32
//! partials, `reduce_mean_partials_f16`, ...): each row's sum or mean in
//! f64 with the slack f32 accumulation needs, and each row's maximum
//! exactly.

use super::{f16_bytes, wide_f16, Case, Expected};
use crate::harness::Rng;
use half::f16;

/// Whether `kernel` is one of the row reductions.
pub fn is_reduction(kernel: &str) -> bool {
    ["reduce_sum_", "reduce_mean_", "reduce_max_"]
        .iter()
        .any(|prefix| kernel.starts_with(prefix))
}

/// A run of the reduction `kernel` over `rows x row_length` values.
pub fn case(
    kernel: &str,
    rows: usize,
    row_length: usize,
    params: Vec<(&'static str, i64)>,
    rng: &mut Rng,
) -> Case {
    let n = rows * row_length;
    // The segmented forms: f16 pieces to f32 partials, and f32 partials
    // to results of either type; a mean of partials divides by the whole
    // row's length, here three of theirs.
    let partials = kernel.contains("_partials_");
    let partial = kernel.ends_with("_partial");
    let f32_values = kernel.ends_with("f32") || kernel.ends_with("f32_partial") || partials;
    let f32_out = kernel.ends_with("f32") || partial;
    let mut params = params;
    // A partial kernel's pieces: six, or fewer in short rows, all but the
    // last `piece` long (a multiple of four where that leaves four), as
    // `partition::reduce_piece` cuts them.
    let parts = (row_length / 8).clamp(1, 6);
    let piece = match row_length / parts / 4 * 4 {
        0 => row_length / parts,
        aligned => aligned,
    };
    if partial {
        params.extend([("parts", parts as i64), ("piece", piece as i64)]);
    }
    let divisor = match partials && kernel.starts_with("reduce_mean") {
        true => {
            params.push(("divisor", 3 * row_length as i64));
            3 * row_length
        }
        false => row_length,
    };
    let values: Vec<f64> = if kernel.starts_with("reduce_max") {
        max_inputs(rng, rows, row_length, f32_values)
    } else if f32_values {
        (0..n)
            .map(|_| f64::from((rng.normal(100.0) + 10.0) as f32))
            .collect()
    } else {
        (0..n)
            .map(|_| f16::from_f64(rng.normal(2.0) + 1.0).to_f64())
            .collect()
    };
    let input = if f32_values {
        values
            .iter()
            .flat_map(|&v| (v as f32).to_le_bytes())
            .collect()
    } else {
        let halves: Vec<f16> = values.iter().map(|&v| f16::from_f64(v)).collect();
        f16_bytes(&halves)
    };
    // What each result reduces: a row, or a partial kernel's piece.
    let rows_of = || -> Vec<&[f64]> {
        match partial {
            false => values.chunks(row_length).collect(),
            true => values
                .chunks(row_length)
                .flat_map(|row| {
                    (0..parts).map(move |p| match p + 1 == parts {
                        true => &row[p * piece..],
                        false => &row[p * piece..(p + 1) * piece],
                    })
                })
                .collect(),
        }
    };
    let expected = if kernel.starts_with("reduce_max") {
        let maxima = rows_of()
            .into_iter()
            .map(|row| row.iter().copied().fold(f64::NAN, f64::max));
        Expected::Bytes(if f32_out {
            maxima.flat_map(|m| (m as f32).to_le_bytes()).collect()
        } else {
            maxima
                .flat_map(|m| f16::from_f64(m).to_le_bytes())
                .collect()
        })
    } else {
        let mean = kernel.starts_with("reduce_mean");
        let divisor = if mean { divisor as f64 } else { 1.0 };
        let mut reference = Vec::new();
        let mut slack = Vec::new();
        for row in rows_of() {
            let row_length = row.len();
            reference.push(row.iter().sum::<f64>() / divisor);
            // Every f32 addition rounds by at most half an f32 step of a
            // partial sum, which is at most the sum of magnitudes; the
            // row's additions are one per element.
            let magnitude: f64 = row.iter().map(|v| v.abs()).sum::<f64>() / divisor;
            slack.push((row_length as f64 + 2.0) * magnitude * 2f64.powi(-24));
        }
        if f32_out {
            let tolerance = reference
                .iter()
                .zip(&slack)
                .map(|(r, s)| s + r.abs() * 2f64.powi(-24))
                .collect();
            Expected::F32 {
                reference,
                tolerance,
            }
        } else {
            Expected::F16 { reference, slack }
        }
    };
    let width = if f32_out { 4 } else { 2 };
    let results = if partial { rows * parts } else { rows };
    Case {
        inputs: vec![input],
        params,
        out_bytes: width * results,
        expected,
    }
}

/// Values over a wide range with infinities and NaNs mixed in, but with
/// at least one number in every row (a row of NaNs alone is
/// `reduction_tests`' case) and no negative zeros (the maximum of +0 and
/// -0 is either).
fn max_inputs(rng: &mut Rng, rows: usize, row_length: usize, f32_values: bool) -> Vec<f64> {
    let mut values: Vec<f64> = wide_f16(rng, rows * row_length, 8.0)
        .into_iter()
        .map(|v| {
            let v = v.to_f64();
            let v = if v == 0.0 { 0.0 } else { v };
            // f32 rows get values f16 cannot hold as well.
            if f32_values && v.is_finite() {
                f64::from((v * 1e3 + rng.normal(1.0)) as f32)
            } else {
                v
            }
        })
        .collect();
    for row in values.chunks_mut(row_length) {
        if row.iter().all(|v| v.is_nan()) {
            row[0] = -1.5;
        }
    }
    values
}
