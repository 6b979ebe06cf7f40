//! Compute steps numbered once, and what each tile does in each.
//!
//! Every `Step::Compute` of the program gets an id in depth-first order; a
//! repeat's body is numbered once (it is emitted once and looped). A tile's
//! supervisor has one routine per compute step it takes part in.

use crate::lower::{KernelRun, OperandRef, Program, Step};
use std::collections::BTreeMap;

/// One compute step as the emitter sees it.
#[derive(Clone, Debug)]
pub struct ComputeStep<'p> {
    pub id: u32,
    pub op: crate::graph::OpId,
    pub runs: &'p [KernelRun],
    /// The repeat the step is inside, with its iteration count.
    pub repeat: Option<(u32, u32)>,
}

/// The compute steps of `program` in depth-first order.
pub fn compute_steps(program: &Program) -> Vec<ComputeStep<'_>> {
    fn walk<'p>(steps: &'p [Step], repeat: Option<(u32, u32)>, out: &mut Vec<ComputeStep<'p>>) {
        for step in steps {
            match step {
                Step::Compute { op, runs } => out.push(ComputeStep {
                    id: out.len() as u32,
                    op: *op,
                    runs,
                    repeat,
                }),
                Step::Exchange(_) => {}
                Step::Repeat {
                    repeat,
                    count,
                    body,
                    ..
                } => walk(body, Some((*repeat, *count)), out),
            }
        }
    }
    let mut out = Vec::new();
    walk(&program.steps, None, &mut out);
    out
}

/// A tile's part in one step: its kernel runs.
#[derive(Clone, Debug)]
pub struct TileStep<'p> {
    pub step: u32,
    pub runs: Vec<&'p KernelRun>,
    pub repeat: Option<(u32, u32)>,
    /// Whether this is the tile's last step in its repeat's body, where it
    /// advances its iteration counter.
    pub advances_counter: bool,
}

impl TileStep<'_> {
    /// Whether any run reads a per-iteration operand.
    pub fn per_iteration(&self) -> bool {
        self.runs.iter().any(|r| run_is_per_iteration(r))
    }
}

pub fn run_is_per_iteration(run: &KernelRun) -> bool {
    run.operands
        .iter()
        .any(|o| matches!(o, OperandRef::PerIteration(_)))
}

/// Every tile's steps, in step order.
pub fn tile_steps<'p>(steps: &[ComputeStep<'p>]) -> BTreeMap<u32, Vec<TileStep<'p>>> {
    let mut by_tile: BTreeMap<u32, Vec<TileStep<'p>>> = BTreeMap::new();
    for step in steps {
        let mut runs: BTreeMap<u32, Vec<&'p KernelRun>> = BTreeMap::new();
        for run in step.runs {
            runs.entry(run.tile).or_default().push(run);
        }
        for (tile, runs) in runs {
            by_tile.entry(tile).or_default().push(TileStep {
                step: step.id,
                runs,
                repeat: step.repeat,
                advances_counter: false,
            });
        }
    }
    // A tile that reads per-iteration operands in a repeat keeps a counter;
    // it advances it at the end of its last step in that repeat's body.
    for steps in by_tile.values_mut() {
        let repeats: Vec<u32> = steps
            .iter()
            .filter(|s| s.per_iteration())
            .filter_map(|s| s.repeat.map(|(r, _)| r))
            .collect();
        for repeat in repeats {
            if let Some(last) = steps
                .iter_mut()
                .rev()
                .find(|s| s.repeat.map(|(r, _)| r) == Some(repeat))
            {
                last.advances_counter = true;
            }
        }
    }
    by_tile
}
