//! The evaluation loop: ops in graph order, repeats iterated, every result
//! stored at the precision's rounding.

use super::init::tensor_values;
use super::ops::{self, Accumulation, MatmulShape};
use super::{Evaluation, ReferenceError, AMP_K_BLOCK, AMP_K_BLOCK_F16};
use crate::graph::{Graph, Op, OpId, OpKind, ReferencePrecision, Repeat, Role, Tensor, TensorId};
use crate::numerics::{round_to_dtype, store_in_dtype};
use rayon::prelude::*;
use std::time::Instant;

/// Evaluates every tensor of `graph` at `precision`; see the module docs
/// of [`crate::reference`] for what each precision rounds.
pub fn evaluate(
    graph: &Graph,
    precision: ReferencePrecision,
) -> Result<Evaluation, ReferenceError> {
    evaluate_with_inputs(
        graph,
        precision,
        &|tensor, iteration| tensor_values(graph, tensor, iteration),
        &DevicePlan::default(),
    )
}

/// The depth of each slice of the inner dimension, by matrix product
/// name, of the products whose plan splits K over tiles. At `device`
/// precision such a product sums like the device: each slice its own chain
/// of f16 partials, the slices' partials in f32, rounded once. A product
/// not named sums in one chain.
pub(crate) type KSlices = std::collections::BTreeMap<String, usize>;

/// What the `device` precision takes from the compiled program: where a
/// plan changed the device's arithmetic. Empty (the default), every
/// product sums in one chain and every GELU is exact before its rounding.
#[derive(Clone, Debug, Default)]
pub(crate) struct DevicePlan {
    /// The products whose K the plan splits over tiles ([`KSlices`]).
    pub(crate) k_slices: KSlices,
    /// The GELUs, by operation name, that the device evaluates in f16
    /// because their result is stored as FP8 in the same pass
    /// ([`ops::gelu_in_f16`]).
    pub(crate) f16_gelus: std::collections::BTreeSet<String>,
}

/// The values of one input or weight (with the iteration of a per-iteration
/// weight); must be callable from several threads.
pub type LeafValues<'a> = dyn Fn(TensorId, Option<u32>) -> Vec<f32> + Sync + 'a;

/// [`evaluate`] with the inputs and weights supplied by `leaves` instead of
/// the seeded generator (hand-written test inputs, or values read from a
/// device). Supplied values are rounded to their tensor's dtype, as storing
/// them on the device would. `plan` says where the compiled program's
/// arithmetic differs from the default ([`DevicePlan`]).
pub(crate) fn evaluate_with_inputs(
    graph: &Graph,
    precision: ReferencePrecision,
    leaves: &LeafValues<'_>,
    plan: &DevicePlan,
) -> Result<Evaluation, ReferenceError> {
    let started = Instant::now();
    tracing::info!(
        threads = rayon::current_num_threads(),
        referencePrecision = precision_name(precision),
        "configured host reference BLAS"
    );
    let mut evaluator = Evaluator {
        graph,
        precision,
        values: vec![None; graph.tensors.len()],
        leaves,
        plan,
    };
    evaluator.generate_leaves(None, None)?;
    let repeat_at = repeat_starts(graph)?;
    let mut index = 0;
    while index < graph.ops.len() {
        match repeat_at[index] {
            Some(number) => {
                let repeat = &graph.repeats[number];
                evaluator.run_repeat(number, repeat)?;
                index += repeat.body.len().max(1);
            }
            None => {
                evaluator.run_op(&graph.ops[index])?;
                index += 1;
            }
        }
    }
    tracing::info!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        "evaluated host reference"
    );
    Ok(Evaluation {
        precision,
        values: evaluator.values,
    })
}

fn precision_name(precision: ReferencePrecision) -> &'static str {
    match precision {
        ReferencePrecision::Device => "device",
        ReferencePrecision::F32 => "f32",
    }
}

/// For each op index, the repeat whose (contiguous, non-empty) body starts
/// there; checks the shape of every repeat on the way.
fn repeat_starts(graph: &Graph) -> Result<Vec<Option<usize>>, ReferenceError> {
    let mut starts = vec![None; graph.ops.len()];
    let tensor_count = graph.tensors.len() as u32;
    for (number, repeat) in graph.repeats.iter().enumerate() {
        let fail = |reason: String| ReferenceError::Repeat {
            repeat: repeat.name.clone(),
            reason,
        };
        for id in [
            repeat.init,
            repeat.carry_in,
            repeat.carry_out,
            repeat.output,
        ] {
            if id.0 >= tensor_count {
                return Err(ReferenceError::NoSuchTensor(id.0));
            }
        }
        let Some(&OpId(first)) = repeat.body.first() else {
            return Err(fail("the body has no operations".into()));
        };
        let contiguous = repeat
            .body
            .iter()
            .enumerate()
            .all(|(offset, op)| op.0 as usize == first as usize + offset);
        let end = first as usize + repeat.body.len();
        if !contiguous || end > graph.ops.len() {
            return Err(fail(
                "the body is not a contiguous run of the op list".into(),
            ));
        }
        if starts[first as usize].is_some() {
            return Err(fail("two repeats start at the same operation".into()));
        }
        starts[first as usize] = Some(number);
    }
    Ok(starts)
}

