//! Reference tests: each op on small hand-computed cases through the whole
//! evaluator, the repeat semantics, the two precisions and the generator.

use super::init::{generate, Xoshiro256StarStar};
use super::*;
use crate::graph::*;
use crate::numerics::round_f16;
use expect_test::{expect, Expect};
use std::collections::HashMap;

struct Builder {
    graph: Graph,
    /// Hand-written values of inputs and weights, by name.
    values: HashMap<String, Vec<f32>>,
}

impl Builder {
    fn new() -> Builder {
        Builder {
            graph: Graph {
                name: "test".into(),
                target: crate::target::TargetId::Ipu21,
                tiles: 4,
                seed: 7,
                tensors: Vec::new(),
                ops: Vec::new(),
                repeats: Vec::new(),
                outputs: Vec::new(),
                check: Check {
                    reference_precision: ReferencePrecision::Device,
                    min_cosine_similarity: 0.99,
                    max_abs_error: 1.0,
                    outputs: Vec::new(),
                },
            },
            values: HashMap::new(),
        }
    }

    fn tensor(
        &mut self,
        name: &str,
        shape: &[usize],
        dtype: DType,
        role: Role,
        init: Option<Init>,
    ) -> TensorId {
        self.graph.tensors.push(Tensor {
            name: name.into(),
            shape: shape.to_vec(),
            dtype,
            scale: if dtype.is_fp8() { -2 } else { 0 },
            role,
            init,
            repeat: None,
            written_name: None,
        });
        TensorId(self.graph.tensors.len() as u32 - 1)
    }

    /// An input with hand-written values.
    fn input(&mut self, name: &str, shape: &[usize], dtype: DType, values: &[f32]) -> TensorId {
        self.values.insert(name.into(), values.to_vec());
        self.tensor(name, shape, dtype, Role::Input, Some(Init::Zeros))
    }

    /// An input or weight drawn by the seeded generator.
    fn seeded(&mut self, name: &str, shape: &[usize], dtype: DType, role: Role) -> TensorId {
        self.tensor(name, shape, dtype, role, Some(Init::Normal { std: 1.0 }))
    }

    fn op(&mut self, kind: OpKind, inputs: &[TensorId], shape: &[usize], dtype: DType) -> TensorId {
        let name = format!("{}{}", kind.name(), self.graph.ops.len());
        let output = self.tensor(&name, shape, dtype, Role::Activation, None);
        self.graph.ops.push(Op {
            name,
            kind,
            inputs: inputs.to_vec(),
            output,
        });
        output
    }

    /// Evaluates with hand-written values where given, seeded ones elsewhere.
    fn evaluate(&self, precision: ReferencePrecision) -> Result<Evaluation, ReferenceError> {
        self.evaluate_planned(precision, &DevicePlan::default())
    }

    /// [`Builder::evaluate`] with products' K split into `k_slices`.
    fn evaluate_split(
        &self,
        precision: ReferencePrecision,
        k_slices: &KSlices,
    ) -> Result<Evaluation, ReferenceError> {
        let plan = DevicePlan {
            k_slices: k_slices.clone(),
            ..DevicePlan::default()
        };
        self.evaluate_planned(precision, &plan)
    }

    /// [`Builder::evaluate`] with the compiled program's `plan`.
    fn evaluate_planned(
        &self,
        precision: ReferencePrecision,
        plan: &DevicePlan,
    ) -> Result<Evaluation, ReferenceError> {
        let leaves = |id: TensorId, iteration: Option<u32>| match self
            .values
            .get(&self.graph.tensor(id).name)
        {
            Some(v) => v.clone(),
            None => tensor_values(&self.graph, id, iteration),
        };
        evaluate_with_inputs(&self.graph, precision, &leaves, plan)
    }
}

