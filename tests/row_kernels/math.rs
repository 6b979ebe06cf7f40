//! GELU, SiLU, the tanh GELU, softmax, layernorm and RMS norm against f64
//! host computations within stated f16 ulps (or f32 tolerances), and the
//! rearrange copies bit-exactly.

use crate::harness::{compile, Rng, Run};
use crate::host::{check_shapes, Settings};

/// Row shapes: fewer rows than workers, odd lengths (misaligned rows),
/// lengths not multiples of 4, rows split across workers (1, 2, 3, 7, 13
/// and 20 rows), a larger block, and rows of lengths 2 mod 4 (which
/// alternate between two alignments).
const SHAPES: &[(usize, usize)] = &[
    (1, 1),
    (2, 3),
    (3, 5),
    (5, 7),
    (7, 8),
    (6, 64),
    (13, 33),
    (20, 130),
    (1, 1001),
    (4, 6),
    (7, 198),
];

#[test]
fn gelu_is_within_one_ulp_of_the_exact_function() {
    check_shapes("gelu_f16", SHAPES, &Settings::default(), 11);
}

#[test]
fn silu_and_tanh_gelu_are_within_one_ulp() {
    for kernel in ["silu_f16", "gelu_tanh_f16", "silu_f32", "gelu_tanh_f32"] {
        check_shapes(kernel, SHAPES, &Settings::default(), 12);
    }
}

#[test]
fn rmsnorm_is_within_f16_rounding_of_the_f64_reference() {
    check_shapes("rmsnorm_f16", SHAPES, &Settings::default(), 13);
}

#[test]
fn rearrange_copies_rows_exactly() {
    for kernel in ["rearrange_f16_b16x4", "rearrange_f16_b4x16"] {
        check_shapes(kernel, SHAPES, &Settings::default(), 5);
    }
}

#[test]
fn softmax_is_within_one_ulp() {
    // A negative scale makes the row maximum the smallest input's.
    for scale in [0.125f32, 1.0, -0.5] {
        let settings = Settings {
            scale,
            ..Settings::default()
        };
        check_shapes("softmax_f16", SHAPES, &settings, 7);
    }
}

#[test]
fn softmax_with_exponentials_stored_is_within_its_extra_rounding() {
    for scale in [0.125f32, 1.0, -0.5] {
        let settings = Settings {
            scale,
            ..Settings::default()
        };
        check_shapes("softmax_f16_once", SHAPES, &settings, 17);
    }
    for (rows, row_length, first_row, matrix_rows) in [
        (10, 12, 5, 12),
        (7, 5, 3, 3),
        (13, 33, 40, 33),
        (3, 100, 1, 100),
    ] {
        let settings = Settings {
            scale: 0.25,
            causal: Some((first_row, matrix_rows)),
            ..Settings::default()
        };
        let shape = [(rows, row_length)];
        check_shapes("softmax_f16_once_causal", &shape, &settings, 18);
    }
}

#[test]
fn causal_softmax_masks_by_matrix_row() {
    // (rows, row_length, first_row, matrix_rows): a tile inside one
    // matrix, tiles whose rows wrap into the next matrix, more matrix rows
    // than the row is long, a far-away first row, and split rows (1, 3 and
    // 13 rows) whose parts are partly or wholly masked.
    for (rows, row_length, first_row, matrix_rows) in [
        (10, 12, 0, 12),
        (10, 12, 5, 12),
        (7, 5, 3, 3),
        (9, 4, 2, 1),
        (4, 3, 1000, 7),
        (13, 33, 40, 33),
        (1, 64, 10, 64),
        (3, 100, 1, 100),
        (13, 70, 57, 70),
    ] {
        let settings = Settings {
            scale: 0.25,
            causal: Some((first_row, matrix_rows)),
            ..Settings::default()
        };
        check_shapes("softmax_f16_causal", &[(rows, row_length)], &settings, 8);
    }
}

#[test]
fn masked_softmax_is_within_one_ulp_and_zero_on_fully_masked_rows() {
    // Rows with no, some and every element removed, finite biases and
    // -1e4, for both mask types; a negative scale included.
    for kernel in ["softmax_f16_mask_f16", "softmax_f16_mask_f32"] {
        for scale in [0.125f32, -0.5] {
            let settings = Settings {
                scale,
                ..Settings::default()
            };
            check_shapes(kernel, SHAPES, &settings, 14);
        }
    }
}

#[test]
fn layernorm_is_within_f16_rounding_of_the_f64_reference() {
    check_shapes("layernorm_f16", SHAPES, &Settings::default(), 9);
}

/// Rows of one value (padding tokens) normalise to beta in every form:
/// their mean is exact, so no deviation is left for 1 / sqrt(epsilon) to
/// magnify.
#[test]
fn layernorm_of_constant_rows_is_beta() {
    let constant = Settings {
        constant_rows: true,
        ..Settings::default()
    };
    let long = [(1, 768), (3, 385), (2, 4304)];
    for kernel in [
        "layernorm_f16",
        "layernorm_stats_f16",
        "layernorm_parts_f16",
        "layernorm_parts_f16_seg",
    ] {
        check_shapes(kernel, SHAPES, &constant, 11);
        check_shapes(kernel, &long, &constant, 11);
    }
}

