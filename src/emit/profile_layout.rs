//! The report fields of the package's profile layout: each tile's
//! estimated cycles per compute step, the operation each exchange step
//! serves, and every tile's placement with buffer lifetimes in the `run`
//! call's step numbering.
//!
//! Lowering numbers a program's compute and exchange steps from 1 in
//! program order (a repeat's body once), which is how placement states
//! lifetimes; the package's `run` call holds the same steps in the same
//! order between its host writes and reads, so position `p` is the `p`-th
//! compute or exchange step of the call's pre-order, position 0 is "before
//! the run" and the last position "after it".

use super::steps::ProgramSteps;
use crate::graph::Graph;
use crate::lower::{BufferRole, KernelRun, Program, Step as ProgramStep};
use crate::package::{
    BufferKind, BufferPlace, Call, ExchangeOp, HostCall, Step, StepEstimates, SupportPlace,
    TileMemory,
};
use crate::place::Placement;
use std::collections::BTreeMap;

/// A kernel run's estimated cycles, when its cost formula evaluates.
pub(super) type RunEstimate<'a> = &'a dyn Fn(&KernelRun) -> Option<u64>;

/// The `run` call's pre-order index of every program position.
fn position_steps(run: &HostCall) -> Vec<u32> {
    let preorder = run.preorder();
    let last = preorder.len().saturating_sub(1) as u32;
    let mut positions = vec![0];
    positions.extend(
        preorder
            .iter()
            .enumerate()
            .filter(|(_, s)| matches!(s, Step::Compute { .. } | Step::Exchange { .. }))
            .map(|(i, _)| i as u32),
    );
    positions.push(last);
    positions
}

/// Per compute step (by its id in `steps`), each tile's estimate;
/// `compute_preorder[id]` is the step's pre-order index in the `run` call.
pub(super) fn step_estimates(
    steps: &ProgramSteps,
    compute_preorder: &[u32],
    estimate: RunEstimate<'_>,
) -> Vec<StepEstimates> {
    // (step, tile) to the sum of the tile's runs, unknown if any is.
    let mut cycles: BTreeMap<(u32, u32), Option<u64>> = BTreeMap::new();
    for (&tile, tile_steps) in &steps.tiles {
        for step in tile_steps {
            let entry = cycles.entry((step.step, tile)).or_insert(Some(0));
            for run in &step.runs {
                *entry = entry.zip(estimate(run)).map(|(a, b)| a + b);
            }
        }
    }
    steps
        .steps
        .iter()
        .filter_map(|step| {
            let &preorder = compute_preorder.get(step.id as usize)?;
            Some(StepEstimates {
                call: Call::Run,
                step: preorder,
                tiles: cycles
                    .range((step.id, 0)..=(step.id, u32::MAX))
                    .filter_map(|(&(_, tile), cycles)| Some((tile, (*cycles)?)))
                    .collect(),
            })
        })
        .collect()
}

/// The pre-order index of each compute step of `run`, in order.
pub(super) fn compute_preorder(run: &HostCall) -> Vec<u32> {
    run.preorder()
        .iter()
        .enumerate()
        .filter(|(_, s)| matches!(s, Step::Compute { .. }))
        .map(|(i, _)| i as u32)
        .collect()
}

/// The operation of each exchange step: a phase serves the computation
/// that directly follows it in its step list (an operation's gather or
/// reduction); a phase before a repeat or at the end of its body carries a
/// value and serves no one operation. An operation without a kernel (a
/// `concat`) is its phase alone, named by the phase's purpose. A merged
/// phase (`crate::lower::merge_phases`) serves the first operation its
/// purposes name, as the estimates charge it.
pub(super) fn exchange_ops(graph: &Graph, program: &Program, run: &HostCall) -> Vec<ExchangeOp> {
    fn walk(
        graph: &Graph,
        program: &Program,
        steps: &[ProgramStep],
        position: &mut usize,
        out: &mut Vec<(usize, String)>,
    ) {
        for (i, step) in steps.iter().enumerate() {
            match step {
                ProgramStep::Compute { .. } => *position += 1,
                ProgramStep::Exchange(phase) => {
                    *position += 1;
                    let phase = program.phase(*phase);
                    if let Some(op) = gathered_op(graph, phase).or_else(|| merged_op(graph, phase))
                    {
                        out.push((*position, op));
                    } else if let Some(ProgramStep::Compute { op, .. }) = steps.get(i + 1) {
                        out.push((*position, graph.op(*op).name.clone()));
                    }
                }
                ProgramStep::Repeat { body, .. } => walk(graph, program, body, position, out),
            }
        }
    }
    let positions = position_steps(run);
    let mut found = Vec::new();
    walk(graph, program, &program.steps, &mut 0, &mut found);
    found
        .into_iter()
        .filter_map(|(position, op)| {
            Some(ExchangeOp {
                call: Call::Run,
                step: *positions.get(position)?,
                op,
            })
        })
        .collect()
}

