//! Reduce-add of GEMM partials: bit-exact against f32 sums rounded once
//! (f16 partials), or against f32 sums in partial order (f32 partials).

use crate::host::{check_shapes, Settings};

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
