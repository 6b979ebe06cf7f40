//! Fusion: operations the device can do in one compute step, merged into
//! one operation the planner plans, lowering lowers and the profile reports
//! as a unit.
//!
//! The pass runs on the legalized graph ([`crate::legalize`]) and merges
//! three kinds of pairs, each a producer and the one operation that reads
//! its f16 result:
//!
//! - an elementwise `add`, `mul`, `gelu`, `silu` or `gelu_tanh` of f16
//!   after a `matmul` joins the product's epilogue (`OpKind::Matmul`'s
//!   `epilogue`, the other operand of a binary step an extra input): each
//!   tile that keeps a piece of the product's result runs the steps' kernels
//!   over that piece in the step that writes it
//!   (`partition::epilogue_kernels`), so the result never crosses the
//!   exchange between them and the steps' own syncs are gone. The other
//!   operand must exist at the product's place (made before it), the
//!   product's shape must be the result's, and the pipeline's cost model
//!   must find the merged plan no slower than the two apart ([`fuse_with`]):
//!   an epilogue runs on the product's tiles, which may be fewer than the
//!   operation alone would spread over;
//! - an `add` of f16 operands followed by a `gelu` (a bias add before the
//!   activation) becomes a `gelu` of the add's two operands, whose kernel
//!   adds them, rounds the sum to f16 as `add_f16` stores it, and applies
//!   the GELU in the same pass (`device/gelu_f16.S` with `ADD`);
//! - a cast to FP8 folds into the operation that produces its f16 input (a
//!   row-wise `layernorm`, `softmax`, `gelu` or `add`, or a `matmul`). GELU
//!   and layernorm run a kernel variant that stores FP8 in the same pass;
//!   softmax, add and the matrix product (its GEMM, or the reduction of a
//!   split K) run their kernel into a tile-local f16 buffer and the cast's
//!   kernel after it, in the same compute step
//!   (`partition::cast_epilogue`). A cast reached from such a producer
//!   through transposes and reshapes first moves before them
//!   ([`views`]): the views then carry FP8, and the cast folds as above.
//!
//! Pairs chain: `fc1`, `fc1_bias`, `gelu` and `gelu_f8` become one
//! operation, `fc1+fc1_bias+gelu+gelu_f8`, at the first one's place, with
//! the first one's inputs (and the epilogue's extra ones) and the last one's
//! result. Either way the bytes are those of the
//! unfused graph, and the merged operations' own steps are gone.
//!
//! A pair fuses only when the f16 intermediate has no other reader, is not
//! an output the host reads back, and both operations are in the same
//! repeat scope (both in one repeat body, or both outside any). The
//! intermediate tensors keep their ids (no operation produces them any
//! more), so bindings and the host reference, which evaluates the unfused
//! graph, still line up; the FP8 results of views a cast moved before are
//! new tensors after them.

use crate::graph::{DType, EpilogueStep, Graph, Op, OpId, OpKind, TensorId};
use std::fmt::Write as _;

/// One fused operation of the fused graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FusedOp {
    /// The fused operation in [`Fusion::graph`].
    pub op: OpId,
    /// The kinds of the operations it merges, in order (`add`, `gelu`,
    /// `cast`).
    pub merged: Vec<&'static str>,
    /// The tensors between the merged operations, which no operation
    /// materialises any more.
    pub intermediates: Vec<TensorId>,
}

/// The fused graph and what fusion merged.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Fusion {
    pub graph: Graph,
    pub fused: Vec<FusedOp>,
}

