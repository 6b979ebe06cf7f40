//! Device tests of the row-wise kernels in `device/`: each variant runs on
//! the single-tile executor with six workers on seeded random data and is
//! compared with a host computation (`host.rs`: bit-exact for casts, add,
//! reduce-add and rearrange; within stated f16 ulps for GELU, softmax and
//! layernorm). Shapes cover fewer rows than workers, rows split across
//! workers, and row lengths that are not multiples of 4, so rows start
//! misaligned and units have tails. `calibration.rs` runs every kernel over
//! a grid of shapes and holds each `.ipub_cost` formula to the measured
//! cycles.

mod calibration;
mod elementwise;
mod harness;
mod host;
mod math;
mod reduce;
mod reductions;

use expect_test::expect;
use harness::compile;

/// Every row kernel variant's state struct, as the emitter will fill it:
/// only operand names and lowering parameters, packed from 0.
#[test]
fn row_kernels_declare_the_emitters_fields() {
    let fields: Vec<String> = [
        "cast_f16_f143",
        "cast_f16_f152",
        "cast_f143_f16",
        "cast_f152_f16",
        "cast_f16_f32",
        "cast_f32_f16",
        "add_f16",
        "add_f32",
        "gelu_f16",
        "gelu_f16_f143",
        "add_gelu_f16",
        "add_gelu_f16_f143",
        "softmax_f16",
        "softmax_f16_causal",
        "layernorm_f16",
        "layernorm_f16_f143",
        "layernorm_stats_f16",
        "layernorm_parts_f16",
        "layernorm_parts_f16_f143",
        "fold_norm_records",
        "layernorm_parts_f16_f143_seg",
        "rearrange_f16_b16x4",
        "rearrange_blocks",
        "mul_f16",
        "div_f32",
        "silu_f16",
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
        "softmax_f16_mask_f16",
        "softmax_f16_mask_f32",
        "softmax_stats_f16_mask_f32",
        "softmax_parts_f16_mask_f16_seg",
    ]
    .iter()
    .map(|k| format!("{k}: {}", compile(k).fields()))
    .collect();
    expect![[r#"
        cast_f16_f143: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32 out_scale@16:i32
        cast_f16_f152: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32 out_scale@16:i32
        cast_f143_f16: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32 in_scale@16:i32
        cast_f152_f16: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32 in_scale@16:i32
        cast_f16_f32: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32
        cast_f32_f16: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32
        add_f16: in0@0:ptr in1@4:ptr out@8:ptr rows@12:u32 row_length@16:u32
        add_f32: in0@0:ptr in1@4:ptr out@8:ptr rows@12:u32 row_length@16:u32
        gelu_f16: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32
        gelu_f16_f143: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32 out_scale@16:i32
        add_gelu_f16: in0@0:ptr in1@4:ptr out@8:ptr rows@12:u32 row_length@16:u32
        add_gelu_f16_f143: in0@0:ptr in1@4:ptr out@8:ptr rows@12:u32 row_length@16:u32 out_scale@20:i32
        softmax_f16: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32 scale_bits@16:f32
        softmax_f16_causal: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32 scale_bits@16:f32 first_row@20:u32 matrix_rows@24:u32
        layernorm_f16: in0@0:ptr in1@4:ptr in2@8:ptr out@12:ptr rows@16:u32 row_length@20:u32 epsilon_bits@24:f32
        layernorm_f16_f143: in0@0:ptr in1@4:ptr in2@8:ptr out@12:ptr rows@16:u32 row_length@20:u32 epsilon_bits@24:f32 out_scale@28:i32
        layernorm_stats_f16: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32
        layernorm_parts_f16: in0@0:ptr in1@4:ptr in2@8:ptr out@12:ptr rows@16:u32 row_length@20:u32 epsilon_bits@24:f32 in3@28:ptr
        layernorm_parts_f16_f143: in0@0:ptr in1@4:ptr in2@8:ptr out@12:ptr rows@16:u32 row_length@20:u32 epsilon_bits@24:f32 out_scale@28:i32 in3@32:ptr
        fold_norm_records: in0@0:ptr out@4:ptr rows@8:u32 segment@12:u32 segments@16:u32
        layernorm_parts_f16_f143_seg: in0@0:ptr in1@4:ptr in2@8:ptr out@12:ptr rows@16:u32 row_length@20:u32 epsilon_bits@24:f32 out_scale@28:i32 in3@32:ptr segments@36:u32
        rearrange_f16_b16x4: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32
        rearrange_blocks: in0@0:ptr out@4:ptr outer@8:u32 inner@12:u32 words@16:u32 src_offset@20:u32 src_outer@24:u32 src_inner@28:u32 dst_offset@32:u32 dst_outer@36:u32 dst_inner@40:u32
        mul_f16: in0@0:ptr in1@4:ptr out@8:ptr rows@12:u32 row_length@16:u32
        div_f32: in0@0:ptr in1@4:ptr out@8:ptr rows@12:u32 row_length@16:u32
        silu_f16: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32
        gelu_tanh_f32: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32
        rmsnorm_f16: in0@0:ptr in1@4:ptr out@8:ptr rows@12:u32 row_length@16:u32 epsilon_bits@20:f32
        rmsnorm_stats_f16: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32
        rmsnorm_parts_f16: in0@0:ptr in1@4:ptr out@8:ptr rows@12:u32 row_length@16:u32 epsilon_bits@20:f32 in2@24:ptr
        rmsnorm_parts_f16_seg: in0@0:ptr in1@4:ptr out@8:ptr rows@12:u32 row_length@16:u32 epsilon_bits@20:f32 in2@24:ptr segments@28:u32
        softmax_stats_f16: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32 scale_bits@16:f32
        softmax_stats_f16_once: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32 scale_bits@16:f32 in1@20:ptr
        softmax_parts_f16_once_f143: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32 out_scale@16:i32 in1@20:ptr
        fold_softmax_records: in0@0:ptr out@4:ptr rows@8:u32 segment@12:u32 segments@16:u32
        softmax_parts_f16_seg: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32 scale_bits@16:f32 in1@20:ptr segments@24:u32
        softmax_f16_mask_f16: in0@0:ptr in1@4:ptr out@8:ptr rows@12:u32 row_length@16:u32 scale_bits@20:f32
        softmax_f16_mask_f32: in0@0:ptr in1@4:ptr out@8:ptr rows@12:u32 row_length@16:u32 scale_bits@20:f32
        softmax_stats_f16_mask_f32: in0@0:ptr in1@4:ptr out@8:ptr rows@12:u32 row_length@16:u32 scale_bits@20:f32
        softmax_parts_f16_mask_f16_seg: in0@0:ptr in1@4:ptr out@8:ptr rows@12:u32 row_length@16:u32 scale_bits@20:f32 in2@24:ptr segments@28:u32"#]].assert_eq(&fields.join("\n"));
}
