//! The host reference: an evaluation of a [`Graph`](crate::graph::Graph) on the host, written
//! independently of the planner, the kernels and the simulator, against
//! which `ipub run` checks the device's outputs.
//!
//! It computes every tensor from the seeded inputs and weights
//! ([`init`]), running repeat bodies once per iteration with their
//! per-iteration weights and the carried activation, at one of two
//! precisions:
//!
//! - [`ReferencePrecision::F32`]: every activation is kept in f32; only
//!   tensors of an FP8 dtype are quantised, because an FP8 cast is an
//!   operation of the graph, not a storage detail;
//! - [`ReferencePrecision::Device`]: every activation is rounded to its dtype
//!   after the operation that produces it (f16 RNE, FP8 through f16 with the
//!   tensor's scale); matmuls with an FP8 operand accumulate in f16
//!   partials per block of [`AMP_K_BLOCK`] inner indices in stored (unscaled)
//!   units, f16 products with an f16 result in f16 partials per block of
//!   [`AMP_K_BLOCK_F16`] (the AMP's f16 weight block), products with an
//!   f32 result in f32; softmax, layernorm and GELU
//!   compute in f32 or better and round their output, except a GELU the
//!   device evaluates in f16 because it stores its result as FP8 in the
//!   same pass ([`DevicePlan`]), which is evaluated in f16 as the device
//!   does.
//!
//! A matmul with one f16 and one FP8 operand reads the f16 operand converted
//! to the other's FP8 format with scale 0 (at either precision): the
//! reference does that conversion itself rather than trusting the
//! compiler's inserted cast.
//!
//! The device's exact summation order is not modelled; the f16-partial model
//! is an approximation of it, documented in `book/src/numerics.md`.

mod eval;
pub(crate) mod init;
pub(crate) mod ops;
pub(crate) mod reduce;
pub(crate) mod softmax_mask;

#[cfg(test)]
mod tests;

pub use crate::graph::ReferencePrecision;
pub use eval::{evaluate, LeafValues};
pub(crate) use eval::{evaluate_with_inputs, DevicePlan, KSlices};
pub use init::{tensor_bytes, tensor_values};

use crate::graph::TensorId;

/// Inner-dimension block after which the FP8 matmul model rounds its running
/// sum to f16: the K of one AMP weight block on the IPU21 (32 FP8 inputs).
pub(crate) const AMP_K_BLOCK: usize = 32;

/// The same block for f16 products: one AMP weight block holds 16 f16
/// inputs, and an f16 result's partials are rounded to f16 after each.
pub(crate) const AMP_K_BLOCK_F16: usize = 16;

/// Why the reference could not evaluate a graph. The validator rules these
/// out for graphs built from projects, so each one names a malformed graph.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    #[error("tensor id {0} does not exist in the graph")]
    NoSuchTensor(u32),
    #[error("operation `{op}` reads tensor `{tensor}` before anything computes it")]
    Unevaluated { op: String, tensor: String },
    #[error("operation `{op}` ({kind}) expects {expected} inputs, got {got}")]
    InputCount {
        op: String,
        kind: &'static str,
        expected: usize,
        got: usize,
    },
    #[error("operation `{op}`: {reason}")]
    Shape { op: String, reason: String },
    #[error("`{tensor}` was given {got} values but holds {expected}")]
    LeafSize {
        tensor: String,
        expected: usize,
        got: usize,
    },
    #[error("repeat `{repeat}`: {reason}")]
    Repeat { repeat: String, reason: String },
}

/// The values of every evaluated tensor, by id, in real (scaled) f32.
/// Tensors inside a repeat body hold their last iteration's values.
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluation {
    pub precision: ReferencePrecision,
    values: Vec<Option<Vec<f32>>>,
}

impl Evaluation {
    /// The values of `tensor`, or `None` if the graph never computes it.
    pub fn get(&self, tensor: TensorId) -> Option<&[f32]> {
        self.values
            .get(tensor.0 as usize)
            .and_then(|v| v.as_deref())
    }
}
