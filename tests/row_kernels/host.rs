//! Host arithmetic for every row kernel: the inputs a run of a variant
//! takes and what its output must be. Casts, additions, reductions and
//! copies, multiplications, subtractions and divisions must match bit for
//! bit (the book defines them exactly); GELU, SiLU, the tanh GELU, softmax,
//! layernorm and RMS norm must be within one f16 step of an f64 evaluation
//! (or, in f32, within a stated tolerance), with a stated slack where f32
//! arithmetic cancels.
//!
//! [`case`] builds a run and its expectation; [`check`] runs it and
//! compares. Every other test of this directory goes through them.

use crate::harness::{Kernel, Rng, Run};
use half::f16;
use ipub::isa::fp8::{erf, Fp8Format};

mod reduce_rows;

pub fn f16_bytes(values: &[f16]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

pub fn f16_values(bytes: &[u8]) -> Vec<f16> {
    bytes
        .chunks(2)
        .map(|c| f16::from_le_bytes([c[0], c[1]]))
        .collect()
}

fn f32_values(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Roughly normal f16 values of deviation `std`.
pub fn normal_f16(rng: &mut Rng, n: usize, std: f64) -> Vec<f16> {
    (0..n).map(|_| f16::from_f64(rng.normal(std))).collect()
}

/// f16 values over a wide range, with zeros, subnormals and arbitrary bit
/// patterns (infinities, NaNs) mixed in.
pub fn wide_f16(rng: &mut Rng, n: usize, spread: f64) -> Vec<f16> {
    (0..n)
        .map(|_| match rng.next_u64() % 32 {
            0 => f16::from_bits(rng.next_u64() as u16),
            1 => f16::from_f64(rng.normal(1e-5)),
            2 => f16::from_f64(rng.normal(1e4)),
            _ => f16::from_f64(rng.normal(spread)),
        })
        .collect()
}

/// Distance in f16 steps between a device value and the f16 nearest the
/// reference (0 and -0 are one apart; fine for these tolerances).
pub fn ulps(device: f16, reference: f64) -> i32 {
    let ordinal = |v: f16| {
        let b = i32::from(v.to_bits());
        if b & 0x8000 != 0 {
            -(b & 0x7fff)
        } else {
            b
        }
    };
    (ordinal(device) - ordinal(f16::from_f64(reference))).abs()
}

/// Run parameters beyond the shape, with the values most tests want.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    pub in_scale: i64,
    pub out_scale: i64,
    /// Softmax's scale.
    pub scale: f32,
    /// Causal softmax: the tile's first matrix row and the matrix's rows
    /// (`None`: the tile's rows are one matrix's first rows).
    pub causal: Option<(usize, usize)>,
    /// Masked softmax: whether every fourth row of the mask removes every
    /// element (calibration leaves them out: such rows skip two passes).
    pub fully_masked_rows: bool,
    /// Split softmax stored as FP8: rows holding an infinity, all -inf or
    /// a NaN among the finite ones, checked against the emulation alone.
    pub non_finite_rows: bool,
    /// Norms: every row holds one value (padding tokens), whose deviations
    /// are exactly zero only if the mean is exact.
    pub constant_rows: bool,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            in_scale: 0,
            out_scale: 0,
            scale: 0.125,
            causal: None,
            fully_masked_rows: true,
            non_finite_rows: false,
            constant_rows: false,
        }
    }
}

/// What the output must be.
enum Expected {
    Bytes(Vec<u8>),
    /// f32 values within `tolerance` of `reference`.
    F32 {
        reference: Vec<f64>,
        tolerance: Vec<f64>,
    },
    /// f16 values within one step of `reference`, or within `slack` of it.
    F16 {
        reference: Vec<f64>,
        slack: Vec<f64>,
    },
}

/// One run of a variant and its expected output.
pub struct Case {
    pub inputs: Vec<Vec<u8>>,
    pub params: Vec<(&'static str, i64)>,
    out_bytes: usize,
    expected: Expected,
}

/// The correctly rounded f16 sums of `a` and `b`, as `add_f16` stores them.
fn f16_sums(a: &[f16], b: &[f16]) -> Vec<f16> {
    a.iter()
        .zip(b)
        .map(|(x, y)| f16::from_f64(x.to_f64() + y.to_f64()))
        .collect()
}

/// The bytes the FP8-bound GELU forms store for `x`: the GELU evaluated in
/// f16 as `device/gelu_f16.S` documents it (h = x * 0.5, t = x *
/// f16(1/sqrt(2)), u = f16(erf(t)) + 1, y = h * u, each step rounded to
/// f16; f16 products and sums are exact in f64, so one rounding from f64 is
/// the correctly rounded result), then the cast. Each finite result must
/// also be within an FP8 step of the f64 GELU, plus the f16 steps' error:
/// about 2^-11 of y, and |x| * 2^-11 where 1 + erf cancels.
fn gelu_in_f16_to_fp8(x: &[f16], format: Fp8Format, out_scale: i32) -> Vec<u8> {
    let r = f16::from_f64;
    let rsqrt2 = r(std::f64::consts::FRAC_1_SQRT_2).to_f64();
    // FP8 values in f64: with a positive scale they may lie beyond f16.
    let value = |byte: u8| format.to_f16(byte, 0).to_f64() * 2f64.powi(out_scale);
    let largest = value(0x7f);
    x.iter()
        .enumerate()
        .map(|(k, &v)| {
            let x = v.to_f64();
            let h = r(x * 0.5).to_f64();
            let t = r(x * rsqrt2).to_f64();
            let u = r(r(erf(t)).to_f64() + 1.0).to_f64();
            let byte = format.from_f16(r(h * u), out_scale);
            let exact = 0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2));
            if exact.is_finite() && exact.abs() < largest {
                let y = value(byte);
                let step = (value(byte.wrapping_add(1) & 0x7f) - value(byte & 0x7f)).abs();
                let slack = (exact.abs() + x.abs()) * 2f64.powi(-10) + 2f64.powi(-23);
                assert!(
                    (y - exact).abs() <= step + slack,
                    "element {k}: {y} from the f16 GELU of {x}, GELU {exact}"
                );
            }
            byte
        })
        .collect()
}

fn fp8_format(kernel: &str) -> Fp8Format {
    if kernel.contains("f152") {
        Fp8Format::F152
    } else {
        Fp8Format::F143
    }
}

/// A `reduce_add_f16` run over `count` partials of `length` values, expected
/// to store their sums taken in f32 (from +0, as the vector accumulators
/// start) in partial order and rounded once.
pub fn reduce_case(partials: &[f16], count: usize, length: usize) -> Case {
    let sums: Vec<f16> = (0..length)
        .map(|i| {
            let sum = (0..count).fold(0f32, |acc, k| acc + partials[k * length + i].to_f32());
            f16::from_f32(sum)
        })
        .collect();
    Case {
        inputs: vec![f16_bytes(partials)],
        params: vec![("count", count as i64), ("length", length as i64)],
        out_bytes: 2 * length,
        expected: Expected::Bytes(f16_bytes(&sums)),
    }
}

/// A `reduce_add_f16_plus1` or `_plus2` run: the sums of
/// [`reduce_case`], then each of `addends` added in turn, every addition
/// rounded to f16 (the f64 sum of two f16 values is exact, so rounding it
/// once is the correctly rounded f16 sum that `add_f16` stores).
pub fn reduce_plus_case(
    partials: &[f16],
    count: usize,
    length: usize,
    addends: &[Vec<f16>],
) -> Case {
    let mut case = reduce_case(partials, count, length);
    let Expected::Bytes(sums) = &case.expected else {
        unreachable!("reduce_case expects bytes")
    };
    let mut values = f16_values(sums);
    for addend in addends {
        for (v, &a) in values.iter_mut().zip(addend) {
            *v = f16::from_f64(v.to_f64() + a.to_f64());
        }
        case.inputs.push(f16_bytes(addend));
    }
    case.expected = Expected::Bytes(f16_bytes(&values));
    case
}

