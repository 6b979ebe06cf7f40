//! Calibration of the kernels' cost formulas: every row kernel (and the
//! reduce-add and block rearrangement the GEMMs use) runs over a grid of
//! shapes on the executor, its output is checked against the host, and its
//! `.ipub_cost` formula must be within 15 % of the measured cycles. The
//! table of measured against estimated cycles prints with
//! `cargo test --test row_kernels calibration -- --nocapture`.

use crate::harness::{compile, Rng, Run};
use crate::host::{case, check, Settings};
use std::fmt::Write as _;

/// How far a formula may be from the measured cycles.
const TOLERANCE: f64 = 0.15;

const KERNELS: &[&str] = &[
    "cast_f16_f143",
    "cast_f16_f152",
    "cast_f143_f16",
    "cast_f152_f16",
    "cast_f16_f32",
    "cast_f32_f16",
    "add_f16",
    "add_f32",
    "rearrange_f16_b16x4",
    "gelu_f16",
    "gelu_f16_f143",
    "gelu_f16_f152",
    "add_gelu_f16",
    "add_gelu_f16_f143",
    "add_gelu_f16_f152",
    "softmax_f16",
    "softmax_f16_causal",
    "softmax_f16_once",
    "softmax_f16_once_causal",
    "layernorm_f16",
    "layernorm_f16_f143",
    "layernorm_f16_f152",
    "layernorm_stats_f16",
    "layernorm_parts_f16",
    "layernorm_parts_f16_f143",
    "fold_norm_records",
    "layernorm_parts_f16_seg",
    "layernorm_parts_f16_f143_seg",
    "reduce_add_f16",
    "reduce_add_f16_plus1",
    "reduce_add_f16_plus2",
    "reduce_add_f16_f143",
    "reduce_add_f16_f152",
    "mul_f16",
    "sub_f32",
    "div_f16",
    "div_f32",
    "silu_f16",
    "silu_f32",
    "gelu_tanh_f16",
    "gelu_tanh_f32",
    "rmsnorm_f16",
    "rmsnorm_stats_f16",
    "rmsnorm_parts_f16",
    "rmsnorm_parts_f16_seg",
    "softmax_stats_f16",
    "softmax_stats_f16_once",
    "softmax_parts_f16_once_f143",
    "fold_softmax_records",
    "softmax_parts_f16_seg",
    "reduce_add_f32",
    "softmax_f16_mask_f16",
    "softmax_f16_mask_f32",
    "softmax_stats_f16_mask_f16",
    "softmax_stats_f16_mask_f32",
    "softmax_parts_f16_mask_f16_seg",
    "softmax_parts_f16_mask_f32_seg",
    "reduce_sum_f16",
    "reduce_mean_f16",
    "reduce_max_f16",
    "reduce_sum_f32",
    "reduce_mean_f32",
    "reduce_max_f32",
    "reduce_sum_f16_partial",
    "reduce_max_f16_partial",
    "reduce_sum_f32_partial",
    "reduce_max_f32_partial",
    "reduce_sum_partials_f16",
    "reduce_mean_partials_f16",
    "reduce_max_partials_f16",
    "reduce_mean_partials_f32",
];

/// Rows of a tile's share: one, fewer than the workers, each remainder of
/// six, and many.
const ROWS: &[usize] = &[1, 2, 3, 4, 5, 6, 7, 13, 19, 64];
/// Row lengths: tiny, odd (rows start misaligned), not multiples of 4 or
/// 8, and the model widths.
const LENGTHS: &[usize] = &[1, 3, 17, 64, 197, 384, 999];
/// Grid points past this many elements are left out (simulation time).
const MAX_ELEMENTS: usize = 20_000;
/// Long rows and large blocks beyond the grid.
const EXTRA: &[(usize, usize)] = &[(1, 8192), (1, 4304), (4, 1536), (32, 1024)];
/// Short rows, a quad or two with single elements at one end or both
/// (after the rest, so the grid's random data stays as it was).
const SHORT: &[(usize, usize)] = &[(6, 5), (6, 6), (6, 7), (12, 9), (12, 10), (12, 11), (64, 6)];
/// Rows of an even length that is not a multiple of 4, which alternate
/// between two alignments (after the rest too).
const EVEN: &[(usize, usize)] = &[(2, 770), (3, 198), (7, 198), (13, 30), (24, 770), (64, 50)];

/// (count, length) of the reduce-add: lengths are multiples of 4.
const REDUCE: &[(usize, usize)] = &[
    (1, 4),
    (1, 400),
    (2, 4),
    (2, 20),
    (2, 400),
    (2, 1188),
    (3, 24),
    (4, 388),
    (4, 1188),
    (5, 100),
    (6, 96),
    (7, 64),
    (8, 1188),
    (9, 40),
    (16, 384),
    (16, 4),
];

fn shapes(kernel: &str) -> Vec<(usize, usize)> {
    if kernel.starts_with("reduce_add_f16") || kernel == "reduce_add_f32" {
        return REDUCE.to_vec();
    }
    // A segmented norm's tiles hold segments a multiple of 4 long, all
    // but a row's last (`plan::segments::candidates`): several rows of a
    // length that is not are left out for them.
    let segmented = kernel.ends_with("_seg");
    let mut shapes: Vec<(usize, usize)> = ROWS
        .iter()
        .flat_map(|&r| LENGTHS.iter().map(move |&l| (r, l)))
        .filter(|&(r, l)| r * l <= MAX_ELEMENTS)
        .filter(|&(r, l)| !segmented || r == 1 || l % 4 == 0)
        .collect();
    shapes.extend_from_slice(EXTRA);
    shapes.extend(
        SHORT
            .iter()
            .chain(EVEN)
            .filter(|&&(r, l)| !segmented || r == 1 || l % 4 == 0),
    );
    shapes
}