fn show(values: &[f32]) -> String {
    values
        .iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Evaluates at f32 and shows `output` (or the error).
fn check(b: &Builder, output: TensorId, expected: Expect) {
    let text = match b.evaluate(ReferencePrecision::F32) {
        Ok(e) => show(e.get(output).unwrap_or_default()),
        Err(e) => format!("error: {e}"),
    };
    expected.assert_eq(&text);
}

const MATMUL: OpKind = OpKind::Matmul {
    transpose_rhs: false,
    epilogue: Vec::new(),
};
const MATMUL_T: OpKind = OpKind::Matmul {
    transpose_rhs: true,
    epilogue: Vec::new(),
};

#[test]
fn matmul_2d() {
    let mut b = Builder::new();
    let x = b.input("x", &[2, 3], DType::F32, &[1., 2., 3., 4., 5., 6.]);
    let w = b.input("w", &[3, 2], DType::F32, &[1., 0., 0., 1., 1., -1.]);
    let y = b.op(MATMUL, &[x, w], &[2, 2], DType::F32);
    // [1+3, 2-3; 4+6, 5-6]
    check(&b, y, expect!["4 -1 10 -1"]);
}

#[test]
fn matmul_transposed_rhs() {
    let mut b = Builder::new();
    let x = b.input("x", &[2, 3], DType::F32, &[1., 2., 3., 4., 5., 6.]);
    // w is [N=2, K=3]: rows (1, 0, 1) and (0, 1, -1).
    let w = b.input("w", &[2, 3], DType::F32, &[1., 0., 1., 0., 1., -1.]);
    let y = b.op(MATMUL_T, &[x, w], &[2, 2], DType::F32);
    check(&b, y, expect!["4 -1 10 -1"]);
}

#[test]
fn matmul_batched_with_shared_and_per_batch_rhs() {
    let mut b = Builder::new();
    let x = b.input("x", &[2, 1, 2], DType::F32, &[1., 2., 3., 4.]);
    let shared = b.input("shared", &[2, 2], DType::F32, &[1., 10., 100., 1000.]);
    let per_batch = b.input("per_batch", &[2, 2, 1], DType::F32, &[1., 1., 2., -1.]);
    let y = b.op(MATMUL, &[x, shared], &[2, 1, 2], DType::F32);
    let z = b.op(MATMUL, &[x, per_batch], &[2, 1, 1], DType::F32);
    check(&b, y, expect!["201 2010 403 4030"]);
    check(&b, z, expect!["3 2"]);
}

#[test]
fn matmul_with_many_row_blocks_matches_a_naive_sum() {
    // 150 rows span three sgemm tasks; K = 70 spans three FP8 blocks.
    let (batch, m, k, n) = (2, 150, 70, 9);
    let mut b = Builder::new();
    let x = b.seeded("x", &[batch, m, k], DType::F32, Role::Input);
    let w = b.seeded("w", &[n, k], DType::F32, Role::Weight);
    let y = b.op(MATMUL_T, &[x, w], &[batch, m, n], DType::F32);
    let e = b.evaluate(ReferencePrecision::F32).expect("evaluates");
    let xs = tensor_values(&b.graph, x, None);
    let ws = tensor_values(&b.graph, w, None);
    let ys = e.get(y).expect("computed");
    for bi in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let exact: f64 = (0..k)
                    .map(|kk| f64::from(xs[(bi * m + i) * k + kk]) * f64::from(ws[j * k + kk]))
                    .sum();
                let got = f64::from(ys[(bi * m + i) * n + j]);
                assert!(
                    (got - exact).abs() < 1e-4,
                    "[{bi},{i},{j}] {got} vs {exact}"
                );
            }
        }
    }
}

#[test]
fn a_split_k_sums_each_slices_f16_chain_in_f32() {
    // One f16 block of 2048 then two blocks of 1: one chain rounds 2049 to
    // 2048 (ties to even) twice; slices of one block each keep their sums
    // and add them in f32, 2050, which is an f16.
    let mut b = Builder::new();
    let ones = vec![1.0; 48];
    let mut column = vec![128.0; 16];
    column.extend([0.0625; 32]);
    let x = b.input("x", &[1, 48], DType::F16, &ones);
    let w = b.input("w", &[48, 1], DType::F16, &column);
    let y = b.op(MATMUL, &[x, w], &[1, 1], DType::F16);
    let name = b.graph.ops[0].name.clone();
    let one_chain = b.evaluate(ReferencePrecision::Device).expect("evaluates");
    assert_eq!(one_chain.get(y).expect("computed"), [2048.0]);
    for (slice, sum) in [(16, 2050.0), (32, 2048.0), (48, 2048.0)] {
        let split = KSlices::from([(name.clone(), slice)]);
        let sliced = b.evaluate_split(ReferencePrecision::Device, &split);
        assert_eq!(
            sliced.expect("evaluates").get(y).expect("computed"),
            [sum],
            "slices of {slice}"
        );
    }
    // At f32 precision a split changes nothing.
    let split = KSlices::from([(name, 16)]);
    let f32 = b
        .evaluate_split(ReferencePrecision::F32, &split)
        .expect("evaluates");
    assert_eq!(f32.get(y).expect("computed"), [2050.0]);
}

#[test]
fn matmul_shape_errors_are_reported() {
    let mut b = Builder::new();
    let x = b.input("x", &[2, 3], DType::F32, &[0.; 6]);
    let w = b.input("w", &[2, 2], DType::F32, &[0.; 4]);
    let y = b.op(MATMUL, &[x, w], &[2, 2], DType::F32);
    check(&b, y, expect!["error: operation `matmul0`: inner dimensions differ: [2, 3] x [2, 2] (transpose_rhs=false)"]);
}

#[test]
fn add_broadcasts() {
    let mut b = Builder::new();
    let x = b.input("x", &[2, 3], DType::F32, &[1., 2., 3., 4., 5., 6.]);
    let row = b.input("row", &[3], DType::F32, &[10., 20., 30.]);
    let col = b.input("col", &[2, 1], DType::F32, &[100., 200.]);
    let one = b.input("one", &[1, 3], DType::F32, &[1000., 2000., 3000.]);
    let same = b.op(OpKind::Add, &[x, x], &[2, 3], DType::F32);
    let with_row = b.op(OpKind::Add, &[x, row], &[2, 3], DType::F32);
    let outer = b.op(OpKind::Add, &[col, one], &[2, 3], DType::F32);
    check(&b, same, expect!["2 4 6 8 10 12"]);
    check(&b, with_row, expect!["11 22 33 14 25 36"]);
    check(&b, outer, expect!["1100 2100 3100 1200 2200 3200"]);
}