/// A run of `kernel` over `rows x row_length` values (for `reduce_add_f16`,
/// `rows` partials of `row_length` values) on seeded data.
pub fn case(
    kernel: &str,
    rows: usize,
    row_length: usize,
    settings: &Settings,
    rng: &mut Rng,
) -> Case {
    let n = rows * row_length;
    let mut params = vec![
        ("rows", rows as i64),
        ("row_length", row_length as i64),
        ("in_scale", settings.in_scale),
        ("out_scale", settings.out_scale),
    ];
    let bytes = |inputs: Vec<Vec<u8>>, expected: Vec<u8>, params| Case {
        inputs,
        params,
        out_bytes: expected.len(),
        expected: Expected::Bytes(expected),
    };
    // A kernel that stores FP8 in the pass that computes its f16 result
    // must store exactly the bytes of its f16 kernel `unfused` run on the
    // device (held to f64 by its own test) followed by the host's cast.
    let fused_cast = |unfused: &str, inputs: Vec<Vec<u8>>, params: Vec<(&'static str, i64)>| {
        let run = crate::harness::compile(unfused).run(&Run {
            inputs: inputs.iter().map(Vec::as_slice).collect(),
            out_bytes: 2 * n,
            params: params.clone(),
        });
        let format = fp8_format(kernel);
        let expected = f16_values(&run.out)
            .iter()
            .map(|&v| format.from_f16(v, settings.out_scale as i32))
            .collect();
        bytes(inputs, expected, params)
    };
    match kernel {
        "cast_f16_f143" | "cast_f16_f152" => {
            let format = fp8_format(kernel);
            let x = wide_f16(rng, n, 4.0);
            let expected = x
                .iter()
                .map(|&v| format.from_f16(v, settings.out_scale as i32))
                .collect();
            bytes(vec![f16_bytes(&x)], expected, params)
        }
        "cast_f143_f16" | "cast_f152_f16" => {
            let format = fp8_format(kernel);
            let x: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
            let values: Vec<f16> = x
                .iter()
                .map(|&b| format.to_f16(b, settings.in_scale as i32))
                .collect();
            bytes(vec![x], f16_bytes(&values), params)
        }
        "cast_f16_f32" => {
            let x = wide_f16(rng, n, 100.0);
            let expected = x.iter().flat_map(|v| v.to_f32().to_le_bytes()).collect();
            bytes(vec![f16_bytes(&x)], expected, params)
        }
        "cast_f32_f16" => {
            let x: Vec<f32> = (0..n)
                .map(|_| match rng.next_u64() % 16 {
                    0 => f32::from_bits(rng.next_u64() as u32),
                    _ => rng.normal(1000.0) as f32,
                })
                .collect();
            let expected: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
            let x = x.iter().flat_map(|v| v.to_le_bytes()).collect();
            bytes(vec![x], f16_bytes(&expected), params)
        }
        "add_f16" => {
            // NaN payloads are not specified; every other pattern is.
            let mut operand = || -> Vec<f16> {
                wide_f16(rng, n, 8.0)
                    .into_iter()
                    .map(|v| if v.is_nan() { f16::INFINITY } else { v })
                    .collect()
            };
            let (a, b) = (operand(), operand());
            let sums: Vec<f16> = a
                .iter()
                .zip(&b)
                .map(|(x, y)| f16::from_f64(x.to_f64() + y.to_f64()))
                .collect();
            bytes(vec![f16_bytes(&a), f16_bytes(&b)], f16_bytes(&sums), params)
        }
        "add_f32" => {
            let mut operand =
                || -> Vec<f32> { (0..n).map(|_| rng.normal(1000.0) as f32).collect() };
            let (a, b) = (operand(), operand());
            let le = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
            let sums: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
            bytes(vec![le(&a), le(&b)], le(&sums), params)
        }
        "reduce_add_f16" => reduce_case(&normal_f16(rng, n, 1.0), rows, row_length),
        "reduce_add_f16_plus1" | "reduce_add_f16_plus2" => {
            let addends = if kernel.ends_with('1') { 1 } else { 2 };
            let partials = normal_f16(rng, n, 1.0);
            let extra: Vec<Vec<f16>> = (0..addends)
                .map(|_| wide_f16(rng, row_length, 4.0))
                .collect();
            reduce_plus_case(&partials, rows, row_length, &extra)
        }
        "reduce_add_f16_f143" | "reduce_add_f16_f152" => {
            // `rows` partials of `row_length` values, wide enough to
            // saturate and to reach the subnormals: the bytes of
            // `reduce_add_f16` over them, then the cast.
            let partials = wide_f16(rng, n, 4.0);
            let params = vec![
                ("count", rows as i64),
                ("length", row_length as i64),
                ("out_scale", settings.out_scale),
            ];
            let mut sums = crate::harness::compile("reduce_add_f16").run(&Run {
                inputs: vec![&f16_bytes(&partials)],
                out_bytes: 2 * row_length,
                params: vec![("count", rows as i64), ("length", row_length as i64)],
            });
            let format = fp8_format(kernel);
            sums.out = f16_values(&sums.out)
                .iter()
                .map(|&v| format.from_f16(v, settings.out_scale as i32))
                .collect();
            bytes(vec![f16_bytes(&partials)], sums.out, params)
        }
        "reduce_add_f32" => {
            // `rows` f32 partials of `row_length` values, summed in f32 in
            // partial order, each addition rounded to f32.
            let partials: Vec<f32> = (0..n).map(|_| rng.normal(100.0) as f32).collect();
            let sums: Vec<f32> = (0..row_length)
                .map(|i| (0..rows).fold(0f32, |acc, k| acc + partials[k * row_length + i]))
                .collect();
            let le = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
            params = vec![("count", rows as i64), ("length", row_length as i64)];
            bytes(vec![le(&partials)], le(&sums), params)
        }
        _ if kernel.starts_with("rearrange_f16_b") => {
            let x: Vec<u8> = (0..2 * n).map(|_| rng.next_u64() as u8).collect();
            bytes(vec![x.clone()], x, params)
        }
        "gelu_f16_f143" | "gelu_f16_f152" => {
            // Wide values reach the formats' saturation and their
            // subnormals, with infinities and NaNs among them.
            let x = wide_f16(rng, n, 6.0);
            let expected = gelu_in_f16_to_fp8(&x, fp8_format(kernel), settings.out_scale as i32);
            bytes(vec![f16_bytes(&x)], expected, params)
        }
        "add_gelu_f16" => {
            // An add fused into the GELU must store exactly the bytes of
            // `add_f16` (the correctly rounded f16 sum, which its own test
            // holds the device to), then `gelu_f16` run on the device.
            let a = normal_f16(rng, n, 4.0);
            let b = normal_f16(rng, n, 2.0);
            let gelu = crate::harness::compile("gelu_f16").run(&Run {
                inputs: vec![&f16_bytes(&f16_sums(&a, &b))],
                out_bytes: 2 * n,
                params: params.clone(),
            });
            bytes(vec![f16_bytes(&a), f16_bytes(&b)], gelu.out, params)
        }
        "add_gelu_f16_f143" | "add_gelu_f16_f152" => {
            // The correctly rounded f16 sum, then the f16 GELU and cast of
            // `gelu_f16_f143`.
            let a = normal_f16(rng, n, 4.0);
            let b = normal_f16(rng, n, 2.0);
            let expected = gelu_in_f16_to_fp8(
                &f16_sums(&a, &b),
                fp8_format(kernel),
                settings.out_scale as i32,
            );
            bytes(vec![f16_bytes(&a), f16_bytes(&b)], expected, params)
        }
        "gelu_f16" => {
            let x = normal_f16(rng, n, 2.5);
            let reference = x
                .iter()
                .map(|v| {
                    let v = v.to_f64();
                    0.5 * v * (1.0 + erf(v / std::f64::consts::SQRT_2))
                })
                .collect();
            // For large negative x, `1 + erf` cancels in f32: the formula
            // the kernel evaluates has an absolute error of about |x| f32
            // ulps of 1, visible only among f16 subnormals.
            let slack = x
                .iter()
                .map(|v| v.to_f64().abs() * 2f64.powi(-23))
                .collect();
            Case {
                inputs: vec![f16_bytes(&x)],
                params,
                out_bytes: 2 * n,
                expected: Expected::F16 { reference, slack },
            }
        }
        "softmax_f16" | "softmax_f16_causal" | "softmax_f16_once" | "softmax_f16_once_causal" => {
            let x = normal_f16(rng, n, 3.0);
            let causal = kernel
                .ends_with("_causal")
                .then(|| settings.causal.unwrap_or((0, rows.max(1))));
            let (first_row, matrix_rows) = causal.unwrap_or((0, rows.max(1)));
            params.extend([
                ("scale_bits", i64::from(settings.scale.to_bits())),
                ("first_row", first_row as i64),
                ("matrix_rows", matrix_rows as i64),
            ]);
            let reference = softmax(&x, row_length, settings.scale, causal);
            // The `_once` form computes in f16: each of the exponential's
            // argument (x - ext) * scale, the scale, the exponential, 1 / s
            // and the product rounds once, the argument's roundings growing
            // with its size (and one subnormal step where values are that
            // small).
            let slack = match kernel.contains("_once") {
                true => reference
                    .iter()
                    .zip(softmax_arguments(&x, row_length, settings.scale, causal))
                    .map(|(e, arg)| match arg.is_finite() {
                        true => e.abs() * 2f64.powi(-9) * (2.0 + arg.abs()) + 2f64.powi(-24),
                        false => 2f64.powi(-24),
                    })
                    .collect(),
                false => vec![0.0; n],
            };
            Case {
                inputs: vec![f16_bytes(&x)],
                params,
                out_bytes: 2 * n,
                expected: Expected::F16 { slack, reference },
            }
        }
        "softmax_stats_f16" | "softmax_stats_f16_once" => {
            // Each worker piece's maximum and sum of exponentials (the
            // exponentials the `_once` form stores are checked through
            // `softmax_parts_f16_once_*`).
            let x = normal_f16(rng, n, 3.0);
            let once = kernel.ends_with("_once");
            let (reference, tolerance) =
                softmax_part_statistics(&x, row_length, settings.scale, once);
            params.push(("scale_bits", i64::from(settings.scale.to_bits())));
            let mut inputs = vec![f16_bytes(&x)];
            if kernel.ends_with("_once") {
                inputs.push(vec![0; 2 * n]);
            }
            Case {
                inputs,
                params,
                out_bytes: 4 * reference.len(),
                expected: Expected::F32 {
                    reference,
                    tolerance,
                },
            }
        }
        "softmax_parts_f16_once_f143" | "softmax_parts_f16_once_f152" => {
            // The exponentials and records of `softmax_stats_f16_once` on
            // the device; the output must be their rescaling as the kernel
            // documents it, exactly, and within an FP8 step (and the f16
            // roundings before it) of the f64 softmax.
            let mut x = normal_f16(rng, n, 3.0);
            // Every third row from the second: one +inf, all -inf, a NaN
            // (the parts kernel's own-record path needs a finite maximum).
            let special = |r: usize| settings.non_finite_rows && r % 3 == 1;
            for r in (0..rows).filter(|&r| special(r)) {
                let row = &mut x[r * row_length..(r + 1) * row_length];
                match (r / 3) % 3 {
                    0 => row[row_length / 2] = f16::INFINITY,
                    1 => row.fill(f16::NEG_INFINITY),
                    _ => row[row_length - 1] = f16::NAN,
                }
            }
            let scale = ("scale_bits", i64::from(settings.scale.to_bits()));
            let stats = crate::harness::compile("softmax_stats_f16_once").run(&Run {
                inputs: vec![&f16_bytes(&x), &vec![0; 2 * n]],
                out_bytes: 96 * rows,
                params: vec![
                    ("rows", rows as i64),
                    ("row_length", row_length as i64),
                    scale,
                ],
            });
            let exponentials = stats.inputs[1].clone();
            let format = fp8_format(kernel);
            let out_scale = settings.out_scale as i32;
            let expected = rescaled_once(&exponentials, &stats.out, row_length)
                .iter()
                .map(|&v| format.from_f16(v, out_scale))
                .collect::<Vec<u8>>();
            let reference = softmax(&x, row_length, settings.scale, None);
            // (Rows of infinities, and scales that overflow f16, are held
            // to the emulation alone.)
            let compared = match settings.non_finite_rows {
                true => 0,
                false => expected.len(),
            };
            for (k, (&b, &e)) in expected.iter().zip(&reference).take(compared).enumerate() {
                let y = format.to_f16(b, out_scale).to_f64();
                let step = format.to_f16(b.wrapping_add(1) & 0x7f, out_scale).to_f64()
                    - format.to_f16(b & 0x7f, out_scale).to_f64();
                assert!(
                    (y - e).abs() <= step.abs() + 2f64.powi(-9) * e.abs() + 2f64.powi(-24),
                    "element {k}: {y} from the device's exponentials, softmax {e}"
                );
            }
            params.push(("out_scale", settings.out_scale));
            bytes(vec![exponentials, stats.out], expected, params)
        }
        "softmax_parts_f16_seg" => {
            // Rows cut into three segments: each segment's records from
            // `softmax_stats_f16` and `fold_softmax_records` on the
            // device, gathered as the exchange does, then this tile's part
            // against the f64 softmax of the whole rows.
            let segments = Segments::new(rows, row_length);
            let total = segments.total;
            let x = normal_f16(rng, rows * total, 3.0);
            let scale = ("scale_bits", i64::from(settings.scale.to_bits()));
            let records = segments.records(
                "softmax_stats_f16",
                "fold_softmax_records",
                &|k| vec![f16_bytes(&segments.columns(&x, k))],
                &[scale],
            );
            params.extend([scale, ("segments", SEGMENTS as i64)]);
            let whole = softmax(&x, total, settings.scale, None);
            Case {
                inputs: vec![f16_bytes(&segments.columns(&x, 1)), records],
                params,
                out_bytes: 2 * n,
                expected: Expected::F16 {
                    slack: vec![0.0; n],
                    reference: segments.middle(&whole),
                },
            }
        }
        "softmax_stats_f16_mask_f16" | "softmax_stats_f16_mask_f32" => {
            // Each worker piece's maximum and sum of exponentials of
            // x * scale + mask; a piece with every element removed keeps
            // its empty record.
            let x = normal_f16(rng, n, 3.0);
            let f32_mask = kernel.ends_with("f32");
            let mut mask = softmax_mask(rng, rows, row_length, settings.fully_masked_rows);
            if !settings.fully_masked_rows {
                // Calibration: a piece whose every element is removed
                // skips its sum, so no element is.
                for v in mask.iter_mut().filter(|v| v.is_infinite()) {
                    *v = -1e4;
                }
            }
            let mask = kernel_mask(mask, f32_mask);
            let y: Vec<f32> = x
                .iter()
                .zip(&mask)
                .map(|(v, &m)| v.to_f32() * settings.scale + m)
                .collect();
            let (reference, tolerance) = part_statistics_of(&y, row_length, false);
            params.push(("scale_bits", i64::from(settings.scale.to_bits())));
            Case {
                inputs: vec![f16_bytes(&x), mask_bytes(&mask, f32_mask)],
                params,
                out_bytes: 4 * reference.len(),
                expected: Expected::F32 {
                    reference,
                    tolerance,
                },
            }
        }
        "softmax_parts_f16_mask_f16_seg" | "softmax_parts_f16_mask_f32_seg" => {
            // Rows cut into three segments, with the mask: each segment's
            // records from the masked statistics and the fold on the
            // device, then this tile's part against the f64 softmax of the
            // whole rows. Every fourth row's middle segment is removed
            // alone, besides the mask's partly and fully removed rows.
            let segments = Segments::new(rows, row_length);
            let total = segments.total;
            let x = normal_f16(rng, rows * total, 3.0);
            let f32_mask = kernel.contains("mask_f32");
            let mut mask = softmax_mask(rng, rows, total, settings.fully_masked_rows);
            let start = segments.lengths[0];
            for row in mask.chunks_mut(total).skip(3).step_by(4) {
                row[start..start + row_length].fill(f32::NEG_INFINITY);
            }
            let mask = kernel_mask(mask, f32_mask);
            let scale = ("scale_bits", i64::from(settings.scale.to_bits()));
            let stats = if f32_mask {
                "softmax_stats_f16_mask_f32"
            } else {
                "softmax_stats_f16_mask_f16"
            };
            let records = segments.records(
                stats,
                "fold_softmax_records",
                &|k| {
                    vec![
                        f16_bytes(&segments.columns(&x, k)),
                        mask_bytes(&segments.columns(&mask, k), f32_mask),
                    ]
                },
                &[scale],
            );
            params.extend([scale, ("segments", SEGMENTS as i64)]);
            let whole = softmax_masked(&x, &mask, total, settings.scale);
            Case {
                inputs: vec![
                    f16_bytes(&segments.columns(&x, 1)),
                    mask_bytes(&segments.columns(&mask, 1), f32_mask),
                    records,
                ],
                params,
                out_bytes: 2 * n,
                expected: Expected::F16 {
                    slack: vec![0.0; n],
                    reference: segments.middle(&whole),
                },
            }
        }
        "softmax_f16_mask_f16" | "softmax_f16_mask_f32" => {
            let x = normal_f16(rng, n, 3.0);
            let mask = softmax_mask(rng, rows, row_length, settings.fully_masked_rows);
            let mask_bytes = mask_bytes(&mask, kernel.ends_with("f32"));
            params.push(("scale_bits", i64::from(settings.scale.to_bits())));
            let reference = softmax_masked(&x, &mask, row_length, settings.scale);
            Case {
                inputs: vec![f16_bytes(&x), mask_bytes],
                params,
                out_bytes: 2 * n,
                expected: Expected::F16 {
                    slack: vec![0.0; n],
                    reference,
                },
            }
        }
        "layernorm_f16_f143" | "layernorm_f16_f152" => {
            // As for the fused GELU: exactly the bytes of `layernorm_f16`
            // on the device followed by the host's cast, over whole and
            // split rows, aligned and misaligned.
            let x: Vec<f16> = (0..n)
                .map(|k| f16::from_f64(rng.normal(2.0) + (k % 7) as f64))
                .collect();
            let gamma = normal_f16(rng, row_length, 3.0);
            let beta = normal_f16(rng, row_length, 0.5);
            params.push(("epsilon_bits", i64::from(1e-5f32.to_bits())));
            let inputs = vec![f16_bytes(&x), f16_bytes(&gamma), f16_bytes(&beta)];
            fused_cast("layernorm_f16", inputs, params)
        }
        "layernorm_stats_f16" | "rmsnorm_stats_f16" => {
            let x = norm_input(rng, n, row_length, settings);
            let rms = kernel == "rmsnorm_stats_f16";
            let (reference, tolerance) = part_statistics(&x, row_length, rms);
            Case {
                inputs: vec![f16_bytes(&x)],
                params,
                out_bytes: 4 * reference.len(),
                expected: Expected::F32 {
                    reference,
                    tolerance,
                },
            }
        }
        "layernorm_parts_f16" | "layernorm_parts_f16_f143" | "layernorm_parts_f16_f152" => {
            // The records come from `layernorm_stats_f16` on the device;
            // the f16 variant must be within f16 rounding of the f64
            // layernorm, and the FP8 variants exactly its bytes followed by
            // the host's cast.
            let x = norm_input(rng, n, row_length, settings);
            let gamma = normal_f16(rng, row_length, 1.0);
            let beta = normal_f16(rng, row_length, 0.5);
            let epsilon = 1e-5f32;
            params.push(("epsilon_bits", i64::from(epsilon.to_bits())));
            let records = crate::harness::compile("layernorm_stats_f16").run(&Run {
                inputs: vec![&f16_bytes(&x)],
                out_bytes: 96 * rows,
                params: params.clone(),
            });
            let inputs = vec![
                f16_bytes(&x),
                f16_bytes(&gamma),
                f16_bytes(&beta),
                records.out,
            ];
            if kernel == "layernorm_parts_f16" {
                let (reference, slack) = layernorm(&x, &gamma, &beta, row_length, epsilon);
                return Case {
                    inputs,
                    params,
                    out_bytes: 2 * n,
                    expected: Expected::F16 { reference, slack },
                };
            }
            fused_cast("layernorm_parts_f16", inputs, params)
        }
        "fold_norm_records" | "fold_softmax_records" => {
            // The records of a statistics kernel on the device, folded into
            // the middle tile's record of each row of three segments, the
            // other tiles' records untouched.
            let softmax = kernel == "fold_softmax_records";
            let x = layernorm_input(rng, n);
            let stats_params = vec![
                ("rows", rows as i64),
                ("row_length", row_length as i64),
                ("scale_bits", i64::from(settings.scale.to_bits())),
            ];
            let stats = if softmax {
                "softmax_stats_f16"
            } else {
                "layernorm_stats_f16"
            };
            let parts = crate::harness::compile(stats).run(&Run {
                inputs: vec![&f16_bytes(&x)],
                out_bytes: 96 * rows,
                params: stats_params,
            });
            let (folded, tolerance) = fold_reference(&parts.out, softmax);
            let untouched = f64::from(f32::from_bits(0x5A5A_5A5A));
            let (mut reference, mut tolerances) = (Vec::new(), Vec::new());
            for r in 0..rows {
                for segment in 0..SEGMENTS {
                    if segment == 1 {
                        reference.extend(&folded[4 * r..4 * r + 4]);
                        tolerances.extend(&tolerance[4 * r..4 * r + 4]);
                    } else {
                        reference.extend([untouched; 4]);
                        tolerances.extend([0.0; 4]);
                    }
                }
            }
            Case {
                inputs: vec![parts.out],
                params: vec![
                    ("rows", rows as i64),
                    ("segment", 1),
                    ("segments", SEGMENTS as i64),
                ],
                out_bytes: 4 * reference.len(),
                expected: Expected::F32 {
                    reference,
                    tolerance: tolerances,
                },
            }
        }
        "layernorm_parts_f16_seg"
        | "layernorm_parts_f16_f143_seg"
        | "layernorm_parts_f16_f152_seg" => {
            // Rows cut into three segments, of which the tile holds the
            // second: each segment's records from `layernorm_stats_f16` and
            // `fold_norm_records` on the device, gathered as the exchange
            // does, then this tile's part against the f64 layernorm of the
            // whole rows.
            let segments = Segments::new(rows, row_length);
            let total = segments.total;
            let x = norm_input(rng, rows * total, total, settings);
            let gamma = normal_f16(rng, total, 1.0);
            let beta = normal_f16(rng, total, 0.5);
            let epsilon = 1e-5f32;
            let records = segments.records(
                "layernorm_stats_f16",
                "fold_norm_records",
                &|k| vec![f16_bytes(&segments.columns(&x, k))],
                &[],
            );
            params.extend([
                ("epsilon_bits", i64::from(epsilon.to_bits())),
                ("segments", SEGMENTS as i64),
            ]);
            let inputs = vec![
                f16_bytes(&segments.columns(&x, 1)),
                f16_bytes(&segments.columns(&gamma, 1)),
                f16_bytes(&segments.columns(&beta, 1)),
                records,
            ];
            if kernel == "layernorm_parts_f16_seg" {
                let (whole, whole_slack) = layernorm(&x, &gamma, &beta, total, epsilon);
                let keep = |v: &[f64]| segments.middle(v);
                return Case {
                    inputs,
                    params,
                    out_bytes: 2 * n,
                    expected: Expected::F16 {
                        reference: keep(&whole),
                        slack: keep(&whole_slack),
                    },
                };
            }
            fused_cast("layernorm_parts_f16_seg", inputs, params)
        }
        "rmsnorm_parts_f16_seg" => {
            // As the segmented layernorm's parts, with the records of
            // `rmsnorm_stats_f16` folded.
            let segments = Segments::new(rows, row_length);
            let total = segments.total;
            let x = layernorm_input(rng, rows * total);
            let gamma = normal_f16(rng, total, 1.0);
            let epsilon = 1e-6f32;
            let records = segments.records(
                "rmsnorm_stats_f16",
                "fold_norm_records",
                &|k| vec![f16_bytes(&segments.columns(&x, k))],
                &[],
            );
            params.extend([
                ("epsilon_bits", i64::from(epsilon.to_bits())),
                ("segments", SEGMENTS as i64),
            ]);
            let whole = rmsnorm(&x, &gamma, total, epsilon);
            let reference = segments.middle(&whole);
            Case {
                inputs: vec![
                    f16_bytes(&segments.columns(&x, 1)),
                    f16_bytes(&segments.columns(&gamma, 1)),
                    records,
                ],
                params,
                out_bytes: 2 * n,
                expected: Expected::F16 {
                    slack: vec![0.0; n],
                    reference,
                },
            }
        }
        "layernorm_f16" => {
            let x = norm_input(rng, n, row_length, settings);
            let gamma = normal_f16(rng, row_length, 1.0);
            let beta = normal_f16(rng, row_length, 0.5);
            let epsilon = 1e-5f32;
            params.push(("epsilon_bits", i64::from(epsilon.to_bits())));
            let (reference, slack) = layernorm(&x, &gamma, &beta, row_length, epsilon);
            Case {
                inputs: vec![f16_bytes(&x), f16_bytes(&gamma), f16_bytes(&beta)],
                params,
                out_bytes: 2 * n,
                expected: Expected::F16 { reference, slack },
            }
        }
        "mul_f16" | "sub_f16" | "div_f16" => {
            // NaN payloads are not specified; every other pattern is, and
            // the results include infinities and NaNs of 0 / 0, inf - inf
            // and 0 * inf.
            let mut operand = || -> Vec<f16> {
                wide_f16(rng, n, 8.0)
                    .into_iter()
                    .map(|v| if v.is_nan() { f16::INFINITY } else { v })
                    .collect()
            };
            let (a, b) = (operand(), operand());
            let op = binary_op(kernel);
            // The exact result rounded once: f64 holds every product and
            // difference of two f16 values exactly, and its quotient
            // rounds to the same f16 as the exact one.
            let results: Vec<f16> = a
                .iter()
                .zip(&b)
                .map(|(x, y)| f16::from_f64(op(x.to_f64(), y.to_f64())))
                .collect();
            bytes(
                vec![f16_bytes(&a), f16_bytes(&b)],
                f16_bytes(&results),
                params,
            )
        }
        "mul_f32" | "sub_f32" | "div_f32" => {
            let mut operand = || -> Vec<f32> {
                (0..n)
                    .map(|_| match rng.next_u64() % 16 {
                        0 => 0.0,
                        1 => f32::INFINITY,
                        _ => rng.normal(1000.0) as f32,
                    })
                    .collect()
            };
            let (a, b) = (operand(), operand());
            let le = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
            let op = binary_op(kernel);
            // NaN results (0 / 0, inf - inf) are compared as the canonical
            // NaN the host's arithmetic gives, which is also the model's.
            let results: Vec<f32> = a
                .iter()
                .zip(&b)
                .map(|(&x, &y)| op(f64::from(x), f64::from(y)) as f32)
                .collect();
            bytes(vec![le(&a), le(&b)], le(&results), params)
        }
        "silu_f16" | "gelu_tanh_f16" => {
            let x = normal_f16(rng, n, 3.0);
            let (reference, _) = unary(kernel, x.iter().map(|v| v.to_f64()));
            Case {
                inputs: vec![f16_bytes(&x)],
                params,
                out_bytes: 2 * n,
                expected: Expected::F16 {
                    reference,
                    slack: vec![0.0; n],
                },
            }
        }
        "silu_f32" | "gelu_tanh_f32" => {
            let x: Vec<f32> = (0..n).map(|_| rng.normal(4.0) as f32).collect();
            let (reference, tolerance) = unary(kernel, x.iter().map(|&v| f64::from(v)));
            let x = x.iter().flat_map(|v| v.to_le_bytes()).collect();
            Case {
                inputs: vec![x],
                params,
                out_bytes: 4 * n,
                expected: Expected::F32 {
                    reference,
                    tolerance,
                },
            }
        }
        "rmsnorm_parts_f16" => {
            // The records come from `rmsnorm_stats_f16` on the device.
            let x = layernorm_input(rng, n);
            let gamma = normal_f16(rng, row_length, 1.0);
            let epsilon = 1e-6f32;
            params.push(("epsilon_bits", i64::from(epsilon.to_bits())));
            let records = crate::harness::compile("rmsnorm_stats_f16").run(&Run {
                inputs: vec![&f16_bytes(&x)],
                out_bytes: 96 * rows,
                params: params.clone(),
            });
            let reference = rmsnorm(&x, &gamma, row_length, epsilon);
            Case {
                inputs: vec![f16_bytes(&x), f16_bytes(&gamma), records.out],
                params,
                out_bytes: 2 * n,
                expected: Expected::F16 {
                    slack: vec![0.0; n],
                    reference,
                },
            }
        }
        "rmsnorm_f16" => {
            let x: Vec<f16> = (0..n)
                .map(|k| f16::from_f64(rng.normal(2.0) + (k % 7) as f64))
                .collect();
            let gamma = normal_f16(rng, row_length, 1.0);
            let epsilon = 1e-6f32;
            params.push(("epsilon_bits", i64::from(epsilon.to_bits())));
            let reference = rmsnorm(&x, &gamma, row_length, epsilon);
            Case {
                inputs: vec![f16_bytes(&x), f16_bytes(&gamma)],
                params,
                out_bytes: 2 * n,
                expected: Expected::F16 {
                    slack: vec![0.0; n],
                    reference,
                },
            }
        }
        _ if reduce_rows::is_reduction(kernel) => {
            reduce_rows::case(kernel, rows, row_length, params, rng)
        }
        other => panic!("no host arithmetic for kernel `{other}`"),
    }
}

