//! The lowered program: per-tile buffers, kernel runs, exchange phases and
//! the step sequence that orders them. This is what placement gives
//! addresses to and emission turns into tile code.

use super::layout::Piece;
use super::view::View;
use crate::graph::{DType, OpId, TensorId};
use crate::partition::{KernelId, MemoryClass};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BufferId(pub u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PhaseId(pub u32);

/// What a buffer holds and who fills it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BufferRole {
    /// Written by the host before each run (a streamed input).
    Input { tensor: TensorId },
    /// Written by the loader with the package; `iteration` for a repeat's
    /// per-iteration weight.
    Weight {
        tensor: TensorId,
        iteration: Option<u32>,
    },
    /// Written by a kernel: the home of (part of) an activation.
    Activation { tensor: TensorId },
    /// Written by exchange: an operand gathered for an operation.
    Operand { op: OpId, operand: u32 },
    /// Written by a kernel: the f16 partials of a matrix product over
    /// `slice` of its split inner dimension, read by the reduction.
    Partial { op: OpId, slice: u32 },
    /// Written by the first kernel of a fused operation and read by the
    /// next on the same tile, in the same compute step: the rows of the
    /// intermediate tensor fusion removed (`crate::fuse`).
    Intermediate { op: OpId },
}

/// One buffer on one tile.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Buffer {
    pub tile: u32,
    pub dtype: DType,
    pub piece: Piece,
    /// Shape of the coordinates `piece` is given in (a reshape of the
    /// logical tensor with the same flat order, or the operand's view).
    pub coordinates: Vec<usize>,
    pub class: MemoryClass,
    pub role: BufferRole,
}

impl Buffer {
    pub(crate) fn bytes(&self) -> u32 {
        (self.piece.slots() * self.dtype.size_bytes()) as u32
    }

    /// The bytes of its values: [`Buffer::bytes`] without its layout's
    /// padding.
    pub(crate) fn data_bytes(&self) -> u32 {
        (self.piece.elements() * self.dtype.size_bytes()) as u32
    }
}

/// How a kernel run finds an operand.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum OperandRef {
    Buffer(BufferId),
    /// A repeat's per-iteration weight: one buffer per iteration, chosen by
    /// the loop counter at run time.
    PerIteration(Vec<BufferId>),
}

/// One kernel invocation on one tile.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KernelRun {
    pub tile: u32,
    pub kernel: KernelId,
    /// Inputs first, output last.
    pub operands: Vec<OperandRef>,
    /// Named integer parameters (extents, offsets, scales, float bits).
    pub params: Vec<(String, i64)>,
}

/// Copy `bytes` from one tile buffer to one or more (a broadcast).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Transfer {
    pub source: BufferId,
    pub source_offset: u32,
    pub bytes: u32,
    pub destinations: Vec<(BufferId, u32)>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ExchangePhase {
    /// What the phase is for, for logs and dumps (`op qkv`, `carry encoder`).
    pub purpose: String,
    pub transfers: Vec<Transfer>,
    /// The phases merged into this one (`super::merge`), in order: each
    /// one's purpose and the index of its first transfer. `purpose` is that
    /// of the transfers before the first.
    pub merged: Vec<(String, u32)>,
}

impl ExchangePhase {
    /// Every purpose the phase serves, its own first.
    pub(crate) fn purposes(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.purpose.as_str()).chain(self.merged.iter().map(|(p, _)| p.as_str()))
    }

    /// The transfers of each purpose, in order.
    pub(crate) fn parts(&self) -> Vec<(&str, &[Transfer])> {
        let starts: Vec<usize> = std::iter::once(0)
            .chain(self.merged.iter().map(|&(_, start)| start as usize))
            .chain(std::iter::once(self.transfers.len()))
            .collect();
        self.purposes()
            .zip(starts.windows(2))
            .map(|(purpose, range)| (purpose, &self.transfers[range[0]..range[1]]))
            .collect()
    }

    /// The purposes, joined: what dumps and the package call the phase.
    pub(crate) fn label(&self) -> String {
        self.purposes().collect::<Vec<_>>().join(", ")
    }

    /// The purpose of the phase that moves repeat `repeat`'s result into
    /// its carry at the end of each iteration.
    pub(crate) fn carry_purpose(repeat: &str) -> String {
        format!("carry {repeat}")
    }

    /// The purpose of the phase that copies repeat `repeat`'s input into
    /// its carry once, before the first iteration.
    pub(crate) fn enter_purpose(repeat: &str) -> String {
        format!("enter {repeat}")
    }

    /// The purpose of the phase gathering operation `op`'s operands.
    pub(crate) fn gather_purpose(op: &str) -> String {
        format!("op {op}")
    }

    /// The purpose of the phase giving each tile of a segmented layernorm
    /// the statistics of its rows' other segments.
    pub(crate) fn statistics_purpose(op: &str) -> String {
        format!("op {op} statistics")
    }

    /// Every purpose a phase of operation `op` may have.
    pub(crate) fn purposes_of(op: &str) -> [String; 3] {
        [
            Self::gather_purpose(op),
            Self::reduction_purpose(op),
            Self::statistics_purpose(op),
        ]
    }

    /// Every purpose a phase of an operation of `graph` may have, with
    /// that operation.
    pub(crate) fn served_ops(graph: &crate::graph::Graph) -> BTreeMap<String, OpId> {
        let mut served = BTreeMap::new();
        for (i, op) in graph.ops.iter().enumerate() {
            for purpose in Self::purposes_of(&op.name) {
                served.insert(purpose, OpId(i as u32));
            }
        }
        served
    }

    /// The purpose of the phase bringing the partials of a split matrix
    /// product `op` to the tiles that sum them, or a segmented reduction's
    /// to the tile that reduces them.
    pub(crate) fn reduction_purpose(op: &str) -> String {
        format!("op {op} reduction")
    }
}

