//! What the package tells a profile beyond kernel names: the compiler's
//! estimate of every operation and of every tile's compute steps, the
//! operation each exchange step serves, and every tile's placement.
//!
//! All of it lives in the `profile` part next to [`super::ProfileLayout`]'s
//! kernel table. A runtime needs none of it to run the package; `ipub run`
//! copies it into the cycle profile so a report can set estimates against
//! measurements and show what occupies each tile's memory. Steps are named
//! as in [`super::StepKernels`]: by call and pre-order index
//! ([`super::HostCall::preorder`]).

use super::Call;
use serde::{Deserialize, Serialize};

/// The planner's estimate of one operation, for one execution of it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OpEstimate {
    pub name: String,
    /// The operation's kind (`matmul`, `softmax`, `cast`, ...).
    pub kind: String,
    /// How many times a run executes it (a repeat's count, or 1).
    pub executions: u32,
    /// Tiles the selected plan spreads it over.
    #[serde(default)]
    pub tiles: u32,
    pub compute_cycles: u64,
    pub exchange_cycles: u64,
    pub sync_cycles: u64,
    /// Multiply-accumulates of one execution (matrix products; 0 otherwise).
    #[serde(default)]
    pub macs: u64,
    /// Cycles one execution takes at the AMP units' peak on every tile the
    /// project may use (matrix products; 0 otherwise).
    #[serde(default)]
    pub roofline_cycles: u64,
    /// The depth of each slice of the inner dimension when the selected
    /// plan splits a matrix product's K over tiles (absent otherwise): the
    /// `device`-precision reference sums in the same slices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k_slice: Option<u32>,
    /// Whether its kernels evaluate a GELU in f16 (the GELU variants that
    /// store FP8 in the same pass, `device/gelu_f16.S`): the
    /// `device`-precision reference evaluates that GELU the same way.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gelu_in_f16: bool,
}

impl OpEstimate {
    pub(crate) fn total_cycles(&self) -> u64 {
        self.compute_cycles + self.exchange_cycles + self.sync_cycles
    }
}

/// The cycles each tile of one compute step is expected to take: its
/// kernel runs' cost formulas (`.ipub_cost`) evaluated with the variant's
/// defines and the run's parameters, summed.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StepEstimates {
    pub call: Call,
    pub step: u32,
    /// `(tile, cycles)`, ascending by tile; a tile whose formula cannot be
    /// evaluated is left out.
    pub tiles: Vec<(u32, u64)>,
}

/// The operation an exchange step gathers operands for (or reduces
/// partials of).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ExchangeOp {
    pub call: Call,
    pub step: u32,
    pub op: String,
}

/// What a placed buffer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BufferKind {
    /// A streamed input, written by the host before each run.
    Input,
    /// Written by the loader and kept for the whole program.
    Weight,
    /// The home of (part of) an operation's result.
    Activation,
    /// An operand gathered by exchange for one operation.
    Operand,
    /// Partial sums of a matrix product with a split inner dimension.
    Partial,
}

impl BufferKind {
    pub(crate) const fn name(self) -> &'static str {
        match self {
            BufferKind::Input => "input",
            BufferKind::Weight => "weight",
            BufferKind::Activation => "activation",
            BufferKind::Operand => "operand",
            BufferKind::Partial => "partial",
        }
    }
}

/// One buffer's place and lifetime on its tile. Written as an array,
/// `[address, bytes, kind, name, op, first_step, last_step]` (`op` null
/// when none): a large program places hundreds of thousands of buffers, and
/// field names would be most of their bytes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "BufferRow", from = "BufferRow")]
pub struct BufferPlace {
    pub address: u32,
    pub bytes: u32,
    pub kind: BufferKind,
    /// What it holds (`operand 0 of \`qkv\``, `weight \`w1\` of iteration 2`).
    pub name: String,
    /// The operation that writes it (activations, operands, partials).
    pub op: Option<String>,
    /// The first and last step of the `run` call (pre-order indices,
    /// inclusive) during which it must keep its contents. A buffer inside
    /// a repeat's body lives in those steps of every iteration.
    pub first_step: u32,
    pub last_step: u32,
}

/// [`BufferPlace`] as written.
type BufferRow = (u32, u32, BufferKind, String, Option<String>, u32, u32);

impl From<BufferPlace> for BufferRow {
    fn from(b: BufferPlace) -> BufferRow {
        (
            b.address,
            b.bytes,
            b.kind,
            b.name,
            b.op,
            b.first_step,
            b.last_step,
        )
    }
}

impl From<BufferRow> for BufferPlace {
    fn from(row: BufferRow) -> BufferPlace {
        let (address, bytes, kind, name, op, first_step, last_step) = row;
        BufferPlace {
            address,
            bytes,
            kind,
            name,
            op,
            first_step,
            last_step,
        }
    }
}

/// A block of per-tile runtime data (supervisor code, linked kernels,
/// kernel states, exchange tables), placed first and kept all run long.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SupportPlace {
    pub kind: String,
    pub address: u32,
    pub bytes: u32,
}

/// Everything placed on one tile.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TileMemory {
    pub tile: u32,
    pub support: Vec<SupportPlace>,
    /// In ascending address order (buffers with disjoint lifetimes share
    /// addresses).
    pub buffers: Vec<BufferPlace>,
}