/// The operation of a binary kernel, on exact values.
fn binary_op(kernel: &str) -> fn(f64, f64) -> f64 {
    match &kernel[..3] {
        "mul" => |x, y| x * y,
        "sub" => |x, y| x - y,
        _ => |x, y| x / y,
    }
}

/// SiLU or the tanh GELU (by `kernel`'s name) in f64, as their
/// definitions write them, and the tolerance of an f32 evaluation: a few
/// f32 ulps of the result for every unit of the exponential's argument,
/// whose rounding error the exponential turns into a relative one.
fn unary(kernel: &str, x: impl Iterator<Item = f64>) -> (Vec<f64>, Vec<f64>) {
    let k = (2.0 / std::f64::consts::PI).sqrt();
    x.map(|x| {
        let (y, argument) = if kernel.starts_with("silu") {
            (x / (1.0 + (-x).exp()), x)
        } else {
            // For negative u, `1 + tanh(u)` cancels in f64; `1 - tanh(|u|)`
            // is `2 / (e^2|u| + 1)` without a difference.
            let u = k * (x + 0.044715 * x * x * x);
            let one_plus_tanh = if u < 0.0 {
                2.0 / ((-2.0 * u).exp() + 1.0)
            } else {
                1.0 + u.tanh()
            };
            (0.5 * x * one_plus_tanh, 2.0 * u)
        };
        (y, y.abs() * 2f64.powi(-22) * (4.0 + argument.abs()) + 1e-37)
    })
    .unzip()
}