/// Where a stored tensor's values come from.
#[derive(Clone, Copy)]
enum Stored {
    /// Copied from tensors of the same dtype (views, concatenations, a
    /// repeat's carry).
    Moved,
    /// Computed by an operation.
    Computed,
}

struct Evaluator<'g> {
    graph: &'g Graph,
    precision: ReferencePrecision,
    values: Vec<Option<Vec<f32>>>,
    leaves: &'g LeafValues<'g>,
    plan: &'g DevicePlan,
}

impl Evaluator<'_> {
    /// Generates the inputs and weights that belong to `repeat` (or to no
    /// repeat), in parallel over tensors, rounded to their dtypes.
    fn generate_leaves(
        &mut self,
        repeat: Option<u32>,
        iteration: Option<u32>,
    ) -> Result<(), ReferenceError> {
        let graph = self.graph;
        let leaves = self.leaves;
        let generated: Vec<(usize, Vec<f32>)> = graph
            .tensors
            .par_iter()
            .enumerate()
            .filter(|(_, t)| t.role != Role::Activation && t.repeat == repeat)
            .map(|(i, t)| {
                let mut values = leaves(TensorId(i as u32), iteration);
                values
                    .iter_mut()
                    .for_each(|v| *v = store_in_dtype(*v, t.dtype, t.scale));
                (i, values)
            })
            .collect();
        for (i, values) in generated {
            let tensor = &graph.tensors[i];
            if values.len() != tensor.element_count() {
                return Err(ReferenceError::LeafSize {
                    tensor: tensor.name.clone(),
                    expected: tensor.element_count(),
                    got: values.len(),
                });
            }
            self.values[i] = Some(values);
        }
        Ok(())
    }

    fn run_repeat(&mut self, number: usize, repeat: &Repeat) -> Result<(), ReferenceError> {
        let graph = self.graph;
        let init = self.read(&repeat.name, repeat.init)?.to_vec();
        let carry_in = graph.tensor(repeat.carry_in);
        if init.len() != carry_in.element_count() {
            return Err(ReferenceError::Repeat {
                repeat: repeat.name.clone(),
                reason: format!(
                    "`{}` has {} values but the carried `{}` has {}",
                    graph.tensor(repeat.init).name,
                    init.len(),
                    carry_in.name,
                    carry_in.element_count()
                ),
            });
        }
        let mut carry = init;
        for iteration in 0..repeat.count {
            self.store(repeat.carry_in, carry, Stored::Moved);
            self.generate_leaves(Some(number as u32), Some(iteration))?;
            for &op in &repeat.body {
                self.run_op(graph.op(op))?;
            }
            carry = self.read(&repeat.name, repeat.carry_out)?.to_vec();
        }
        self.store(repeat.output, carry, Stored::Moved);
        Ok(())
    }

    fn read(&self, reader: &str, id: TensorId) -> Result<&[f32], ReferenceError> {
        let tensor = self
            .graph
            .tensors
            .get(id.0 as usize)
            .ok_or(ReferenceError::NoSuchTensor(id.0))?;
        self.values[id.0 as usize]
            .as_deref()
            .ok_or_else(|| ReferenceError::Unevaluated {
                op: reader.to_string(),
                tensor: tensor.name.clone(),
            })
    }

    /// Stores `values` as `id` after the precision's rounding: every dtype
    /// at `Device`, only FP8 at `F32`. Moved values keep what their dtype
    /// holds exactly, as the device copies their bytes; computed ones are
    /// cast as the device casts (through f16 for FP8).
    fn store(&mut self, id: TensorId, mut values: Vec<f32>, stored: Stored) {
        let tensor = self.graph.tensor(id);
        let round = match self.precision {
            ReferencePrecision::Device => tensor.dtype != crate::graph::DType::F32,
            ReferencePrecision::F32 => tensor.dtype.is_fp8(),
        };
        if round {
            let (dtype, scale) = (tensor.dtype, tensor.scale);
            let cast = match stored {
                Stored::Moved => store_in_dtype,
                Stored::Computed => round_to_dtype,
            };
            values
                .par_iter_mut()
                .for_each(|v| *v = cast(*v, dtype, scale));
        }
        self.values[id.0 as usize] = Some(values);
    }

    fn run_op(&mut self, op: &Op) -> Result<(), ReferenceError> {
        let graph = self.graph;
        let output = graph
            .tensors
            .get(op.output.0 as usize)
            .ok_or(ReferenceError::NoSuchTensor(op.output.0))?;
        let expected_inputs = match op.kind {
            OpKind::Matmul { .. }
            | OpKind::Add
            | OpKind::Mul
            | OpKind::Sub
            | OpKind::Div
            | OpKind::Rmsnorm { .. } => 2,
            OpKind::Layernorm { .. } => 3,
            // A softmax's second input, when present, is its mask.
            OpKind::Softmax { .. } if op.inputs.len() == 2 => 2,
            // Any number from two up.
            OpKind::Concat { .. } => op.inputs.len().max(2),
            _ => 1,
        };
        if op.inputs.len() != expected_inputs {
            return Err(ReferenceError::InputCount {
                op: op.name.clone(),
                kind: op.kind.name(),
                expected: expected_inputs,
                got: op.inputs.len(),
            });
        }
        let mut inputs: Vec<(&[f32], &Tensor)> = Vec::with_capacity(op.inputs.len());
        for &id in &op.inputs {
            let values = self.read(&op.name, id)?;
            let tensor = graph.tensor(id);
            if values.len() != tensor.element_count() {
                return Err(shape_error(
                    op,
                    format!("`{}` has the wrong size", tensor.name),
                ));
            }
            inputs.push((values, tensor));
        }
        let result = self
            .compute(op, &inputs, output)
            .map_err(|reason| shape_error(op, reason))?;
        if result.len() != output.element_count() {
            return Err(shape_error(
                op,
                format!(
                    "computes {} values but `{}` {:?} holds {}",
                    result.len(),
                    output.name,
                    output.shape,
                    output.element_count()
                ),
            ));
        }
        let stored = match op.kind {
            OpKind::Transpose { .. }
            | OpKind::Reshape
            | OpKind::Rearrange { .. }
            | OpKind::Slice { .. }
            | OpKind::Concat { .. } => Stored::Moved,
            _ => Stored::Computed,
        };
        self.store(op.output, result, stored);
        Ok(())
    }

    fn compute(
        &self,
        op: &Op,
        inputs: &[(&[f32], &Tensor)],
        output: &Tensor,
    ) -> Result<Vec<f32>, String> {
        let (x, x_tensor) = inputs[0];
        Ok(match &op.kind {
            OpKind::Matmul { epilogue, .. } if !epilogue.is_empty() => {
                return Err(format!(
                    "`{}` has a fused epilogue; the reference evaluates the unfused graph",
                    op.name
                ))
            }
            OpKind::Matmul { transpose_rhs, .. } => {
                let (w, w_tensor) = inputs[1];
                let shape = MatmulShape::new(&x_tensor.shape, &w_tensor.shape, *transpose_rhs)?;
                // A mixed matmul reads its f16 operand converted to the
                // other operand's FP8 format with scale 0 (the project
                // format's rule), at either precision.
                let converted = |values: &[f32], to: &Tensor| -> Vec<f32> {
                    values
                        .par_iter()
                        .map(|&v| round_to_dtype(v, to.dtype, 0))
                        .collect()
                };
                if output.dtype == crate::graph::DType::F32 {
                    return f32_result_matmul(shape, (x, x_tensor), (w, w_tensor));
                }
                let (x_converted, w_converted);
                let x = if !x_tensor.dtype.is_fp8() && w_tensor.dtype.is_fp8() {
                    x_converted = converted(x, w_tensor);
                    x_converted.as_slice()
                } else {
                    x
                };
                let w = if !w_tensor.dtype.is_fp8() && x_tensor.dtype.is_fp8() {
                    w_converted = converted(w, x_tensor);
                    w_converted.as_slice()
                } else {
                    w
                };
                let fp8 = x_tensor.dtype.is_fp8() || w_tensor.dtype.is_fp8();
                // The device model: the AMP carries f16 partials between its
                // weight blocks (FP8 codes decoded with their tensor's scale
                // first, so a product whose real value overflows f16 is
                // infinite here as on the device), so products are summed in
                // f32 within each block and the running sum is rounded to f16
                // after each (`book/src/numerics.md`).
                let k_block = if fp8 { AMP_K_BLOCK } else { AMP_K_BLOCK_F16 };
                let accumulation = match self.precision {
                    ReferencePrecision::Device => Accumulation::F16Partials {
                        k_block,
                        k_slice: self.plan.k_slices.get(&op.name).copied(),
                    },
                    ReferencePrecision::F32 => Accumulation::F32,
                };
                ops::matmul(shape, x, w, accumulation)?
            }
            OpKind::Add => {
                let (y, y_tensor) = inputs[1];
                ops::add(&output.shape, (x, &x_tensor.shape), (y, &y_tensor.shape))?
            }
            OpKind::Mul | OpKind::Sub | OpKind::Div => {
                let (y, y_tensor) = inputs[1];
                let f = match op.kind {
                    OpKind::Mul => |a: f32, b: f32| a * b,
                    OpKind::Sub => |a: f32, b: f32| a - b,
                    _ => |a: f32, b: f32| a / b,
                };
                ops::elementwise(&output.shape, (x, &x_tensor.shape), (y, &y_tensor.shape), f)?
            }
            OpKind::Silu => ops::silu(x),
            OpKind::GeluTanh => ops::gelu_tanh(x),
            OpKind::Rmsnorm { epsilon } => ops::rmsnorm(&x_tensor.shape, x, inputs[1].0, *epsilon)?,
            OpKind::Gelu
                if self.precision == ReferencePrecision::Device
                    && self.plan.f16_gelus.contains(&op.name) =>
            {
                ops::gelu_in_f16(x)
            }
            OpKind::Gelu => ops::gelu(x),
            OpKind::Softmax { scale, .. } if inputs.len() == 2 => {
                let (mask, mask_tensor) = inputs[1];
                super::softmax_mask::softmax_masked(
                    &x_tensor.shape,
                    x,
                    (mask, &mask_tensor.shape),
                    *scale,
                )?
            }
            OpKind::Softmax { scale, causal } => ops::softmax(&x_tensor.shape, x, *scale, *causal),
            OpKind::Layernorm { epsilon } => {
                ops::layernorm(&x_tensor.shape, x, inputs[1].0, inputs[2].0, *epsilon)?
            }
            OpKind::Transpose { perm } => ops::transpose(&x_tensor.shape, perm, x)?,
            OpKind::Slice { axis, start } => {
                ops::slice(&x_tensor.shape, *axis, *start, output.shape[*axis], x)?
            }
            OpKind::Concat { axis } => {
                let parts: Vec<(&[f32], &[usize])> = inputs
                    .iter()
                    .map(|(values, tensor)| (*values, tensor.shape.as_slice()))
                    .collect();
                ops::concat(*axis, &parts)?
            }
            // Views, layout changes and casts do not change values; the
            // store applies the output dtype's rounding.
            OpKind::Reshape | OpKind::Rearrange { .. } | OpKind::Cast => x.to_vec(),
            OpKind::Reduce { reduction } => {
                let rounding = match (self.precision, output.dtype) {
                    (ReferencePrecision::Device, crate::graph::DType::F16) => {
                        super::reduce::Rounding::F16
                    }
                    _ => super::reduce::Rounding::F32,
                };
                let row_length = x_tensor.shape.last().copied().unwrap_or(1);
                super::reduce::reduce(x, row_length, *reduction, rounding)?
            }
        })
    }
}