#[test]
fn split_layernorm_is_within_f16_rounding_of_the_f64_reference() {
    // Each part's records against the f64 statistics, then the two kernels
    // one after the other against the f64 layernorm; the long rows are the
    // split form's business (one to four rows of the model widths).
    let long = [(1, 768), (3, 384), (4, 384), (2, 4304)];
    for kernel in ["layernorm_stats_f16", "layernorm_parts_f16"] {
        check_shapes(kernel, SHAPES, &Settings::default(), 10);
        check_shapes(kernel, &long, &Settings::default(), 10);
    }
}

#[test]
fn segmented_layernorm_is_within_f16_rounding_of_the_f64_reference() {
    // A tile's segment of rows cut over three tiles: its block of the
    // records, and its part of the output from every tile's records.
    let long = [(1, 256), (2, 128), (1, 1536)];
    for kernel in [
        "fold_norm_records",
        "layernorm_parts_f16_seg",
        "layernorm_parts_f16_f143_seg",
    ] {
        check_shapes(kernel, SHAPES, &Settings::default(), 16);
        check_shapes(kernel, &long, &Settings::default(), 16);
    }
}

#[test]
fn segmented_softmax_is_within_one_ulp() {
    // A tile's segment of rows cut over three tiles: its block of the
    // records, and its part of the output from every tile's records, for
    // a positive and a negative scale.
    let long = [(1, 256), (2, 128), (1, 1536)];
    for scale in [0.125f32, -0.5] {
        let settings = Settings {
            scale,
            ..Settings::default()
        };
        for kernel in [
            "softmax_stats_f16",
            "fold_softmax_records",
            "softmax_parts_f16_seg",
        ] {
            check_shapes(kernel, SHAPES, &settings, 18);
            check_shapes(kernel, &long, &settings, 18);
        }
    }
}

#[test]
fn segmented_masked_softmax_is_within_one_ulp_and_zero_on_removed_rows() {
    // As the segmented softmax, with both mask types: rows partly and
    // fully removed, and rows of which only the tile's segment is.
    let long = [(1, 256), (2, 128), (1, 1536), (5, 9)];
    for scale in [0.125f32, -0.5] {
        let settings = Settings {
            scale,
            ..Settings::default()
        };
        for kernel in [
            "softmax_stats_f16_mask_f16",
            "softmax_stats_f16_mask_f32",
            "softmax_parts_f16_mask_f16_seg",
            "softmax_parts_f16_mask_f32_seg",
        ] {
            check_shapes(kernel, SHAPES, &settings, 20);
            check_shapes(kernel, &long, &settings, 20);
        }
    }
}

#[test]
fn split_softmax_stored_as_fp8_rescales_its_stored_exponentials() {
    // Rows that do not divide among the workers, a long row, misaligned
    // rows, both formats and a negative scale.
    let long = [(1, 197), (2, 197), (7, 64), (1, 1536)];
    for (scale, out_scale) in [(0.125f32, 4), (-0.5, 6)] {
        let settings = Settings {
            scale,
            out_scale,
            ..Settings::default()
        };
        for kernel in [
            "softmax_stats_f16_once",
            "softmax_parts_f16_once_f143",
            "softmax_parts_f16_once_f152",
        ] {
            check_shapes(kernel, SHAPES, &settings, 19);
            check_shapes(kernel, &long, &settings, 19);
        }
    }
}

#[test]
fn split_softmax_stored_as_fp8_keeps_its_bytes_on_non_finite_rows() {
    // Whole rows within a worker's share read their own record; the bytes
    // must be those of the combination of all six records, on rows whose
    // maximum is an infinity or a NaN too, for scales of either sign, zero
    // and one that overflows f16, and on rows cut between workers.
    let shapes = [(20, 16), (12, 24), (19, 197), (9, 8), (4, 5)];
    for scale in [0.125f32, -0.5, 0.0, 1e35] {
        let settings = Settings {
            scale,
            non_finite_rows: true,
            ..Settings::default()
        };
        for kernel in ["softmax_parts_f16_once_f143", "softmax_parts_f16_once_f152"] {
            check_shapes(kernel, &shapes, &settings, 23);
        }
    }
}

#[test]
fn split_rmsnorm_is_within_f16_rounding_of_the_f64_reference() {
    let long = [(1, 768), (2, 512), (4, 384), (2, 4304)];
    for kernel in ["rmsnorm_stats_f16", "rmsnorm_parts_f16"] {
        check_shapes(kernel, SHAPES, &Settings::default(), 15);
        check_shapes(kernel, &long, &Settings::default(), 15);
    }
    // Rows cut over three tiles, as for the layernorm.
    let long = [(1, 256), (2, 128), (1, 1536)];
    check_shapes("rmsnorm_parts_f16_seg", SHAPES, &Settings::default(), 17);
    check_shapes("rmsnorm_parts_f16_seg", &long, &Settings::default(), 17);
}

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
        (14, 1, 4, 3, 1),
        (9, 3, 2, 5, 1),
        (7, 1, 2, 2, 0),
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