/// RMS normalisation in f64.
fn rmsnorm(x: &[f16], gamma: &[f16], row_length: usize, epsilon: f32) -> Vec<f64> {
    let mut reference = Vec::new();
    for row in x.chunks(row_length) {
        let mean_square = row.iter().map(|v| v.to_f64().powi(2)).sum::<f64>() / row_length as f64;
        let inv = 1.0 / (mean_square + f64::from(epsilon)).sqrt();
        reference.extend(
            row.iter()
                .zip(gamma)
                .map(|(v, g)| v.to_f64() * inv * g.to_f64()),
        );
    }
    reference
}

/// Softmax of `x * scale` over the kept prefix of each row (all of it, or
/// `j <= i` for matrix row i when causal), in f64.
fn softmax(x: &[f16], row_length: usize, scale: f32, causal: Option<(usize, usize)>) -> Vec<f64> {
    let arguments = softmax_arguments(x, row_length, scale, causal);
    arguments
        .chunks(row_length)
        .flat_map(|row| {
            let sum: f64 = row.iter().map(|a| a.exp()).sum();
            row.iter().map(move |a| a.exp() / sum)
        })
        .collect()
}

/// Each element's exponent `x * scale - max` in [`softmax`] of its row
/// (the maximum of `x * scale` over the row's kept elements), -inf for the
/// elements a causal row leaves out.
fn softmax_arguments(
    x: &[f16],
    row_length: usize,
    scale: f32,
    causal: Option<(usize, usize)>,
) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for (r, row) in x.chunks(row_length).enumerate() {
        let kept = match causal {
            Some((first_row, matrix_rows)) => ((first_row + r) % matrix_rows + 1).min(row_length),
            None => row_length,
        };
        let scaled: Vec<f64> = row[..kept]
            .iter()
            .map(|v| f64::from(v.to_f32() * scale))
            .collect();
        let max = scaled.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        out.extend(scaled.iter().map(|s| s - max));
        out.extend(std::iter::repeat_n(f64::NEG_INFINITY, row_length - kept));
    }
    out
}

