//! Casts, additions, multiplications, subtractions and divisions:
//! bit-exact against the host.

use crate::host::{check_shapes, Settings};

/// Shapes (rows, row_length): fewer rows than workers, odd and tiny row
/// lengths, every tail length, and one larger block.
const SHAPES: &[(usize, usize)] = &[
    (1, 1),
    (1, 3),
    (2, 5),
    (3, 7),
    (5, 6),
    (6, 4),
    (7, 13),
    (13, 33),
    (16, 64),
    (40, 257),
];

#[test]
fn casts_f16_to_fp8_round_and_saturate_with_the_output_scale() {
    for kernel in ["cast_f16_f143", "cast_f16_f152"] {
        for out_scale in [0, 3, -4] {
            let settings = Settings {
                out_scale,
                ..Settings::default()
            };
            check_shapes(kernel, SHAPES, &settings, 0x5eed);
        }
    }
}

#[test]
fn gelu_stored_as_fp8_is_the_f16_gelu_then_the_cast_bit_for_bit() {
    for kernel in ["gelu_f16_f143", "gelu_f16_f152"] {
        for out_scale in [0, 2, -5] {
            let settings = Settings {
                out_scale,
                ..Settings::default()
            };
            check_shapes(kernel, SHAPES, &settings, 0xf8);
        }
    }
}

#[test]
fn gelu_of_a_sum_is_the_add_then_the_gelu_bit_for_bit() {
    check_shapes("add_gelu_f16", SHAPES, &Settings::default(), 0xadd);
    for kernel in ["add_gelu_f16_f143", "add_gelu_f16_f152"] {
        for out_scale in [0, 2, -5] {
            let settings = Settings {
                out_scale,
                ..Settings::default()
            };
            check_shapes(kernel, SHAPES, &settings, 0xadd8);
        }
    }
}

#[test]
fn layernorm_stored_as_fp8_is_layernorm_then_the_cast_bit_for_bit() {
    // Split rows (1, 2, 3, 7 and 13 rows) and misaligned ones (odd
    // lengths) as well as the aligned shapes.
    for kernel in [
        "layernorm_f16_f143",
        "layernorm_f16_f152",
        "layernorm_parts_f16_f143",
        "layernorm_parts_f16_f152",
    ] {
        for out_scale in [0, -3] {
            let settings = Settings {
                out_scale,
                ..Settings::default()
            };
            check_shapes(kernel, SHAPES, &settings, 0x1f8);
            check_shapes(kernel, &[(1, 1001), (2, 384), (20, 130)], &settings, 0x2f8);
        }
    }
}

#[test]
fn casts_fp8_to_f16_apply_the_input_scale() {
    for kernel in ["cast_f143_f16", "cast_f152_f16"] {
        for in_scale in [0, 5, -7] {
            let settings = Settings {
                in_scale,
                ..Settings::default()
            };
            check_shapes(kernel, SHAPES, &settings, 0x5eed);
        }
    }
}

#[test]
fn casts_between_f16_and_f32() {
    for kernel in ["cast_f16_f32", "cast_f32_f16"] {
        check_shapes(kernel, SHAPES, &Settings::default(), 0x5eed);
    }
}

#[test]
fn additions_are_correctly_rounded() {
    for kernel in ["add_f16", "add_f32"] {
        check_shapes(kernel, SHAPES, &Settings::default(), 0x5eed);
    }
}

#[test]
fn multiplications_subtractions_and_divisions_are_correctly_rounded() {
    for kernel in [
        "mul_f16", "sub_f16", "div_f16", "mul_f32", "sub_f32", "div_f32",
    ] {
        check_shapes(kernel, SHAPES, &Settings::default(), 0x5eed);
    }
}