#[test]
fn add_rejects_incompatible_shapes() {
    let mut b = Builder::new();
    let x = b.input("x", &[2, 3], DType::F32, &[0.; 6]);
    let y = b.input("y", &[2], DType::F32, &[0.; 2]);
    let z = b.op(OpKind::Add, &[x, y], &[2, 3], DType::F32);
    check(
        &b,
        z,
        expect!["error: operation `add0`: cannot broadcast [2] to [2, 3]"],
    );
}

#[test]
fn gelu_is_exact() {
    let mut b = Builder::new();
    let x = b.input("x", &[5], DType::F32, &[-2., -1., 0., 1., 2.]);
    let y = b.op(OpKind::Gelu, &[x], &[5], DType::F32);
    // x Φ(x): Φ(1) = 0.8413447460685429, Φ(2) = 0.9772498680518208.
    check(
        &b,
        y,
        expect!["-0.045500264 -0.15865526 0 0.8413448 1.9544997"],
    );
}

#[test]
fn a_gelu_the_device_evaluates_in_f16_is_evaluated_in_f16_at_device_precision() {
    let mut b = Builder::new();
    let x = b.input("x", &[4], DType::F16, &[2., -3., -4., 1.]);
    let y = b.op(OpKind::Gelu, &[x], &[4], DType::F16);
    let name = b.graph.ops[0].name.clone();
    let plan = DevicePlan {
        f16_gelus: [name].into(),
        ..DevicePlan::default()
    };
    let values = |precision, plan: &DevicePlan| {
        let evaluation = b.evaluate_planned(precision, plan).expect("evaluates");
        evaluation.get(y).expect("computed").to_vec()
    };
    // Exact, rounded to f16 once.
    let exact = [1.9541016, -0.0040512085, -0.00012671947, 0.8413086];
    assert_eq!(
        values(ReferencePrecision::Device, &DevicePlan::default()),
        exact
    );
    // In f16 (`device/gelu_f16.S`): at 2, h = 1 and u = f16(f16(erf(1.414)) +
    // 1) = 1.955; at -4, erf(-2.828) rounds to -1, so u and the result are
    // 0; at 1 the roundings cancel.
    assert_eq!(
        values(ReferencePrecision::Device, &plan),
        [1.9550781, -0.0043945312, -0.0, 0.8413086]
    );
    // At f32 precision the plan changes nothing.
    let f32 = values(ReferencePrecision::F32, &plan);
    assert_eq!(f32, values(ReferencePrecision::F32, &DevicePlan::default()));
    assert!((f32[2] + 0.000_126_684_97).abs() < 1e-10, "{f32:?}");
}

#[test]
fn softmax_with_scale_and_causal_mask() {
    let mut b = Builder::new();
    let x = b.input(
        "x",
        &[1, 3, 3],
        DType::F32,
        &[0., 0., 0., 0., 0., 0., 1., 2., 3.],
    );
    let causal = b.op(
        OpKind::Softmax {
            scale: 1.0,
            causal: true,
        },
        &[x],
        &[1, 3, 3],
        DType::F32,
    );
    let scaled = b.op(
        OpKind::Softmax {
            scale: std::f32::consts::LN_2,
            causal: false,
        },
        &[x],
        &[1, 3, 3],
        DType::F32,
    );
    // Row 0 sees one column, row 1 two; row 2 is softmax(1, 2, 3).
    check(
        &b,
        causal,
        expect!["1 0 0 0.5 0.5 0 0.09003057 0.24472848 0.66524094"],
    );
    // Scaling by ln 2 turns exp into powers of two: 2/14, 4/14, 8/14.
    check(&b, scaled, expect!["0.33333334 0.33333334 0.33333334 0.33333334 0.33333334 0.33333334 0.14285715 0.2857143 0.5714286"]);
}

#[test]
fn softmax_with_a_broadcast_additive_mask() {
    let mut b = Builder::new();
    let x = b.input(
        "x",
        &[2, 2, 3],
        DType::F32,
        &[1., 2., 3., 1., 2., 3., 0., 0., 0., 0., 0., 0.],
    );
    let inf = f32::NEG_INFINITY;
    // Per matrix row, shared by both batches: row 0 keeps the first two
    // columns and biases the second by ln 2; row 1 removes everything.
    let mask = b.input(
        "mask",
        &[2, 3],
        DType::F32,
        &[0., std::f32::consts::LN_2, inf, inf, inf, inf],
    );
    let y = b.op(
        OpKind::Softmax {
            scale: std::f32::consts::LN_2,
            causal: false,
        },
        &[x, mask],
        &[2, 2, 3],
        DType::F32,
    );
    // Row 0 of batch 0: 2^1 and 2^3 (2^2 doubled), so 1/5 and 4/5; fully
    // masked rows read as zeros; row 0 of batch 1: 1 and 2, so 1/3, 2/3.
    check(
        &b,
        y,
        expect!["0.2 0.8 0 0 0 0 0.33333334 0.6666667 0 0 0 0"],
    );
}