/// The first operation a merged phase's purposes name, if any.
fn merged_op(graph: &Graph, phase: &crate::lower::ExchangePhase) -> Option<String> {
    if phase.merged.is_empty() {
        return None;
    }
    let served = crate::lower::ExchangePhase::served_ops(graph);
    let op = phase.purposes().find_map(|purpose| served.get(purpose))?;
    Some(graph.op(*op).name.clone())
}

/// The operation without a kernel whose gather `phase` is, if any.
fn gathered_op(graph: &Graph, phase: &crate::lower::ExchangePhase) -> Option<String> {
    graph
        .ops
        .iter()
        .find(|op| {
            matches!(op.kind, crate::graph::OpKind::Concat { .. })
                && phase.purpose == crate::lower::ExchangePhase::gather_purpose(&op.name)
        })
        .map(|op| op.name.clone())
}

/// Every tile's placement: support blocks and buffers with what they hold,
/// who writes them and when they are alive.
pub(super) fn tile_memories(
    graph: &Graph,
    program: &Program,
    placement: &Placement,
    run: &HostCall,
) -> Vec<TileMemory> {
    let positions = position_steps(run);
    let step_of = |position: u32| {
        positions
            .get(position as usize)
            .or(positions.last())
            .copied()
            .unwrap_or(0)
    };
    let lifetimes = crate::place::lifetimes(program);
    let writer: BTreeMap<_, _> = graph
        .ops
        .iter()
        .map(|op| (op.output, op.name.clone()))
        .collect();
    placement
        .tiles
        .iter()
        .map(|(&tile, placed)| {
            let mut buffers: Vec<BufferPlace> = placed
                .buffers
                .iter()
                .map(|&(id, address)| {
                    let buffer = program.buffer(id);
                    let (kind, op) = match &buffer.role {
                        BufferRole::Input { .. } => (BufferKind::Input, None),
                        BufferRole::Weight { .. } => (BufferKind::Weight, None),
                        BufferRole::Activation { tensor } => {
                            (BufferKind::Activation, writer.get(tensor).cloned())
                        }
                        BufferRole::Operand { op, .. } => {
                            (BufferKind::Operand, Some(graph.op(*op).name.clone()))
                        }
                        BufferRole::Partial { op, .. } => {
                            (BufferKind::Partial, Some(graph.op(*op).name.clone()))
                        }
                        // The rows a fused operation's first kernel hands
                        // its next are an activation that never leaves the
                        // tile.
                        BufferRole::Intermediate { op } => {
                            (BufferKind::Activation, Some(graph.op(*op).name.clone()))
                        }
                    };
                    let (first, last) = lifetimes[id.0 as usize];
                    BufferPlace {
                        address,
                        bytes: buffer.bytes(),
                        kind,
                        name: crate::place::describe(graph, &buffer.role),
                        op,
                        first_step: step_of(first),
                        last_step: step_of(last),
                    }
                })
                .collect();
            buffers.sort_by_key(|b| (b.address, b.first_step));
            TileMemory {
                tile,
                support: placed
                    .support
                    .iter()
                    .map(|&(kind, address, bytes)| SupportPlace {
                        kind: kind.to_string(),
                        address,
                        bytes,
                    })
                    .collect(),
                buffers,
            }
        })
        .collect()
}