impl Fusion {
    /// Text dump for `ipub build --emit fusion`: each fused operation with
    /// the operations it merges and the intermediates it removes, then the
    /// count.
    pub(crate) fn dump(&self) -> String {
        let mut out = String::new();
        for fused in &self.fused {
            let op = self.graph.op(fused.op);
            let intermediates: Vec<String> = fused
                .intermediates
                .iter()
                .map(|&t| {
                    let t = self.graph.tensor(t);
                    format!("{}{:?}", t.name, t.shape)
                })
                .collect();
            let output = self.graph.tensor(op.output);
            let _ = writeln!(
                out,
                "{}: {}, {} not materialised, writes {}{:?}{}",
                op.name,
                fused.merged.join(" -> "),
                intermediates.join(", "),
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

/// Whether a cast to FP8 of `op`'s result folds into `op`: a matrix
/// product's f16 result is rounded by its kernel (or the reduction of a
/// split K) whatever its inputs; the row kernels take f16 rows.
fn takes_cast(graph: &Graph, op: &Op) -> bool {
    let f16 = |t: TensorId| graph.tensor(t).dtype == DType::F16;
    f16(op.output)
        && match op.kind {
            OpKind::Matmul { .. } => true,
            ref kind => casts_fold_into(kind) && f16(op.inputs[0]),
        }
}

/// A chain of merged operations: the operation it has become so far, and
/// what it merged.
struct Chain {
    op: Op,
    merged: Vec<&'static str>,
    intermediates: Vec<TensorId>,
}

/// Whether a matrix product whose epilogue could absorb an elementwise
/// operation should: given the product as it stands, the operation, and
/// the product with it merged.
pub(crate) type Worthwhile<'a> = &'a dyn Fn(&Op, &Op, &Op) -> bool;

/// The operation `chain` becomes when it absorbs `consumer`, the one
/// reader of its f16 result, whose other inputs are `others`, or `None`
/// when the pair does not fuse.
fn absorb(
    graph: &Graph,
    chain: &Chain,
    consumer: &Op,
    others: &[TensorId],
    worthwhile: Worthwhile,
) -> Option<Op> {
    let f16 = |t: TensorId| graph.tensor(t).dtype == DType::F16;
    let producer = &chain.op;
    if !f16(producer.output) {
        return None;
    }
    // The merged operation keeps the chain's inputs (and an epilogue's
    // extra operand after them) and writes the consumer's result.
    let fused = |kind: OpKind| Op {
        name: format!("{}+{}", producer.name, consumer.name),
        kind,
        inputs: producer.inputs.iter().chain(others).copied().collect(),
        output: consumer.output,
    };
    if let OpKind::Matmul {
        transpose_rhs,
        epilogue,
    } = &producer.kind
    {
        // An elementwise step of the product's epilogue: f16 in and out,
        // at the product's shape (an extra operand broadcasts to it, never
        // the other way round).
        if let Some(step) = EpilogueStep::of(&consumer.kind) {
            let same_shape =
                graph.tensor(consumer.output).shape == graph.tensor(producer.output).shape;
            let fits = step.is_binary() == (others.len() == 1)
                && others.iter().all(|&t| f16(t))
                && f16(consumer.output)
                && same_shape;
            return fits
                .then(|| {
                    fused(OpKind::Matmul {
                        transpose_rhs: *transpose_rhs,
                        epilogue: epilogue.iter().copied().chain([step]).collect(),
                    })
                })
                .filter(|merged| worthwhile(producer, consumer, merged));
        }
    }
    if !others.is_empty() {
        return None;
    }
    match consumer.kind {
        OpKind::Cast if graph.tensor(consumer.output).dtype.is_fp8() => {
            takes_cast(graph, producer).then(|| fused(producer.kind.clone()))
        }
        // An add of two f16 operands, not merged with anything yet, into
        // the GELU of its sum.
        OpKind::Gelu
            if matches!(producer.kind, OpKind::Add)
                && chain.merged.len() == 1
                && producer.inputs.iter().all(|&t| f16(t))
                && f16(consumer.output) =>
        {
            Some(fused(OpKind::Gelu))
        }
        _ => None,
    }
}

/// Fuses `graph`: every pair that may fuse becomes one operation at the
/// producer's place, chains of pairs one operation at the first one's
/// place. A graph with nothing to fuse comes back equal.
#[cfg(test)]
pub(crate) fn fuse(graph: &Graph) -> Fusion {
    fuse_with(graph, &|_, _, _| true)
}

/// [`fuse`], with a matrix product's epilogue absorbing an elementwise
/// operation only when `worthwhile` says so (the pipeline asks the cost
/// model: an epilogue runs on the tiles of the product's plan, which may
/// be fewer than the operation alone would spread over).
pub(crate) fn fuse_with(graph: &Graph, worthwhile: Worthwhile) -> Fusion {
    let scope = scopes(graph);
    let (moved, unproduced) =
        views::casts_before_views(graph, &reader_counts(graph), &scope, &|op| {
            takes_cast(graph, op)
        });
    let graph = &moved;
    let readers = reader_counts(graph);
    // The producer of each tensor, by op index.
    let mut producer = vec![None; graph.tensors.len()];
    for (i, op) in graph.ops.iter().enumerate() {
        producer[op.output.0 as usize] = Some(i);
    }
    // Each operation's chain, at the index of its first operation; `None`
    // for an operation merged into an earlier one, whose chain `root`
    // names.
    let mut chains: Vec<Option<Chain>> = graph
        .ops
        .iter()
        .map(|op| {
            Some(Chain {
                op: op.clone(),
                merged: vec![op.kind.name()],
                intermediates: Vec::new(),
            })
        })
        .collect();
    let mut root: Vec<usize> = (0..graph.ops.len()).collect();
    for (i, op) in graph.ops.iter().enumerate() {
        // The operation joins the chain of one of its inputs; the merged
        // operation sits at the chain's place, so every other input must
        // be there already (made by an earlier operation, or none).
        for (slot, &input) in op.inputs.iter().enumerate() {
            let Some(p) = producer[input.0 as usize] else {
                continue;
            };
            let r = root[p];
            let Some(chain) = chains[r].as_ref() else {
                continue;
            };
            if chain.op.output != input || readers[input.0 as usize] != 1 || scope[r] != scope[i] {
                continue;
            }
            let others: Vec<TensorId> = (op.inputs.iter().enumerate())
                .filter(|&(s, _)| s != slot)
                .map(|(_, &t)| t)
                .collect();
            let before = |t: &TensorId| producer[t.0 as usize].is_none_or(|q| root[q] < r);
            if !others.iter().all(before) {
                continue;
            }
            let Some(merged) = absorb(graph, chain, op, &others, worthwhile) else {
                continue;
            };
            let chain = chains[r].as_mut().expect("the chain exists");
            chain.op = merged;
            chain.merged.push(op.kind.name());
            chain.intermediates.push(input);
            chain.intermediates.extend_from_slice(&unproduced[i]);
            chains[i] = None;
            root[i] = r;
            break;
        }
    }
    let mut fused_graph = graph.clone();
    fused_graph.ops.clear();
    let mut renumbered = vec![None; graph.ops.len()];
    let mut fused = Vec::new();
    for (i, chain) in chains.into_iter().enumerate() {
        let Some(chain) = chain else {
            continue;
        };
        let id = OpId(fused_graph.ops.len() as u32);
        renumbered[i] = Some(id);
        if !chain.intermediates.is_empty() {
            fused.push(FusedOp {
                op: id,
                merged: chain.merged,
                intermediates: chain.intermediates,
            });
        }
        fused_graph.ops.push(chain.op);
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
mod views;