/// An additive mask whose rows take turns (offset by the row length, so a
/// single row varies between shapes): all zeros, zeros and -inf at random,
/// all -inf (when `fully_masked` allows; otherwise all zeros), and a mix of
/// -inf, a large finite -1e4 and finite biases. Values are exact in f16.
/// Unless `fully_masked` allows, a row whose random -infs would remove
/// every element (a short one) keeps its last: a fully masked row takes
/// the kernel's short way, which the cost formula does not model.
fn softmax_mask(rng: &mut Rng, rows: usize, row_length: usize, fully_masked: bool) -> Vec<f32> {
    let mut mask = Vec::with_capacity(rows * row_length);
    for r in 0..rows {
        let start = mask.len();
        for _ in 0..row_length {
            let coin = rng.next_u64() % 4;
            mask.push(match (r + row_length) % 4 {
                0 => 0.0,
                1 if coin < 2 => f32::NEG_INFINITY,
                1 => 0.0,
                2 if fully_masked => f32::NEG_INFINITY,
                2 => 0.0,
                _ => match coin {
                    0 => f32::NEG_INFINITY,
                    1 => -1e4,
                    _ => f16::from_f64(rng.normal(2.0)).to_f32(),
                },
            });
        }
        let removed = mask[start..].iter().all(|&v| v == f32::NEG_INFINITY);
        if removed && !fully_masked {
            if let Some(last) = mask.last_mut() {
                *last = 0.0;
            }
        }
    }
    mask
}