fn shape_error(op: &Op, reason: String) -> ReferenceError {
    ReferenceError::Shape {
        op: op.name.clone(),
        reason,
    }
}

/// A matmul with an f32 result, at either precision: each FP8 operand is
/// read converted to f16 (the project format's rule; exact unless its
/// scaled values leave f16's range), products of f16 values are exact in
/// f32, and they are summed in f32 with no f16 rounding anywhere. The sum's
/// order is the sgemm's, not the AMP's, so the two differ by f32 rounding
/// only (`book/src/numerics.md`).
fn f32_result_matmul(
    shape: MatmulShape,
    (x, x_tensor): (&[f32], &Tensor),
    (w, w_tensor): (&[f32], &Tensor),
) -> Result<Vec<f32>, String> {
    let as_f16 = |values: &[f32], tensor: &Tensor| -> Option<Vec<f32>> {
        tensor.dtype.is_fp8().then(|| {
            values
                .par_iter()
                .map(|&v| round_to_dtype(v, crate::graph::DType::F16, 0))
                .collect()
        })
    };
    let (x_converted, w_converted) = (as_f16(x, x_tensor), as_f16(w, w_tensor));
    ops::matmul(
        shape,
        x_converted.as_deref().unwrap_or(x),
        w_converted.as_deref().unwrap_or(w),
        Accumulation::F32,
    )
}
