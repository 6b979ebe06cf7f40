//! The key a plan is computed from.
//!
//! Two operations with equal signatures get the same plan, so the planner's
//! query is keyed on the signature and not on the operation: the three
//! iterations of a repeated encoder, or the Q, K and V projections of an
//! attention block, share one plan each.

use crate::graph::{DType, Graph, Op, OpKind, Role};
use crate::target::Target;
use serde::{Deserialize, Serialize};
use std::fmt;

/// What kind of work an operation is, with its attributes; floats are kept
/// as bit patterns so signatures are `Eq` and `Hash`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SignatureKind {
    Matmul {
        transpose_rhs: bool,
    },
    Cast,
    Add,
    Gelu,
    Softmax {
        scale_bits: u32,
        causal: bool,
    },
    Layernorm {
        epsilon_bits: u32,
    },
    /// Views: no device work of their own.
    View,
    Rearrange {
        block: [usize; 2],
    },
}

/// The shape and format of one operand or result.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Operand {
    pub shape: Vec<usize>,
    pub dtype: DType,
    pub scale: i8,
    /// Loaded with the package, so the planner may lay it out on the tiles
    /// that use it (replicated if need be) without any exchange.
    pub weight: bool,
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{:?}", self.dtype, self.shape)?;
        if self.dtype.is_fp8() {
            write!(f, "*2^{}", self.scale)?;
        }
        Ok(())
    }
}

/// Everything the planner may look at.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OpSignature {
    pub kind: SignatureKind,
    pub inputs: Vec<Operand>,
    pub output: Operand,
    /// How many tiles the program may use.
    pub tiles: u32,
    /// Bytes of weights per tile this operation may keep resident (see
    /// [`weight_budget_bytes`]); only matters when an input is a weight.
    pub weight_budget: u64,
}

/// Share of tile memory the planner gives to weights, which stay resident
/// for the whole program (one copy per repeat iteration).
pub const WEIGHT_SHARE_OF_TILE_MEMORY: f64 = 0.6;

/// The per-tile weight budget of an operation whose weights take
/// `op_weight_bytes`, in a graph whose weights take `total_weight_bytes`
/// (repeat instances included): the weight share of tile memory split in
/// proportion. The total is rounded up to three significant bits so that
/// editing one weight rarely changes every other operation's signature (and
/// so its plan).
pub fn weight_budget_bytes(target: &Target, op_weight_bytes: u64, total_weight_bytes: u64) -> u64 {
    let memory = u64::from(target.memory.loadable.end - target.memory.tile.start);
    let share = (memory as f64 * WEIGHT_SHARE_OF_TILE_MEMORY) as u64;
    let total = round_up_to_significant_bits(total_weight_bytes.max(1), 3);
    let scaled = u128::from(share) * u128::from(op_weight_bytes) / u128::from(total);
    // Never less than an even split over the program's tiles would need.
    (scaled as u64).max(op_weight_bytes.div_ceil(u64::from(target.tiles)))
}

/// `value` rounded up to its `bits` most significant bits.
fn round_up_to_significant_bits(value: u64, bits: u32) -> u64 {
    let width = u64::BITS - value.leading_zeros();
    let shift = width.saturating_sub(bits);
    value.div_ceil(1 << shift) << shift
}

impl OpSignature {
    pub fn of(graph: &Graph, op: &Op) -> OpSignature {
        let operand = |id| {
            let t = graph.tensor(id);
            Operand {
                shape: t.shape.clone(),
                dtype: t.dtype,
                scale: t.scale,
                weight: t.role == Role::Weight,
            }
        };
        let kind = match &op.kind {
            OpKind::Matmul { transpose_rhs } => SignatureKind::Matmul {
                transpose_rhs: *transpose_rhs,
            },
            OpKind::Cast => SignatureKind::Cast,
            OpKind::Add => SignatureKind::Add,
            OpKind::Gelu => SignatureKind::Gelu,
            OpKind::Softmax { scale, causal } => SignatureKind::Softmax {
                scale_bits: scale.to_bits(),
                causal: *causal,
            },
            OpKind::Layernorm { epsilon } => SignatureKind::Layernorm {
                epsilon_bits: epsilon.to_bits(),
            },
            OpKind::Transpose { .. } | OpKind::Reshape => SignatureKind::View,
            OpKind::Rearrange { block } => SignatureKind::Rearrange { block: *block },
        };
        let total_weights: u64 = graph
            .tensors
            .iter()
            .filter(|t| t.role == Role::Weight)
            .map(|t| {
                let instances = t.repeat.map_or(1, |r| graph.repeats[r as usize].count);
                t.size_bytes() as u64 * u64::from(instances)
            })
            .sum();
        let op_weights: u64 = op
            .inputs
            .iter()
            .map(|&id| graph.tensor(id))
            .filter(|t| t.role == Role::Weight)
            .map(|t| t.size_bytes() as u64)
            .sum();
        OpSignature {
            kind,
            inputs: op.inputs.iter().map(|&id| operand(id)).collect(),
            output: operand(op.output),
            tiles: graph.tiles,
            weight_budget: weight_budget_bytes(
                crate::target::target_by_name(&graph.target).unwrap_or(&crate::target::IPU21),
                op_weights,
                total_weights,
            ),
        }
    }

    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            SignatureKind::Matmul { .. } => "matmul",
            SignatureKind::Cast => "cast",
            SignatureKind::Add => "add",
            SignatureKind::Gelu => "gelu",
            SignatureKind::Softmax { .. } => "softmax",
            SignatureKind::Layernorm { .. } => "layernorm",
            SignatureKind::View => "view",
            SignatureKind::Rearrange { .. } => "rearrange",
        }
    }
}

impl fmt::Display for OpSignature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}(", self.kind_name())?;
        for (i, input) in self.inputs.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{input}")?;
        }
        write!(f, ") -> {} on {} tiles", self.output, self.tiles)
    }
}