/// A mask's values as the kernel sees them: f32, or rounded to f16.
fn kernel_mask(mask: Vec<f32>, f32_mask: bool) -> Vec<f32> {
    match f32_mask {
        true => mask,
        false => mask.iter().map(|&v| f16::from_f32(v).to_f32()).collect(),
    }
}

/// A mask's bytes as the kernel reads it: f32, or rounded to f16.
fn mask_bytes(mask: &[f32], f32_mask: bool) -> Vec<u8> {
    match f32_mask {
        true => mask.iter().flat_map(|v| v.to_le_bytes()).collect(),
        false => f16_bytes(&mask.iter().map(|&v| f16::from_f32(v)).collect::<Vec<_>>()),
    }
}

/// Softmax of `x * scale + mask` per row in f64 (the sum in f32 arithmetic,
/// as the device adds them); zeros for a row whose every term is -inf.
fn softmax_masked(x: &[f16], mask: &[f32], row_length: usize, scale: f32) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for (row, mask) in x.chunks(row_length).zip(mask.chunks(row_length)) {
        let y: Vec<f64> = row
            .iter()
            .zip(mask)
            .map(|(v, &m)| f64::from(v.to_f32() * scale + m))
            .collect();
        let max = y.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if max == f64::NEG_INFINITY {
            out.extend(std::iter::repeat_n(0.0, row_length));
            continue;
        }
        let exps: Vec<f64> = y.iter().map(|s| (s - max).exp()).collect();
        let sum: f64 = exps.iter().sum();
        out.extend(exps.iter().map(|e| e / sum));
    }
    out
}

/// The segments the segmented norm kernels' cases cut rows into.
const SEGMENTS: usize = 3;

/// Rows cut into [`SEGMENTS`] segments, of which the tile under test holds
/// the second, `row_length` long: the first is 4 longer and the last about
/// half as long.
struct Segments {
    rows: usize,
    lengths: [usize; SEGMENTS],
    total: usize,
}