/// The shapes with, for a causal kernel, the tile's first matrix row and
/// the matrix's row count: every shape as the first rows of square score
/// matrices stacked along the rows, and a few more from the middle of
/// matrices taller than wide (whose rows past the row length keep all of
/// it) and wider than tall.
fn causal_shapes(kernel: &str) -> Vec<(usize, usize, (usize, usize))> {
    let mut found: Vec<_> = shapes(kernel)
        .into_iter()
        .map(|(rows, row_length)| (rows, row_length, (0, row_length)))
        .collect();
    if kernel.ends_with("_causal") {
        for (rows, row_length) in [(5, 64), (19, 64), (64, 64), (13, 197), (8, 384)] {
            found.push((rows, row_length, (row_length / 2, 3 * row_length)));
            found.push((rows, row_length, (rows / 2, row_length / 2 + 1)));
        }
        // Short rows of tall matrices, most of them keeping every element
        // (rows of two, all single elements, run about a quarter below
        // their estimate: the formulas do not model rows without quads).
        for row_length in [4, 8, 12, 16] {
            found.push((64, row_length, (0, 64)));
        }
        // A row or two a tile, split among the workers, from the bottom of
        // score matrices wider than tall: the first part holds every kept
        // element (after the rest, so their data stays as it was).
        for (rows, row_length, (first, matrix)) in [
            (1, 768, (95, 96)),
            (1, 1024, (63, 64)),
            (2, 768, (94, 96)),
            (1, 577, (127, 128)),
            (1, 197, (32, 33)),
        ] {
            found.push((rows, row_length, (first, matrix)));
        }
    }
    found
}

/// One measurement: a table line, and whether the formula missed.
fn line(kernel: &str, shape: &str, cycles: u64, estimate: i64) -> (String, bool) {
    let error = (estimate as f64 - cycles as f64) / cycles as f64;
    let text = format!(
        "{kernel:<20} {shape:>11} {cycles:>9} {estimate:>9} {:>+7.1}%",
        100.0 * error
    );
    (text, error.abs() > TOLERANCE)
}

#[test]
fn cost_formulas_fit_the_measured_cycles() {
    let mut table = format!(
        "{:<20} {:>11} {:>9} {:>9} {:>8}\n",
        "kernel", "shape", "measured", "formula", "error"
    );
    let mut misfits = Vec::new();
    for kernel in KERNELS {
        let compiled = compile(kernel);
        let mut rng = Rng::new(0xca1b);
        for (rows, row_length, causal) in causal_shapes(kernel) {
            let settings = Settings {
                causal: Some(causal),
                fully_masked_rows: false,
                ..Settings::default()
            };
            let case = case(kernel, rows, row_length, &settings, &mut rng);
            let shape = match causal {
                (0, matrix_rows) if matrix_rows == row_length => format!("{rows}x{row_length}"),
                (first, matrix_rows) => format!("{rows}x{row_length}@{first}/{matrix_rows}"),
            };
            let cycles =
                check(&compiled, &case).unwrap_or_else(|e| panic!("{kernel} {shape}: {e}"));
            let estimate = compiled.estimate(&case.params);
            let (text, missed) = line(kernel, &shape, cycles, estimate);
            let _ = writeln!(table, "{text}");
            if missed {
                misfits.push(text);
            }
        }
    }
    for (text, missed) in rearrange_blocks() {
        let _ = writeln!(table, "{text}");
        if missed {
            misfits.push(text);
        }
    }
    println!("{table}");
    assert!(
        misfits.is_empty(),
        "cost formulas more than {:.0} % off:\n{}",
        100.0 * TOLERANCE,
        misfits.join("\n")
    );
}

/// `rearrange_blocks` over (K blocks, rows, words per chunk): the output is
/// checked by `math::rearrange_blocks_moves_each_chunk_and_nothing_else`;
/// here only the cycles count.
fn rearrange_blocks() -> Vec<(String, bool)> {
    let kernel = compile("rearrange_blocks");
    let mut rng = Rng::new(3);
    let mut lines = Vec::new();
    for &(outer, inner, words) in &[
        (1, 1, 1),
        (4, 8, 4),
        (6, 99, 4),
        (12, 99, 4),
        (13, 16, 2),
        (24, 50, 4),
        (3, 197, 8),
        (5, 1, 4),
        (50, 1, 4),
        (600, 1, 4),
        (50, 2, 2),
        (50, 1, 2),
    ] {
        let chunk = 8 * words;
        let source: Vec<u8> = (0..outer * inner * chunk)
            .map(|_| rng.next_u64() as u8)
            .collect();
        let params = vec![
            ("outer", outer as i64),
            ("inner", inner as i64),
            ("words", words as i64),
            ("src_offset", 0),
            ("src_outer", chunk as i64),
            ("src_inner", (outer * chunk) as i64),
            ("dst_offset", 0),
            ("dst_outer", (inner * chunk) as i64),
            ("dst_inner", chunk as i64),
        ];
        let outcome = kernel.run(&Run {
            inputs: vec![&source],
            out_bytes: source.len(),
            params: params.clone(),
        });
        lines.push(line(
            "rearrange_blocks",
            &format!("{outer}x{inner}x{words}"),
            outcome.cycles,
            kernel.estimate(&params),
        ));
    }
    lines
}
