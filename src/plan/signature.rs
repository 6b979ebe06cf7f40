//! The key a plan is computed from.
//!
//! Two operations with equal signatures get the same plan, so the planner's
//! query is keyed on the signature and not on the operation: the three
//! iterations of a repeated encoder, or the Q, K and V projections of an
//! attention block, share one plan each.

use crate::graph::Reduction;
use crate::graph::{DType, EpilogueStep, Graph, Op, OpKind, Role};
use crate::partition::{BinaryOp, UnaryOp};
use crate::target::TargetId;
use serde::{Deserialize, Serialize};
use std::fmt;

/// What kind of work an operation is, with its attributes; floats are kept
/// as bit patterns so signatures are `Eq` and `Hash`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) enum SignatureKind {
    Matmul {
        transpose_rhs: bool,
        /// The fused elementwise steps after the product; their extra
        /// operands follow the two factors in `inputs`.
        epilogue: Vec<EpilogueStep>,
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
    /// `mul`, `sub` or `div`.
    Binary {
        op: BinaryOp,
    },
    /// `silu` or `gelu_tanh`.
    Unary {
        op: UnaryOp,
    },
    Rmsnorm {
        epsilon_bits: u32,
    },
    /// The inputs joined along `axis`, copied by exchange alone.
    Concat {
        axis: usize,
    },
    /// `reduce_sum`, `reduce_mean` or `reduce_max` over the last axis.
    Reduce {
        reduction: Reduction,
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
    /// Written by the host before each run, straight into the pieces the
    /// plan lays out: whatever the plan, the host sends the tensor once, so
    /// it costs the plan no exchange.
    pub host: bool,
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
pub(crate) struct OpSignature {
    pub kind: SignatureKind,
    pub inputs: Vec<Operand>,
    pub output: Operand,
    /// How many tiles the program may use.
    pub tiles: u32,
    /// How hard the planner must spread the operation to save memory: 0
    /// normally; the first levels halve how many copies of its weights
    /// the tiles may keep (`plan::REPLICATION_LEVELS`), each later one the
    /// bytes a tile may hold for it. The pipeline raises it for operations
    /// whose buffers overfill a tile (see `pipeline::fitted_program`).
    #[serde(default)]
    pub spread: u8,
    /// The machine the operation is planned for.
    #[serde(default)]
    pub target: TargetId,
    /// No operation on the device reads the result, the host alone does:
    /// its layout costs no later operation an exchange, so refinement
    /// weighs no reader's gather.
    #[serde(default)]
    pub unread: bool,
}

impl OpSignature {
    /// How many times the spread level halves the copies of weights the
    /// operation may keep (the first `plan::REPLICATION_LEVELS` levels).
    pub(crate) fn replication_halvings(&self) -> u32 {
        u32::from(self.spread.min(super::REPLICATION_LEVELS))
    }

    /// How many times the spread level halves the tile memory a plan may
    /// use (the levels past the replication levels).
    pub(crate) fn memory_halvings(&self) -> u32 {
        u32::from(self.spread.saturating_sub(super::REPLICATION_LEVELS)).min(16)
    }

    pub(crate) fn of(graph: &Graph, op: &Op) -> OpSignature {
        let operand = |id| {
            let t = graph.tensor(id);
            Operand {
                shape: t.shape.clone(),
                dtype: t.dtype,
                scale: t.scale,
                weight: t.role == Role::Weight,
                host: t.role == Role::Input,
            }
        };
        let kind = match &op.kind {
            OpKind::Matmul {
                transpose_rhs,
                epilogue,
            } => SignatureKind::Matmul {
                transpose_rhs: *transpose_rhs,
                epilogue: epilogue.clone(),
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
            OpKind::Mul => SignatureKind::Binary { op: BinaryOp::Mul },
            OpKind::Sub => SignatureKind::Binary { op: BinaryOp::Sub },
            OpKind::Div => SignatureKind::Binary { op: BinaryOp::Div },
            OpKind::Silu => SignatureKind::Unary { op: UnaryOp::Silu },
            OpKind::GeluTanh => SignatureKind::Unary {
                op: UnaryOp::GeluTanh,
            },
            OpKind::Rmsnorm { epsilon } => SignatureKind::Rmsnorm {
                epsilon_bits: epsilon.to_bits(),
            },
            // A slice reads a strided subset of its input in place, like a
            // transpose; lowering finds its offset in the graph.
            OpKind::Slice { .. } => SignatureKind::View,
            OpKind::Concat { axis } => SignatureKind::Concat { axis: *axis },
            OpKind::Reduce { reduction } => SignatureKind::Reduce {
                reduction: *reduction,
            },
        };
        OpSignature {
            kind,
            inputs: op.inputs.iter().map(|&id| operand(id)).collect(),
            output: operand(op.output),
            tiles: graph.tiles,
            spread: 0,
            target: graph.target,
            unread: !graph.read_on_device(op.output),
        }
    }

    pub(super) fn kind_name(&self) -> &'static str {
        match self.kind {
            SignatureKind::Matmul { .. } => "matmul",
            SignatureKind::Cast => "cast",
            SignatureKind::Add => "add",
            SignatureKind::Gelu => "gelu",
            SignatureKind::Softmax { .. } => "softmax",
            SignatureKind::Layernorm { .. } => "layernorm",
            SignatureKind::View => "view",
            SignatureKind::Rearrange { .. } => "rearrange",
            SignatureKind::Binary { op } => op.name(),
            SignatureKind::Unary { op } => op.name(),
            SignatureKind::Rmsnorm { .. } => "rmsnorm",
            SignatureKind::Concat { .. } => "concat",
            SignatureKind::Reduce { reduction } => reduction.op_name(),
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
        f.write_str(")")?;
        if let SignatureKind::Matmul { epilogue, .. } = &self.kind {
            let steps: Vec<&str> = epilogue.iter().map(|step| step.name()).collect();
            if !steps.is_empty() {
                write!(f, " then {}", steps.join(", "))?;
            }
        }
        write!(f, " -> {} on {} tiles", self.output, self.tiles)?;
        if self.spread > 0 {
            write!(f, ", spread {}", self.spread)?;
        }
        if self.unread {
            f.write_str(", read by the host alone")?;
        }
        Ok(())
    }
}
