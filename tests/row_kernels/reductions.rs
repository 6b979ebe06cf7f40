//! The row reductions of `device/reduce_rows.S` against host arithmetic:
//! sums and means within the f32 accumulation's bound of an f64 sum,
//! maxima exact, with infinities and NaNs.

use crate::harness::{compile, Run};
use crate::host::{check_shapes, f16_bytes, f16_values, Settings};
use expect_test::expect;
use half::f16;

const KERNELS: &[&str] = &[
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

/// One row, fewer rows than workers, odd lengths (rows that start at
/// every alignment), each remainder of six rows and a long row.
const SHAPES: &[(usize, usize)] = &[
    (1, 1),
    (1, 2),
    (2, 3),
    (3, 5),
    (5, 7),
    (7, 8),
    (6, 64),
    (13, 33),
    (20, 130),
    (1, 1001),
    (2, 4099),
];

#[test]
fn reductions_match_the_host() {
    for (seed, kernel) in KERNELS.iter().enumerate() {
        check_shapes(kernel, SHAPES, &Settings::default(), 40 + seed as u64);
    }
}

#[test]
fn reductions_declare_the_emitters_fields() {
    let fields: Vec<String> = KERNELS
        .iter()
        .map(|k| format!("{k}: {}", compile(k).fields()))
        .collect();
    expect![[r#"
        reduce_sum_f16: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32
        reduce_mean_f16: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32
        reduce_max_f16: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32
        reduce_sum_f32: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32
        reduce_mean_f32: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32
        reduce_max_f32: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32
        reduce_sum_f16_partial: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32 parts@16:u32 piece@20:u32
        reduce_max_f16_partial: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32 parts@16:u32 piece@20:u32
        reduce_sum_f32_partial: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32 parts@16:u32 piece@20:u32
        reduce_max_f32_partial: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32 parts@16:u32 piece@20:u32
        reduce_sum_partials_f16: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32
        reduce_mean_partials_f16: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32 divisor@16:u32
        reduce_max_partials_f16: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32
        reduce_mean_partials_f32: in0@0:ptr out@4:ptr rows@8:u32 row_length@12:u32 divisor@16:u32"#]]
    .assert_eq(&fields.join("\n"));
}

/// Runs `kernel` over f16 `rows` of equal length and returns its results.
fn run_f16(kernel: &str, rows: &[&[f64]]) -> Vec<f16> {
    let values: Vec<f16> = rows.concat().iter().map(|&v| f16::from_f64(v)).collect();
    let input = f16_bytes(&values);
    let outcome = compile(kernel).run(&Run {
        inputs: vec![&input],
        out_bytes: 2 * rows.len(),
        params: vec![
            ("rows", rows.len() as i64),
            ("row_length", rows[0].len() as i64),
        ],
    });
    f16_values(&outcome.out)
}

/// Runs `kernel` over f32 `rows` of equal length and returns its results.
fn run_f32(kernel: &str, rows: &[&[f64]]) -> Vec<f32> {
    let input: Vec<u8> = rows
        .concat()
        .iter()
        .flat_map(|&v| (v as f32).to_le_bytes())
        .collect();
    let outcome = compile(kernel).run(&Run {
        inputs: vec![&input],
        out_bytes: 4 * rows.len(),
        params: vec![
            ("rows", rows.len() as i64),
            ("row_length", rows[0].len() as i64),
        ],
    });
    outcome
        .out
        .chunks(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Rows of five: a NaN among numbers, infinities of both signs, only
/// negative infinities, only NaNs, NaN then -inf.
const NAN_ROWS: [&[f64]; 5] = {
    const INF: f64 = f64::INFINITY;
    const NAN: f64 = f64::NAN;
    [
        &[1.0, NAN, 3.0, -2.0, 0.5],
        &[-INF, 2.0, INF, NAN, -7.0],
        &[-INF, -INF, -INF, -INF, -INF],
        &[NAN, NAN, NAN, NAN, NAN],
        &[NAN, -INF, NAN, NAN, NAN],
    ]
};

#[test]
fn max_ignores_nan_and_keeps_infinities() {
    let rows = NAN_ROWS;
    let show = |values: Vec<String>| values.join(" ");
    let f16s = run_f16("reduce_max_f16", &rows);
    let f32s = run_f32("reduce_max_f32", &rows);
    expect!["3 inf -inf NaN -inf"].assert_eq(&show(f16s.iter().map(|v| v.to_string()).collect()));
    expect!["3 inf -inf NaN -inf"].assert_eq(&show(f32s.iter().map(|v| v.to_string()).collect()));
}

/// The segmented maximum keeps the rule: f16 pieces' f32 partials, then
/// the f16 maximum of f32 partials, each ignoring a NaN unless it is all.
#[test]
fn segmented_maxima_ignore_nan_and_keep_infinities() {
    let rows = NAN_ROWS;
    let values: Vec<f16> = rows.concat().iter().map(|&v| f16::from_f64(v)).collect();
    let partials = compile("reduce_max_f16_partial").run(&Run {
        inputs: vec![&f16_bytes(&values)],
        out_bytes: 4 * rows.len(),
        params: vec![
            ("rows", rows.len() as i64),
            ("row_length", 5),
            ("parts", 1),
            ("piece", 5),
        ],
    });
    let as_f32: Vec<String> = partials
        .out
        .chunks(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]).to_string())
        .collect();
    expect!["3 inf -inf NaN -inf"].assert_eq(&as_f32.join(" "));
    let maxima = compile("reduce_max_partials_f16").run(&Run {
        inputs: vec![&partials.out],
        out_bytes: 2,
        params: vec![("rows", 1), ("row_length", rows.len() as i64)],
    });
    expect!["inf"].assert_eq(&f16_values(&maxima.out)[0].to_string());
    let maxima = compile("reduce_max_partials_f16").run(&Run {
        inputs: vec![&partials.out[12..]],
        out_bytes: 2,
        params: vec![("rows", 1), ("row_length", 2)],
    });
    expect!["-inf"].assert_eq(&f16_values(&maxima.out)[0].to_string());
}

#[test]
fn sums_propagate_infinities_and_nan() {
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    let rows: [&[f64]; 4] = [
        &[1.0, 2.0, inf, 4.0, 5.0],
        &[1.0, -inf, 3.0, 4.0, 5.0],
        &[inf, -inf, 3.0, 4.0, 5.0],
        &[1.0, 2.0, 3.0, nan, 5.0],
    ];
    let show = |values: Vec<String>| values.join(" ");
    for kernel in ["reduce_sum_f16", "reduce_mean_f16"] {
        let sums = run_f16(kernel, &rows);
        expect!["inf -inf NaN NaN"].assert_eq(&show(sums.iter().map(|v| v.to_string()).collect()));
    }
    for kernel in ["reduce_sum_f32", "reduce_mean_f32"] {
        let sums = run_f32(kernel, &rows);
        expect!["inf -inf NaN NaN"].assert_eq(&show(sums.iter().map(|v| v.to_string()).collect()));
    }
}

/// An f16 sum that overflows f16 is computed in f32 and rounds to
/// infinity only at the end; its mean is back in range.
#[test]
fn f16_sums_accumulate_in_f32() {
    let row = [60000.0; 8];
    let rows: [&[f64]; 1] = [&row];
    expect!["inf"].assert_eq(&run_f16("reduce_sum_f16", &rows)[0].to_string());
    expect!["60000"].assert_eq(&run_f16("reduce_mean_f16", &rows)[0].to_string());
}