#[test]
fn layernorm_with_gamma_and_beta() {
    let mut b = Builder::new();
    let x = b.input("x", &[2, 4], DType::F32, &[1., 2., 3., 4., 5., 5., 5., 5.]);
    let gamma = b.input("gamma", &[4], DType::F32, &[1., 1., 2., 2.]);
    let beta = b.input("beta", &[4], DType::F32, &[0., 0., 0., 10.]);
    let y = b.op(
        OpKind::Layernorm { epsilon: 0.0 },
        &[x, gamma, beta],
        &[2, 4],
        DType::F32,
    );
    let z = b.op(
        OpKind::Layernorm { epsilon: 1.0 },
        &[x, gamma, beta],
        &[2, 4],
        DType::F32,
    );
    // Mean 2.5, biased variance 1.25: (x - 2.5) / sqrt(1.25) = ±0.4472, ±1.3416.
    check(
        &b,
        y,
        expect!["-1.3416408 -0.4472136 0.8944272 12.683282 NaN NaN NaN NaN"],
    );
    check(&b, z, expect!["-1 -0.33333334 0.6666667 12 0 0 0 10"]);
}

#[test]
fn slices_keep_a_range_of_one_axis() {
    let mut b = Builder::new();
    let values: Vec<f32> = (0..24).map(|v| v as f32).collect();
    let x = b.input("x", &[2, 3, 4], DType::F32, &values);
    let rows = b.op(
        OpKind::Slice { axis: 1, start: 1 },
        &[x],
        &[2, 2, 4],
        DType::F32,
    );
    let columns = b.op(
        OpKind::Slice { axis: 2, start: 3 },
        &[x],
        &[2, 3, 1],
        DType::F32,
    );
    let first = b.op(
        OpKind::Slice { axis: 0, start: 0 },
        &[rows],
        &[1, 2, 4],
        DType::F32,
    );
    check(
        &b,
        rows,
        expect!["4 5 6 7 8 9 10 11 16 17 18 19 20 21 22 23"],
    );
    check(&b, columns, expect!["3 7 11 15 19 23"]);
    check(&b, first, expect!["4 5 6 7 8 9 10 11"]);
    let bad = b.op(
        OpKind::Slice { axis: 1, start: 2 },
        &[x],
        &[2, 2, 4],
        DType::F32,
    );
    check(
        &b,
        bad,
        expect!["error: operation `slice3`: 2..4 is outside axis 1 of [2, 3, 4]"],
    );
}

#[test]
fn concat_joins_along_first_middle_and_last_axes() {
    let mut b = Builder::new();
    let x = b.input("x", &[2, 1, 3], DType::F32, &[0., 1., 2., 3., 4., 5.]);
    let y = b.input(
        "y",
        &[2, 2, 3],
        DType::F32,
        &[10., 11., 12., 13., 14., 15., 16., 17., 18., 19., 20., 21.],
    );
    let z = b.input("z", &[2, 1, 1], DType::F32, &[-1., -2.]);
    let rows = b.op(OpKind::Concat { axis: 1 }, &[x, y], &[2, 3, 3], DType::F32);
    let first = b.op(OpKind::Concat { axis: 0 }, &[x, x], &[4, 1, 3], DType::F32);
    let last = b.op(
        OpKind::Concat { axis: 2 },
        &[x, z, x],
        &[2, 1, 7],
        DType::F32,
    );
    check(
        &b,
        rows,
        expect!["0 1 2 10 11 12 13 14 15 3 4 5 16 17 18 19 20 21"],
    );
    check(&b, first, expect!["0 1 2 3 4 5 0 1 2 3 4 5"]);
    check(&b, last, expect!["0 1 2 -1 0 1 2 3 4 5 -2 3 4 5"]);
    let bad = b.op(OpKind::Concat { axis: 2 }, &[x, y], &[2, 1, 6], DType::F32);
    check(
        &b,
        bad,
        expect!["error: operation `concat3`: [2, 2, 3] does not fit [2, 1, 3] along axis 2"],
    );
}

#[test]
fn transpose_reshape_rearrange_and_cast() {
    let mut b = Builder::new();
    let x = b.input("x", &[2, 3], DType::F32, &[1., 2., 3., 4., 5., 6.]);
    let t = b.op(
        OpKind::Transpose { perm: vec![1, 0] },
        &[x],
        &[3, 2],
        DType::F32,
    );
    let r = b.op(OpKind::Reshape, &[x], &[3, 1, 2], DType::F32);
    let t3 = b.op(
        OpKind::Transpose {
            perm: vec![2, 0, 1],
        },
        &[r],
        &[2, 3, 1],
        DType::F32,
    );
    let block = b.op(
        OpKind::Rearrange { block: [1, 2] },
        &[t3],
        &[2, 3, 1],
        DType::F32,
    );
    let cast = b.op(OpKind::Cast, &[block], &[2, 3, 1], DType::F16);
    check(&b, t, expect!["1 4 2 5 3 6"]);
    check(&b, t3, expect!["1 3 5 2 4 6"]);
    check(&b, cast, expect!["1 3 5 2 4 6"]);
    let bad = b.op(
        OpKind::Transpose { perm: vec![0, 0] },
        &[x],
        &[2, 2],
        DType::F32,
    );
    check(
        &b,
        bad,
        expect!["error: operation `transpose5`: [0, 0] is not a permutation of the axes of [2, 3]"],
    );
}