impl Segments {
    fn new(rows: usize, row_length: usize) -> Segments {
        let lengths = [row_length + 4, row_length, row_length / 2 + 1];
        Segments {
            rows,
            lengths,
            total: lengths.iter().sum(),
        }
    }

    /// Segment `segment`'s columns of `[rows][total]` values.
    fn columns<T: Copy>(&self, values: &[T], segment: usize) -> Vec<T> {
        let start: usize = self.lengths[..segment].iter().sum();
        values
            .chunks(self.total)
            .flat_map(|row| row[start..start + self.lengths[segment]].to_vec())
            .collect()
    }

    /// The tile's own columns.
    fn middle(&self, values: &[f64]) -> Vec<f64> {
        self.columns(values, 1)
    }

    /// Every segment's records from the statistics kernel `stats` (with
    /// `extra` parameters) over the segment's `inputs`, and the fold `fold`
    /// on the device, each tile's record of a row gathered into the row's
    /// records as the exchange does.
    fn records(
        &self,
        stats: &str,
        fold: &str,
        inputs: &dyn Fn(usize) -> Vec<Vec<u8>>,
        extra: &[(&'static str, i64)],
    ) -> Vec<u8> {
        let (stats, fold) = (
            crate::harness::compile(stats),
            crate::harness::compile(fold),
        );
        let record = 16;
        let mut records = vec![0u8; self.rows * SEGMENTS * record];
        for (segment, &length) in self.lengths.iter().enumerate() {
            let bytes = inputs(segment);
            let parts = stats.run(&Run {
                inputs: bytes.iter().map(Vec::as_slice).collect(),
                out_bytes: 96 * self.rows,
                params: [("rows", self.rows as i64), ("row_length", length as i64)]
                    .into_iter()
                    .chain(extra.iter().copied())
                    .collect(),
            });
            let folded = fold.run(&Run {
                inputs: vec![&parts.out],
                out_bytes: records.len(),
                params: vec![
                    ("rows", self.rows as i64),
                    ("segment", segment as i64),
                    ("segments", SEGMENTS as i64),
                ],
            });
            for r in 0..self.rows {
                let at = (r * SEGMENTS + segment) * record;
                records[at..at + record].copy_from_slice(&folded.out[at..at + record]);
            }
        }
        records
    }
}

/// Layernorm rows with a mean that differs from zero and from row to row.
fn layernorm_input(rng: &mut Rng, n: usize) -> Vec<f16> {
    (0..n)
        .map(|k| f16::from_f64(rng.normal(2.0) + (k % 7) as f64))
        .collect()
}

/// A norm's input of `n` values in rows of `row_length`: as
/// [`layernorm_input`], or with [`Settings::constant_rows`] rows of one
/// value each, values whose sum over the row `x * (1 / n)` would not give
/// back exactly.
fn norm_input(rng: &mut Rng, n: usize, row_length: usize, settings: &Settings) -> Vec<f16> {
    if !settings.constant_rows {
        return layernorm_input(rng, n);
    }
    const VALUES: [f64; 6] = [1000.0, 3.0, 0.1, -7.5, 0.3, 65.7];
    (0..n)
        .map(|k| f16::from_f64(VALUES[(k / row_length) % VALUES.len()]))
        .collect()
}

/// The records `layernorm_stats_f16` writes, in f64, and how far the f32
/// arithmetic may be from them: per row and worker (`device/include/norm.h`
/// gives each worker an equal share of the tile's quads, the last one the
/// tail too), the count of the row's elements in the share exactly, their
/// mean and squared deviations within a few f32 ulps of the terms they sum,
/// and a zero pad word; zeros where the share misses the row.
///
/// The RMS norm's records (`rms`) have a zero mean, so their M2 is the sum
/// of squares.
fn part_statistics(x: &[f16], row_length: usize, rms: bool) -> (Vec<f64>, Vec<f64>) {
    let (mut reference, mut tolerance) = (Vec::new(), Vec::new());
    for piece in worker_pieces(x.len(), row_length) {
        let part: Vec<f64> = x[piece].iter().map(|v| v.to_f64()).collect();
        let n = part.len() as f64;
        let mean = if part.is_empty() || rms {
            0.0
        } else {
            part.iter().sum::<f64>() / n
        };
        let m2: f64 = part.iter().map(|v| (v - mean).powi(2)).sum();
        let magnitude: f64 = part.iter().map(|v| v.abs()).sum::<f64>();
        let squares: f64 = part.iter().map(|v| v * v).sum::<f64>();
        reference.extend([n, mean, m2, 0.0]);
        tolerance.extend([
            0.0,
            2f64.powi(-20) * magnitude / n.max(1.0),
            2f64.powi(-20) * (m2 + squares),
            0.0,
        ]);
    }
    (reference, tolerance)
}

/// The start of worker `w`'s share of `elements` (`worker_share` in
/// `device/include/norm.h`: equal runs of whole quads, the first ones a
/// quad more, the last worker also the tail; an empty share starts where
/// the next one does).
fn share_start(elements: usize, w: usize) -> usize {
    let quads = elements / 4;
    4 * (w * (quads / 6) + w.min(quads % 6))
}

/// Each row's six worker pieces, in row order: the elements of worker
/// `w`'s share in the row, empty where the share misses it.
fn worker_pieces(elements: usize, row_length: usize) -> Vec<std::ops::Range<usize>> {
    let end = |w: usize| match w {
        5 => elements,
        _ => share_start(elements, w + 1),
    };
    let mut pieces = Vec::new();
    for r in 0..elements / row_length {
        for w in 0..6 {
            let lo = share_start(elements, w).max(r * row_length);
            let hi = end(w).min((r + 1) * row_length);
            pieces.push(lo..hi.max(lo));
        }
    }
    pieces
}

/// The records `softmax_stats_f16` writes, in f64, and how far the f32
/// arithmetic may be from them: per row and worker (the shares of
/// [`part_statistics`]), the maximum of `x * scale` over the worker's piece
/// of the row exactly (an f16 times the scale, rounded to f32), the sum of
/// `exp(x * scale - m)` over it within the rounding of an f32 sum, and two
/// zero words; `-f32::MAX` and zeros where the share misses the row.
fn softmax_part_statistics(
    x: &[f16],
    row_length: usize,
    scale: f32,
    once: bool,
) -> (Vec<f64>, Vec<f64>) {
    let scaled: Vec<f32> = x.iter().map(|v| v.to_f32() * scale).collect();
    part_statistics_of(&scaled, row_length, once)
}

/// As [`softmax_part_statistics`], of the scaled terms `y` (of a masked
/// softmax, `x * scale + mask`): a piece whose every term is -inf keeps
/// the empty record.
fn part_statistics_of(y: &[f32], row_length: usize, once: bool) -> (Vec<f64>, Vec<f64>) {
    let (mut reference, mut tolerance) = (Vec::new(), Vec::new());
    for piece in worker_pieces(y.len(), row_length) {
        let scaled = &y[piece];
        let m = scaled.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        if m == f32::NEG_INFINITY {
            reference.extend([-f64::from(f32::MAX), 0.0, 0.0, 0.0]);
            tolerance.extend([0.0; 4]);
            continue;
        }
        let s: f64 = scaled.iter().map(|&y| f64::from(y - m).exp()).sum();
        // The `_once` form sums exponentials computed in f16, each within
        // the roundings `softmax_f16_once`'s check allows.
        let s_tolerance = match once {
            true => scaled
                .iter()
                .map(|&y| {
                    let arg = f64::from(y - m);
                    arg.exp() * 2f64.powi(-9) * (2.0 + arg.abs()) + 2f64.powi(-24)
                })
                .sum(),
            false => s * scaled.len() as f64 * 2f64.powi(-23),
        };
        reference.extend([f64::from(m), s, 0.0, 0.0]);
        tolerance.extend([0.0, s_tolerance, 0.0, 0.0]);
    }
    (reference, tolerance)
}

/// What `softmax_parts_f16_once_*` computes before its cast, emulated with
/// the model's arithmetic: for each row and worker share, M and S over
/// the row's six records (in record order, f32 operations, `f32exp` and
/// `f32rcp` rounded from f64), the factor `(1 / S) * exp(m - M)` from the
/// share's own record rounded to f16, and each stored exponential times
/// it in f16.
fn rescaled_once(exponentials: &[u8], records: &[u8], row_length: usize) -> Vec<f16> {
    let e: Vec<f16> = f16_values(exponentials);
    let record = |r: usize, w: usize| -> (f32, f32) {
        let at = (r * 6 + w) * 16;
        let word = |o: usize| f32::from_le_bytes(records[at + o..at + o + 4].try_into().unwrap());
        (word(0), word(4))
    };
    let exp = |v: f32| f64::from(v).exp() as f32;
    let mut out = Vec::with_capacity(e.len());
    for (k, &value) in e.iter().enumerate() {
        let r = k / row_length;
        // The worker whose share holds element k.
        let w = (0..6)
            .rev()
            .find(|&w| share_start(e.len(), w) <= k)
            .unwrap_or(0);
        let m = (0..6).fold(f32::from_bits(0xff7f_ffff), |m, i| m.max(record(r, i).0));
        let s = (0..6).fold(0f32, |s, i| {
            let (mi, si) = record(r, i);
            s + exp(mi - m) * si
        });
        let factor = (1.0 / f64::from(s)) as f32 * exp(record(r, w).0 - m);
        let factor = f16::from_f32(factor).to_f64();
        out.push(f16::from_f64(value.to_f64() * factor));
    }
    out
}

/// The fold of each row's six f32 records (`device/fold_records.S`), in
/// f64 from the records the device wrote, and how far the f32 arithmetic
/// may be from it. A norm's (n, mean, M2) fold with Chan's formula: the
/// count exactly, the mean and M2 within a few f32 ulps of the terms they
/// sum. A softmax's (m, s) fold to the largest m exactly and the sum of
/// `s * exp(m - M)` within a few ulps of it.
fn fold_reference(records: &[u8], softmax: bool) -> (Vec<f64>, Vec<f64>) {
    let values: Vec<f64> = records
        .chunks_exact(4)
        .map(|b| f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
        .collect();
    let (mut reference, mut tolerance) = (Vec::new(), Vec::new());
    for row in values.chunks_exact(24) {
        let record = |i: usize| &row[4 * i..4 * i + 4];
        if softmax {
            let m = (0..6).map(|i| record(i)[0]).fold(f64::MIN, f64::max);
            let s: f64 = (0..6)
                .map(|i| record(i)[1] * (record(i)[0] - m).exp())
                .sum();
            reference.extend([m, s, 0.0, 0.0]);
            tolerance.extend([0.0, s * 2f64.powi(-20), 0.0, 0.0]);
        } else {
            let n: f64 = (0..6).map(|i| record(i)[0]).sum();
            let weighted: f64 = (0..6).map(|i| record(i)[0] * record(i)[1]).sum();
            let mean = weighted / n;
            let m2: f64 = (0..6)
                .map(|i| record(i)[2] + record(i)[0] * (record(i)[1] - mean).powi(2))
                .sum();
            let magnitude: f64 = (0..6).map(|i| (record(i)[0] * record(i)[1]).abs()).sum();
            let squares: f64 = (0..6).map(|i| record(i)[0] * record(i)[1].powi(2)).sum();
            reference.extend([n, mean, m2, 0.0]);
            tolerance.extend([
                0.0,
                2f64.powi(-20) * magnitude / n,
                2f64.powi(-20) * (m2 + squares),
                0.0,
            ]);
        }
    }
    (reference, tolerance)
}

/// Layer normalisation in f64 and the slack f32 arithmetic needs: an
/// absolute error of a few f32 ulps of the terms, which only shows when
/// they cancel.
fn layernorm(
    x: &[f16],
    gamma: &[f16],
    beta: &[f16],
    row_length: usize,
    epsilon: f32,
) -> (Vec<f64>, Vec<f64>) {
    let (mut reference, mut slack) = (Vec::new(), Vec::new());
    for row in x.chunks(row_length) {
        let n = row_length as f64;
        let mean = row.iter().map(|v| v.to_f64()).sum::<f64>() / n;
        let var = row.iter().map(|v| (v.to_f64() - mean).powi(2)).sum::<f64>() / n;
        let inv = 1.0 / (var + f64::from(epsilon)).sqrt();
        for (j, v) in row.iter().enumerate() {
            let scaled = (v.to_f64() - mean) * inv * gamma[j].to_f64();
            reference.push(scaled + beta[j].to_f64());
            slack.push(2f64.powi(-20) * (scaled.abs() + beta[j].to_f64().abs()));
        }
    }
    (reference, slack)
}

/// Runs `case` on `kernel` and compares its output with the host's;
/// returns the run's cycles or the first mismatch.
pub fn check(kernel: &Kernel, case: &Case) -> Result<u64, String> {
    let outcome = kernel.run(&Run {
        inputs: case.inputs.iter().map(Vec::as_slice).collect(),
        out_bytes: case.out_bytes,
        params: case.params.clone(),
    });
    match &case.expected {
        Expected::Bytes(expected) => {
            if let Some(i) = (0..expected.len()).find(|&i| outcome.out[i] != expected[i]) {
                let f32_view = f32_values(&outcome.out[i & !3..(i & !3) + 4]);
                return Err(format!(
                    "byte {i} is {:#04x}, expected {:#04x} (the word there reads {:?} as f32)",
                    outcome.out[i], expected[i], f32_view
                ));
            }
        }
        Expected::F32 {
            reference,
            tolerance,
        } => {
            for (k, (&y, (&e, &t))) in f32_values(&outcome.out)
                .iter()
                .zip(reference.iter().zip(tolerance))
                .enumerate()
            {
                // A NaN on either side is a mismatch.
                let within = (f64::from(y) - e).abs() <= t;
                if !within {
                    return Err(format!("element {k} is {y}, expected {e} within {t}"));
                }
            }
        }
        Expected::F16 { reference, slack } => {
            for (k, (&y, (&e, &s))) in f16_values(&outcome.out)
                .iter()
                .zip(reference.iter().zip(slack))
                .enumerate()
            {
                // A NaN where the reference has none (or none where it
                // has one) is a mismatch, however wide the slack.
                let nan = y.is_nan() != e.is_nan();
                if nan || (!e.is_nan() && ulps(y, e) > 1 && (y.to_f64() - e).abs() > s) {
                    return Err(format!("element {k} is {y}, expected {e}"));
                }
            }
        }
    }
    Ok(outcome.cycles)
}

/// Checks `kernel` over `shapes` with `settings`, panicking at the first
/// mismatch with the shape and settings that produced it.
pub fn check_shapes(kernel: &str, shapes: &[(usize, usize)], settings: &Settings, seed: u64) {
    let compiled = crate::harness::compile(kernel);
    let mut rng = Rng::new(seed);
    for &(rows, row_length) in shapes {
        let case = case(kernel, rows, row_length, settings, &mut rng);
        if let Err(e) = check(&compiled, &case) {
            panic!("{kernel} {rows}x{row_length} {settings:?}: {e}");
        }
    }
}
