//! Fusion: operations the device can do in one compute step, merged into
//! one operation the planner plans, lowering lowers and the profile reports
//! as a unit.
//!
//! The pass runs on the legalized graph ([`crate::legalize`]) and folds a
//! cast to FP8 into the operation that produces its f16 input (a row-wise
//! `layernorm`, `softmax`, `gelu` or `add`, or a `matmul`): the fused
//! operation keeps the producer's kind and inputs and writes the cast's
//! FP8 result, and is named for both (`ln1+ln1_f8`). GELU and layernorm
//! run a kernel variant that stores FP8 in the same pass; softmax, add and
//! the matrix product (its GEMM, or the reduction of a split K) run their
//! kernel into a tile-local f16 buffer and the cast's kernel after it, in
//! the same compute step (`partition::cast_epilogue`). Either way the
//! bytes are those of the unfused graph, and the cast's own step is gone.
//!
//! A pair fuses only when the f16 intermediate has no other reader, is not
//! an output the host reads back, and both operations are in the same
//! repeat scope (both in one repeat body, or both outside any). The
//! intermediate tensor keeps its id (no operation produces it any more),
//! so bindings and the host reference, which evaluates the unfused graph,
//! still line up.

use crate::graph::{DType, Graph, OpId, OpKind, TensorId};
use std::fmt::Write as _;

/// One fused operation of the fused graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FusedOp {
    /// The fused operation in [`Fusion::graph`].
    pub op: OpId,
    /// The tensor between the producer and the cast it merges, which no
    /// operation materialises any more.
    pub intermediate: TensorId,
}

/// The fused graph and what fusion merged.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Fusion {
    pub graph: Graph,
    pub fused: Vec<FusedOp>,
}

impl Fusion {
    /// Text dump for `ipub build --emit fusion`: each fused operation with
    /// the operations it merges and the intermediate it removes, then the
    /// count.
    pub(crate) fn dump(&self) -> String {
        let mut out = String::new();
        for fused in &self.fused {
            let op = self.graph.op(fused.op);
            let intermediate = self.graph.tensor(fused.intermediate);
            let output = self.graph.tensor(op.output);
            let _ = writeln!(
                out,
                "{}: {} -> cast, {}{:?} not materialised, writes {}{:?}{}",
                op.name,
                op.kind.name(),
                intermediate.name,
                intermediate.shape,
                output.dtype,
                output.shape,
                if output.dtype.is_fp8() {
                    format!("*2^{}", output.scale)
                } else {
                    String::new()
                },
            );
        }
        let _ = writeln!(
            out,
            "{} fused operations, {} operations left",
            self.fused.len(),
            self.graph.ops.len()
        );
        out
    }
}

/// Whether `kind` is a row-wise producer whose kernel's f16 rows a cast to
/// FP8 can follow on the same tile.
fn casts_fold_into(kind: &OpKind) -> bool {
    matches!(
        kind,
        OpKind::Layernorm { .. } | OpKind::Softmax { .. } | OpKind::Gelu | OpKind::Add
    )
}

/// Fuses `graph`: every producer/cast pair that may fuse becomes one
/// operation at the producer's place. A graph with nothing to fuse comes
/// back equal.
pub(crate) fn fuse(graph: &Graph) -> Fusion {
    let readers = reader_counts(graph);
    let scope = scopes(graph);
    // The producer of each tensor, by op index.
    let mut producer = vec![None; graph.tensors.len()];
    for (i, op) in graph.ops.iter().enumerate() {
        producer[op.output.0 as usize] = Some(i);
    }
    // For each producer index, the index of the cast folded into it.
    let mut folded: Vec<Option<usize>> = vec![None; graph.ops.len()];
    let mut removed = vec![false; graph.ops.len()];
    for (i, op) in graph.ops.iter().enumerate() {
        if !matches!(op.kind, OpKind::Cast) || !graph.tensor(op.output).dtype.is_fp8() {
            continue;
        }
        let input = op.inputs[0];
        let Some(p) = producer[input.0 as usize] else {
            continue;
        };
        let source = &graph.ops[p];
        let f16 = |t: TensorId| graph.tensor(t).dtype == DType::F16;
        // A matrix product's f16 result is rounded by its kernel (or the
        // reduction of a split K) whatever its inputs; the row kernels
        // take f16 rows.
        let producer_fits = match source.kind {
            OpKind::Matmul { .. } => true,
            ref kind => casts_fold_into(kind) && f16(source.inputs[0]),
        };
        if producer_fits
            && f16(source.output)
            && readers[input.0 as usize] == 1
            && scope[p] == scope[i]
            && folded[p].is_none()
        {
            folded[p] = Some(i);
            removed[i] = true;
        }
    }
    let mut fused_graph = graph.clone();
    fused_graph.ops.clear();
    let mut renumbered = vec![None; graph.ops.len()];
    let mut fused = Vec::new();
    for (i, op) in graph.ops.iter().enumerate() {
        if removed[i] {
            continue;
        }
        let id = OpId(fused_graph.ops.len() as u32);
        renumbered[i] = Some(id);
        let mut op = op.clone();
        if let Some(c) = folded[i] {
            let cast = &graph.ops[c];
            fused.push(FusedOp {
                op: id,
                intermediate: op.output,
            });
            op.name = format!("{}+{}", op.name, cast.name);
            op.output = cast.output;
        }
        fused_graph.ops.push(op);
    }
    for repeat in &mut fused_graph.repeats {
        repeat.body = repeat
            .body
            .iter()
            .filter_map(|op| renumbered.get(op.0 as usize).copied().flatten())
            .collect();
    }
    Fusion {
        graph: fused_graph,
        fused,
    }
}

/// How many times each tensor is read: as an operation's input, as an
/// output the host reads back, or by a repeat (its start, its carried
/// result, its result). A tensor read twice by one operation counts twice.
fn reader_counts(graph: &Graph) -> Vec<usize> {
    let mut readers = vec![0usize; graph.tensors.len()];
    let mut read = |t: TensorId| {
        if let Some(n) = readers.get_mut(t.0 as usize) {
            *n += 1;
        }
    };
    for op in &graph.ops {
        op.inputs.iter().copied().for_each(&mut read);
    }
    for &t in graph.outputs.iter().chain(&graph.check.outputs) {
        read(t);
    }
    for repeat in &graph.repeats {
        for t in [
            repeat.init,
            repeat.carry_in,
            repeat.carry_out,
            repeat.output,
        ] {
            read(t);
        }
    }
    readers
}

/// The repeat each operation is in (`None` outside any), by op index.
fn scopes(graph: &Graph) -> Vec<Option<usize>> {
    let mut scope = vec![None; graph.ops.len()];
    for (r, repeat) in graph.repeats.iter().enumerate() {
        for op in &repeat.body {
            if let Some(s) = scope.get_mut(op.0 as usize) {
                *s = Some(r);
            }
        }
    }
    scope
}

#[cfg(test)]
mod tests;