#[test]
fn fp8_casts_quantise_with_the_output_scale_at_both_precisions() {
    let mut b = Builder::new();
    let x = b.input("x", &[6], DType::F32, &[0.3, 1.0, 7.1, 100.0, -0.001, 1e-4]);
    let q = b.op(OpKind::Cast, &[x], &[6], DType::F143); // scale -2: 0.25 steps near 1
    let h = b.op(OpKind::Cast, &[x], &[6], DType::F16);
    for precision in [ReferencePrecision::F32, ReferencePrecision::Device] {
        let e = b.evaluate(precision).expect("evaluates");
        expect!["0.3125 1 7 60 -0.0009765625 0"].assert_eq(&show(e.get(q).unwrap_or_default()));
        let f16_text = show(e.get(h).unwrap_or_default());
        match precision {
            ReferencePrecision::F32 => expect!["0.3 1 7.1 100 -0.001 0.0001"].assert_eq(&f16_text),
            ReferencePrecision::Device => {
                expect!["0.30004883 1 7.1015625 100 -0.0010004044 0.000100016594"]
                    .assert_eq(&f16_text)
            }
        }
    }
}

#[test]
fn device_precision_rounds_f16_matmuls_once_within_a_weight_block() {
    let mut b = Builder::new();
    let x = b.seeded("x", &[5, 16], DType::F16, Role::Input);
    let w = b.seeded("w", &[16, 6], DType::F16, Role::Weight);
    let y = b.op(MATMUL, &[x, w], &[5, 6], DType::F16);
    let wide = b.evaluate(ReferencePrecision::F32).expect("f32");
    let device = b.evaluate(ReferencePrecision::Device).expect("device");
    let wide = wide.get(y).unwrap_or_default();
    let device = device.get(y).unwrap_or_default();
    // One AMP weight block (16 f16 inputs): summed in f32, rounded once.
    let rounded: Vec<f32> = wide.iter().map(|&v| round_f16(v)).collect();
    assert_eq!(device, &rounded[..]);
    assert_ne!(device, wide);
}

#[test]
fn device_precision_rounds_f16_partials_after_each_weight_block() {
    // Row [1, 2^-11, 0 x 14, 2^-11, 0 x 15] times a column of ones. The
    // exact sum 1 + 2^-10 is an f16 value, but the device's partial after
    // the first block of 16 is f16(1 + 2^-11) = 1 (a tie, to even), and
    // after the second f16(1 + 2^-11) = 1 again.
    let half_ulp = 2f32.powi(-11);
    let mut row = vec![0.0f32; 32];
    (row[0], row[1], row[16]) = (1.0, half_ulp, half_ulp);
    let mut b = Builder::new();
    let x = b.input("x", &[1, 32], DType::F16, &row);
    let w = b.input("w", &[32, 1], DType::F16, &[1.0; 32]);
    let y = b.op(MATMUL, &[x, w], &[1, 1], DType::F16);
    let wide = b.evaluate(ReferencePrecision::F32).expect("f32");
    let device = b.evaluate(ReferencePrecision::Device).expect("device");
    assert_eq!(wide.get(y).unwrap_or_default(), &[1.0 + 2.0 * half_ulp]);
    assert_eq!(device.get(y).unwrap_or_default(), &[1.0]);
}

#[test]
fn device_precision_models_fp8_partials_in_f16() {
    let mut b = Builder::new();
    let x = b.seeded("x", &[8, 256], DType::F143, Role::Input);
    let w = b.seeded("w", &[256, 8], DType::F143, Role::Weight);
    let y = b.op(MATMUL, &[x, w], &[8, 8], DType::F16);
    let wide = b.evaluate(ReferencePrecision::F32).expect("f32");
    let device = b.evaluate(ReferencePrecision::Device).expect("device");
    let (wide, device) = (
        wide.get(y).unwrap_or_default(),
        device.get(y).unwrap_or_default(),
    );
    // Eight f16 roundings of sums of size ~16 stay within a few f16 ulps
    // (2^-6 at 16), but do change results that a single rounding would not.
    let single: Vec<f32> = wide.iter().map(|&v| round_f16(v)).collect();
    assert_ne!(device, &single[..]);
    let comparison = crate::compare::compare(device, wide, 0.9999, 0.1);
    assert!(comparison.passed(), "{:?}", comparison.failure_message());
}

