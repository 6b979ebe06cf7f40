//! Casts and additions: bit-exact against the host.

use crate::harness::{compile, Rng, Run};
use half::f16;
use ipub::isa::fp8::Fp8Format;

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

fn f16_bytes(values: &[f16]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn f16_values(bytes: &[u8]) -> Vec<f16> {
    bytes
        .chunks(2)
        .map(|c| f16::from_le_bytes([c[0], c[1]]))
        .collect()
}

/// Random f16 values over a wide range, with zeros, subnormals and
/// arbitrary bit patterns (infinities, NaNs) mixed in.
fn random_f16(rng: &mut Rng, n: usize, spread: f64) -> Vec<f16> {
    (0..n)
        .map(|_| match rng.next_u64() % 32 {
            0 => f16::from_bits(rng.next_u64() as u16),
            1 => f16::from_f64(rng.normal(1e-5)),
            2 => f16::from_f64(rng.normal(1e4)),
            _ => f16::from_f64(rng.normal(spread)),
        })
        .collect()
}

fn params(rows: usize, row_length: usize) -> Vec<(&'static str, i64)> {
    vec![
        ("rows", rows as i64),
        ("row_length", row_length as i64),
        ("first_row", 0),
        ("matrix_rows", rows as i64),
    ]
}

/// Input buffers for `n` elements.
type Inputs<'a> = &'a dyn Fn(&mut Rng, usize) -> Vec<Vec<u8>>;
/// Expected output bytes from the input buffers, `in_scale` and `out_scale`.
type Reference<'a> = &'a dyn Fn(&[Vec<u8>], i64, i64) -> Vec<u8>;

/// Runs `kernel` over every shape and checks the output bytes against
/// `reference(input bytes...) -> output bytes`.
fn check_bit_exact(kernel: &str, scales: &[(i64, i64)], inputs: Inputs, reference: Reference) {
    let compiled = compile(kernel);
    let mut rng = Rng::new(0x5eed ^ kernel.len() as u64);
    for &(rows, row_length) in SHAPES {
        for &(in_scale, out_scale) in scales {
            let n = rows * row_length;
            let data = inputs(&mut rng, n);
            let expected = reference(&data, in_scale, out_scale);
            let mut p = params(rows, row_length);
            p.push(("in_scale", in_scale));
            p.push(("out_scale", out_scale));
            let outcome = compiled.run(&Run {
                inputs: data.iter().map(Vec::as_slice).collect(),
                out_bytes: expected.len(),
                params: p,
            });
            if let Some(i) = (0..expected.len()).find(|&i| outcome.out[i] != expected[i]) {
                panic!(
                    "{kernel} {rows}x{row_length} scales {in_scale}/{out_scale}: byte {i} is {:#04x}, expected {:#04x}",
                    outcome.out[i], expected[i]
                );
            }
        }
    }
}

fn fp8_format(kernel: &str) -> Fp8Format {
    if kernel.contains("f152") {
        Fp8Format::F152
    } else {
        Fp8Format::F143
    }
}

#[test]
fn casts_f16_to_fp8_round_and_saturate_with_the_output_scale() {
    for kernel in ["cast_f16_f143", "cast_f16_f152"] {
        let format = fp8_format(kernel);
        check_bit_exact(
            kernel,
            &[(0, 0), (0, 3), (0, -4)],
            &|rng, n| vec![f16_bytes(&random_f16(rng, n, 4.0))],
            &|data, _, out_scale| {
                f16_values(&data[0])
                    .into_iter()
                    .map(|v| format.from_f16(v, out_scale as i32))
                    .collect()
            },
        );
    }
}

#[test]
fn casts_fp8_to_f16_apply_the_input_scale() {
    for kernel in ["cast_f143_f16", "cast_f152_f16"] {
        let format = fp8_format(kernel);
        check_bit_exact(
            kernel,
            &[(0, 0), (5, 0), (-7, 0)],
            &|rng, n| vec![(0..n).map(|_| rng.next_u64() as u8).collect()],
            &|data, in_scale, _| {
                let values: Vec<f16> = data[0]
                    .iter()
                    .map(|&b| format.to_f16(b, in_scale as i32))
                    .collect();
                f16_bytes(&values)
            },
        );
    }
}

#[test]
fn casts_between_f16_and_f32() {
    check_bit_exact(
        "cast_f16_f32",
        &[(0, 0)],
        &|rng, n| vec![f16_bytes(&random_f16(rng, n, 100.0))],
        &|data, _, _| {
            f16_values(&data[0])
                .into_iter()
                .flat_map(|v| v.to_f32().to_le_bytes())
                .collect()
        },
    );
    check_bit_exact(
        "cast_f32_f16",
        &[(0, 0)],
        &|rng, n| {
            vec![(0..n)
                .flat_map(|_| {
                    let v = if rng.next_u64() % 16 == 0 {
                        f32::from_bits(rng.next_u64() as u32)
                    } else {
                        rng.normal(1000.0) as f32
                    };
                    v.to_le_bytes()
                })
                .collect()]
        },
        &|data, _, _| {
            let values: Vec<f16> = data[0]
                .chunks(4)
                .map(|c| f16::from_f32(f32::from_le_bytes([c[0], c[1], c[2], c[3]])))
                .collect();
            f16_bytes(&values)
        },
    );
}

#[test]
fn add_f16_is_correctly_rounded() {
    check_bit_exact(
        "add_f16",
        &[(0, 0)],
        &|rng, n| {
            // NaN payloads are not specified; every other pattern is.
            let mut operand = || -> Vec<f16> {
                random_f16(rng, n, 8.0)
                    .into_iter()
                    .map(|v| if v.is_nan() { f16::INFINITY } else { v })
                    .collect()
            };
            vec![f16_bytes(&operand()), f16_bytes(&operand())]
        },
        &|data, _, _| {
            let sums: Vec<f16> = f16_values(&data[0])
                .into_iter()
                .zip(f16_values(&data[1]))
                .map(|(a, b)| f16::from_f64(a.to_f64() + b.to_f64()))
                .collect();
            f16_bytes(&sums)
        },
    );
}

#[test]
fn add_f32_is_correctly_rounded() {
    let random = |rng: &mut Rng, n: usize| -> Vec<u8> {
        (0..n)
            .flat_map(|_| (rng.normal(1000.0) as f32).to_le_bytes())
            .collect()
    };
    check_bit_exact(
        "add_f32",
        &[(0, 0)],
        &|rng, n| vec![random(rng, n), random(rng, n)],
        &|data, _, _| {
            data[0]
                .chunks(4)
                .zip(data[1].chunks(4))
                .flat_map(|(a, b)| {
                    let a = f32::from_le_bytes([a[0], a[1], a[2], a[3]]);
                    let b = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                    (a + b).to_le_bytes()
                })
                .collect()
        },
    );
}