/// The program's control flow.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Step {
    Compute {
        op: OpId,
        runs: Vec<KernelRun>,
    },
    Exchange(PhaseId),
    /// The body runs `count` times; it is emitted once and looped.
    Repeat {
        repeat: u32,
        count: u32,
        body: Vec<Step>,
    },
}

/// Where a host-visible tensor lives, piece by piece: each buffer with the
/// view that maps its slots to elements of `tensor`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Binding {
    pub tensor: TensorId,
    pub iteration: Option<u32>,
    pub pieces: Vec<(BufferId, View)>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Program {
    pub buffers: Vec<Buffer>,
    pub phases: Vec<ExchangePhase>,
    pub steps: Vec<Step>,
    /// Streamed inputs and preloaded weights.
    pub host_writes: Vec<Binding>,
    /// Outputs read back after a run.
    pub host_reads: Vec<Binding>,
}

impl Program {
    pub(crate) fn buffer(&self, id: BufferId) -> &Buffer {
        &self.buffers[id.0 as usize]
    }

    pub(crate) fn phase(&self, id: PhaseId) -> &ExchangePhase {
        &self.phases[id.0 as usize]
    }

    /// Tiles that hold any buffer, ascending.
    pub(crate) fn tiles(&self) -> Vec<u32> {
        let mut tiles: Vec<u32> = self.buffers.iter().map(|b| b.tile).collect();
        tiles.sort_unstable();
        tiles.dedup();
        tiles
    }

    /// Every kernel run, with repeat bodies once.
    pub(crate) fn kernel_runs(&self) -> Vec<&KernelRun> {
        fn walk<'a>(steps: &'a [Step], out: &mut Vec<&'a KernelRun>) {
            for step in steps {
                match step {
                    Step::Compute { runs, .. } => out.extend(runs),
                    Step::Exchange(_) => {}
                    Step::Repeat { body, .. } => walk(body, out),
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.steps, &mut out);
        out
    }

    /// Stable text dump: steps with their kernels and exchange totals, then
    /// per-tile buffer totals. Used by tests and `--emit shards`.
    pub fn dump(&self, op_names: &dyn Fn(OpId) -> String) -> String {
        let mut out = String::new();
        self.dump_steps(&self.steps, 0, op_names, &mut out);
        let tiles = self.tiles();
        let _ = writeln!(
            out,
            "buffers {} on {} tiles",
            self.buffers.len(),
            tiles.len()
        );
        for tile in tiles.iter().take(4) {
            let bytes: u64 = self
                .buffers
                .iter()
                .filter(|b| b.tile == *tile)
                .map(|b| u64::from(b.bytes()))
                .sum();
            let _ = writeln!(out, "  tile {tile}: {bytes} bytes");
        }
        out
    }

    fn dump_steps(
        &self,
        steps: &[Step],
        depth: usize,
        op_names: &dyn Fn(OpId) -> String,
        out: &mut String,
    ) {
        let indent = "  ".repeat(depth);
        for step in steps {
            match step {
                Step::Compute { op, runs } => {
                    let mut kernels: Vec<String> =
                        runs.iter().map(|r| r.kernel.to_string()).collect();
                    kernels.sort_unstable();
                    kernels.dedup();
                    let tiles: std::collections::BTreeSet<u32> =
                        runs.iter().map(|r| r.tile).collect();
                    let _ = writeln!(
                        out,
                        "{indent}compute {} on {} tiles: {}",
                        op_names(*op),
                        tiles.len(),
                        kernels.join(", ")
                    );
                }
                Step::Exchange(id) => {
                    let phase = self.phase(*id);
                    let bytes: u64 = phase
                        .transfers
                        .iter()
                        .map(|t| u64::from(t.bytes) * t.destinations.len() as u64)
                        .sum();
                    let _ = writeln!(
                        out,
                        "{indent}exchange {} ({}): {} transfers, {} bytes delivered",
                        id.0,
                        phase.label(),
                        phase.transfers.len(),
                        bytes
                    );
                }
                Step::Repeat {
                    repeat,
                    count,
                    body,
                } => {
                    let _ = writeln!(out, "{indent}repeat {repeat} x{count}");
                    self.dump_steps(body, depth + 1, op_names, out);
                }
            }
        }
    }
}