/// A residual block `h + h @ w_i` repeated three times with per-iteration
/// weights, checked against a hand-written loop over the generator.
#[test]
fn repeat_carries_the_activation_and_uses_per_iteration_weights() {
    let mut b = Builder::new();
    let x = b.input("x", &[2, 2], DType::F32, &[1., 0., 0., 1.]);
    let h = b.tensor("h", &[2, 2], DType::F32, Role::Activation, None);
    let w = b.seeded("w", &[2, 2], DType::F32, Role::Weight);
    b.graph.tensors[w.0 as usize].repeat = Some(0);
    let y = b.op(MATMUL, &[h, w], &[2, 2], DType::F32);
    let r = b.op(OpKind::Add, &[h, y], &[2, 2], DType::F32);
    let out = b.tensor("out", &[2, 2], DType::F32, Role::Activation, None);
    b.graph.repeats.push(Repeat {
        name: "layers".into(),
        count: 3,
        init: x,
        carry_in: h,
        carry_out: r,
        output: out,
        body: vec![OpId(0), OpId(1)],
    });
    let g = b.op(OpKind::Add, &[out, out], &[2, 2], DType::F32);
    let e = b.evaluate(ReferencePrecision::F32).expect("evaluates");

    let mut expected = vec![1.0f64, 0., 0., 1.];
    for iteration in 0..3 {
        let wi = tensor_values(&b.graph, w, Some(iteration));
        let mut next = expected.clone();
        for i in 0..2 {
            for j in 0..2 {
                next[i * 2 + j] += (0..2)
                    .map(|k| expected[i * 2 + k] * f64::from(wi[k * 2 + j]))
                    .sum::<f64>();
            }
        }
        expected = next;
    }
    let got = e.get(g).unwrap_or_default();
    for (g, x) in got.iter().zip(&expected) {
        assert!(
            (f64::from(*g) - 2.0 * x).abs() < 1e-5,
            "{got:?} vs {expected:?}"
        );
    }
    assert_ne!(
        tensor_values(&b.graph, w, Some(0)),
        tensor_values(&b.graph, w, Some(1))
    );
    expect!["1.5359124 4.809697 0.53601944 3.2190087"]
        .assert_eq(&show(e.get(out).unwrap_or_default()));
}

#[test]
fn malformed_graphs_are_errors_not_panics() {
    let mut b = Builder::new();
    let x = b.input("x", &[2], DType::F32, &[1., 2.]);
    let dangling = b.tensor("dangling", &[2], DType::F32, Role::Activation, None);
    let y = b.op(OpKind::Add, &[x, dangling], &[2], DType::F32);
    check(
        &b,
        y,
        expect!["error: operation `add0` reads tensor `dangling` before anything computes it"],
    );
    b.graph.ops[0].inputs = vec![x];
    check(
        &b,
        y,
        expect!["error: operation `add0` (add) expects 2 inputs, got 1"],
    );
    b.graph.ops[0].inputs = vec![x, TensorId(99)];
    check(
        &b,
        y,
        expect!["error: tensor id 99 does not exist in the graph"],
    );
    b.graph.ops[0].inputs = vec![x, x];
    b.graph.tensors[y.0 as usize].shape = vec![3];
    check(
        &b,
        y,
        expect!["error: operation `add0`: cannot broadcast [2] to [3]"],
    );
}

#[test]
fn xoshiro_matches_the_published_sequence() {
    let mut rng = Xoshiro256StarStar::from_state([1, 2, 3, 4]);
    let first: Vec<u64> = (0..6).map(|_| rng.next_u64()).collect();
    assert_eq!(
        first,
        [
            11520,
            0,
            1509978240,
            1215971899390074240,
            1216172134540287360,
            607988272756665600
        ]
    );
}

#[test]
fn generator_is_deterministic_and_keyed() {
    let normal = Init::Normal { std: 1.0 };
    let a = generate(42, "x", None, &normal, 6);
    expect!["0.6619084 -0.6385637 0.9793948 -1.3501866 2.3672118 -0.593842"].assert_eq(&show(&a));
    let uniform = generate(42, "x", None, &Init::Uniform { scale: 0.5 }, 4);
    expect!["0.15511584 0.37785667 -0.2512008 0.34987855"].assert_eq(&show(&uniform));
    assert_eq!(a, generate(42, "x", None, &normal, 6));
    assert_eq!(&a[..5], &generate(42, "x", None, &normal, 5)[..]);
    assert_ne!(a, generate(43, "x", None, &normal, 6));
    assert_ne!(a, generate(42, "y", None, &normal, 6));
    assert_ne!(a, generate(42, "x", Some(0), &normal, 6));
    assert_ne!(
        generate(42, "x", Some(0), &normal, 6),
        generate(42, "x", Some(1), &normal, 6)
    );
    assert_eq!(generate(1, "z", None, &Init::Ones, 3), [1.0; 3]);
}

#[test]
fn generator_statistics_match_the_distributions() {
    let n = 100_000;
    let normal = generate(3, "n", None, &Init::Normal { std: 2.0 }, n);
    let mean = normal.iter().map(|&v| f64::from(v)).sum::<f64>() / n as f64;
    let var = normal
        .iter()
        .map(|&v| (f64::from(v) - mean).powi(2))
        .sum::<f64>()
        / n as f64;
    assert!(
        mean.abs() < 0.03 && (var.sqrt() - 2.0).abs() < 0.03,
        "{mean} {var}"
    );
    let uniform = generate(3, "u", None, &Init::Uniform { scale: 3.0 }, n);
    assert!(uniform.iter().all(|&v| (-3.0..3.0).contains(&v)));
    let mean = uniform.iter().map(|&v| f64::from(v)).sum::<f64>() / n as f64;
    assert!(mean.abs() < 0.03, "{mean}");
}

#[test]
fn tensor_values_and_bytes_follow_the_dtype() {
    let mut b = Builder::new();
    let mut out = String::new();
    for dtype in [DType::F32, DType::F16, DType::F143, DType::F152] {
        let id = b.seeded(&format!("t_{dtype}"), &[2, 2], dtype, Role::Weight);
        let values = tensor_values(&b.graph, id, None);
        let bytes = tensor_bytes(&b.graph, id, None);
        assert_eq!(bytes.len(), 4 * dtype.size_bytes());
        assert_eq!(
            crate::numerics::decode(&bytes, dtype, b.graph.tensor(id).scale),
            values
        );
        out.push_str(&format!("{dtype}: {} | {bytes:02x?}\n", show(&values)));
    }
    expect![[r#"
        f32: 0.9818799 1.019672 -1.2603221 -0.62372285 | [7b, 5c, 7b, 3f, 9d, 84, 82, 3f, 3c, 52, a1, bf, 4d, ac, 1f, bf]
        f16: -1.4160156 -1.8095703 0.671875 -0.43554688 | [aa, bd, 3d, bf, 60, 39, f8, b6]
        f143: -1.5 1.5 0.6875 -0.6875 | [d4, 54, 4b, cb]
        f152: 0.25 -0.375 1.75 0.375 | [40, c2, 4b, 42]
    "#]].assert_eq(&out);
}

/// One ViT-S encoder block in FP8 (197 tokens, width 384, 6 heads of 64,
/// MLP 1536), repeated three times with per-iteration weights: the size the
/// reference must evaluate quickly.
fn vit_graph() -> (Builder, TensorId) {
    let (tokens, width, heads, head, mlp) = (197, 384, 6, 64, 1536);
    let mut b = Builder::new();
    let x = b.seeded("x", &[tokens, width], DType::F16, Role::Input);
    let h = b.tensor("h", &[tokens, width], DType::F16, Role::Activation, None);
    let first = b.graph.ops.len() as u32;
    let weight = |b: &mut Builder, name: &str, shape: &[usize], dtype: DType, init: Init| {
        let id = b.tensor(name, shape, dtype, Role::Weight, Some(init));
        b.graph.tensors[id.0 as usize].repeat = Some(0);
        if dtype.is_fp8() {
            b.graph.tensors[id.0 as usize].scale = -5;
        }
        id
    };
    let fan_in = |n: usize| Init::Normal {
        std: 1.0 / (n as f32).sqrt(),
    };
    let g1 = weight(&mut b, "g1", &[width], DType::F16, Init::Ones);
    let b1 = weight(&mut b, "b1", &[width], DType::F16, Init::Zeros);
    let ln1 = b.op(
        OpKind::Layernorm { epsilon: 1e-5 },
        &[h, g1, b1],
        &[tokens, width],
        DType::F16,
    );
    let ln1q = b.op(OpKind::Cast, &[ln1], &[tokens, width], DType::F143);
    let heads_of = |b: &mut Builder, name: &str| {
        let w = weight(b, name, &[width, width], DType::F143, fan_in(width));
        let y = b.op(MATMUL, &[ln1q, w], &[tokens, width], DType::F16);
        let r = b.op(OpKind::Reshape, &[y], &[tokens, heads, head], DType::F16);
        b.op(
            OpKind::Transpose {
                perm: vec![1, 0, 2],
            },
            &[r],
            &[heads, tokens, head],
            DType::F16,
        )
    };
    let q = heads_of(&mut b, "wq");
    let k = heads_of(&mut b, "wk");
    let v = heads_of(&mut b, "wv");
    let s = b.op(MATMUL_T, &[q, k], &[heads, tokens, tokens], DType::F16);
    let p = b.op(
        OpKind::Softmax {
            scale: 0.125,
            causal: false,
        },
        &[s],
        &[heads, tokens, tokens],
        DType::F16,
    );
    let a = b.op(MATMUL, &[p, v], &[heads, tokens, head], DType::F16);
    let at = b.op(
        OpKind::Transpose {
            perm: vec![1, 0, 2],
        },
        &[a],
        &[tokens, heads, head],
        DType::F16,
    );
    let ar = b.op(OpKind::Reshape, &[at], &[tokens, width], DType::F16);
    let aq = b.op(OpKind::Cast, &[ar], &[tokens, width], DType::F143);
    let wo = weight(&mut b, "wo", &[width, width], DType::F143, fan_in(width));
    let o = b.op(MATMUL, &[aq, wo], &[tokens, width], DType::F16);
    let h1 = b.op(OpKind::Add, &[h, o], &[tokens, width], DType::F16);
    let g2 = weight(&mut b, "g2", &[width], DType::F16, Init::Ones);
    let b2 = weight(&mut b, "b2", &[width], DType::F16, Init::Zeros);
    let ln2 = b.op(
        OpKind::Layernorm { epsilon: 1e-5 },
        &[h1, g2, b2],
        &[tokens, width],
        DType::F16,
    );
    let ln2q = b.op(OpKind::Cast, &[ln2], &[tokens, width], DType::F143);
    let w1 = weight(&mut b, "w1", &[width, mlp], DType::F143, fan_in(width));
    let f1 = b.op(MATMUL, &[ln2q, w1], &[tokens, mlp], DType::F16);
    let gelu = b.op(OpKind::Gelu, &[f1], &[tokens, mlp], DType::F16);
    let gq = b.op(OpKind::Cast, &[gelu], &[tokens, mlp], DType::F143);
    let w2 = weight(&mut b, "w2", &[mlp, width], DType::F143, fan_in(mlp));
    let f2 = b.op(MATMUL, &[gq, w2], &[tokens, width], DType::F16);
    let h2 = b.op(OpKind::Add, &[h1, f2], &[tokens, width], DType::F16);
    let last = b.graph.ops.len() as u32;
    let out = b.tensor("out", &[tokens, width], DType::F16, Role::Activation, None);
    b.graph.repeats.push(Repeat {
        name: "blocks".into(),
        count: 3,
        init: x,
        carry_in: h,
        carry_out: h2,
        output: out,
        body: (first..last).map(OpId).collect(),
    });
    b.graph.outputs = vec![out];
    b.graph.check.outputs = vec![out];
    (b, out)
}

#[test]
fn vit_sized_graph_agrees_between_precisions() {
    let (b, out) = vit_graph();
    assert_eq!(b.graph.ops.len(), 26);
    let device = b.evaluate(ReferencePrecision::Device).expect("device");
    let wide = b.evaluate(ReferencePrecision::F32).expect("f32");
    let (device, wide) = (
        device.get(out).unwrap_or_default(),
        wide.get(out).unwrap_or_default(),
    );
    assert_eq!(device.len(), 197 * 384);
    assert!(device.iter().all(|v| v.is_finite()));
    let comparison = crate::compare::compare(device, wide, 0.999, 0.5);
    assert!(comparison.passed(), "{:?}", comparison.failure_message());
    // Device rounding is visible: every device value is an f16.
    assert!(device.iter().all(|&v| round_f16(v) == v));
    assert!(wide.iter().any(|&v| round_f16(v) != v));
    expect!["cos 0.999520 max_abs 0.23146105"].assert_eq(&format!(
        "cos {:.6} max_abs {}",
        comparison.cosine_similarity, comparison.max_abs_error
    ));
}

#[test]
fn mul_sub_div_broadcast() {
    let mut b = Builder::new();
    let x = b.input("x", &[2, 3], DType::F32, &[1., 2., 3., 4., 5., 6.]);
    let row = b.input("row", &[3], DType::F32, &[2., 0.5, 0.]);
    let col = b.input("col", &[2, 1], DType::F32, &[10., -1.]);
    let mul = b.op(OpKind::Mul, &[x, row], &[2, 3], DType::F32);
    let sub = b.op(OpKind::Sub, &[col, x], &[2, 3], DType::F32);
    let div = b.op(OpKind::Div, &[x, row], &[2, 3], DType::F32);
    check(&b, mul, expect!["2 1 0 8 2.5 0"]);
    check(&b, sub, expect!["9 8 7 -5 -6 -7"]);
    // Division by zero is IEEE's: an infinity.
    check(&b, div, expect!["0.5 4 inf 2 10 inf"]);
}

#[test]
fn silu_and_tanh_gelu() {
    let mut b = Builder::new();
    let x = b.input("x", &[5], DType::F32, &[-2., -1., 0., 1., 2.]);
    let silu = b.op(OpKind::Silu, &[x], &[5], DType::F32);
    let gelu = b.op(OpKind::GeluTanh, &[x], &[5], DType::F32);
    // x / (1 + e^-x): 1 / (1 + e^-1) = 0.7310585786300049.
    check(
        &b,
        silu,
        expect!["-0.23840584 -0.26894143 0 0.7310586 1.7615942"],
    );
    // PyTorch's gelu(approximate="tanh") at 1 and 2: 0.8411920070648193,
    // 1.9545977115631104.
    check(
        &b,
        gelu,
        expect!["-0.045402307 -0.15880801 0 0.841192 1.9545977"],
    );
}

#[test]
fn rmsnorm_scales_by_the_root_mean_square() {
    let mut b = Builder::new();
    let x = b.input("x", &[2, 2], DType::F32, &[3., 4., 0., 0.]);
    let gamma = b.input("gamma", &[2], DType::F32, &[1., 2.]);
    let y = b.op(
        OpKind::Rmsnorm { epsilon: 0.0 },
        &[x, gamma],
        &[2, 2],
        DType::F32,
    );
    let z = b.op(
        OpKind::Rmsnorm { epsilon: 1e-6 },
        &[x, gamma],
        &[2, 2],
        DType::F32,
    );
    // sqrt((9 + 16) / 2) = 3.5355339: 3 / 3.5355339 = 0.8485281.
    check(&b, y, expect!["0.84852815 2.2627418 NaN NaN"]);
    check(&b, z, expect!["0.8485281 2.2627416 0 0"]);
}

/// The LLaMA-style example block (RMSNorm, causal attention, SwiGLU) is
/// evaluated end to end, with finite outputs of the residual's scale.
#[test]
fn the_llama_block_example_evaluates() {
    let root =
        camino::Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("projects/llama-block-f16.toml");
    let read = |path: &camino::Utf8Path| crate::vfs::Vfs::read(&crate::vfs::OsFs, path);
    let result = crate::project::validate_with(&root, &read, None);
    let graph = result.graph.expect("the example validates");
    let evaluation =
        crate::reference::evaluate(&graph, ReferencePrecision::F32).expect("evaluates");
    let y = evaluation.get(graph.check.outputs[0]).expect("y");
    assert_eq!(y.len(), 128 * 512);
    assert!(y.iter().all(|v| v.is_finite()));
    let rms = (y.iter().map(|v| f64::from(*v).powi(2)).sum::<f64>() / y.len() as f64).sqrt();
    assert!((0.3..3.0).contains(&rms), "{rms}");
}
