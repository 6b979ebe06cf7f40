//! Compute steps numbered once, and what each tile does in each.
//!
//! [`ProgramSteps::of`] walks the program once: every `Step::Compute` gets
//! an id in depth-first order, and a repeat's body is numbered once (it is
//! emitted once and looped). That numbering is the only one: placement
//! sizes each tile's supervisor from its [`TileStep`]s, emission gives each
//! of them a routine, and the package and its profile layout name compute
//! steps by the same ids (the pipeline serves it as one query,
//! `pipeline::program_steps`).

use crate::graph::OpId;
use crate::lower::{KernelRun, OperandRef, Program, Step};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One compute step of the program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ComputeStep {
    pub id: u32,
    pub op: OpId,
    /// The repeat the step is inside, with its iteration count.
    pub repeat: Option<(u32, u32)>,
}

/// A tile's part in one compute step: its kernel runs, in program order.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct TileStep {
    pub step: u32,
    pub runs: Vec<KernelRun>,
    pub repeat: Option<(u32, u32)>,
    /// Whether this is the tile's last step in its repeat's body, where it
    /// advances its iteration counter.
    pub advances_counter: bool,
}

impl TileStep {
    /// Whether any run reads a per-iteration operand.
    pub(super) fn per_iteration(&self) -> bool {
        self.runs.iter().any(run_is_per_iteration)
    }
}

pub(super) fn run_is_per_iteration(run: &KernelRun) -> bool {
    run.operands
        .iter()
        .any(|o| matches!(o, OperandRef::PerIteration(_)))
}

/// The program's compute steps and every tile's part in them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ProgramSteps {
    /// Indexed by id.
    pub steps: Vec<ComputeStep>,
    /// Every tile's steps, in step order.
    pub tiles: BTreeMap<u32, Vec<TileStep>>,
}

impl ProgramSteps {
    /// Numbers the compute steps of `program`.
    pub(crate) fn of(program: &Program) -> ProgramSteps {
        let mut numbered = ProgramSteps::default();
        numbered.walk(&program.steps, None);
        numbered.mark_counter_advances();
        numbered
    }

    fn walk(&mut self, steps: &[Step], repeat: Option<(u32, u32)>) {
        for step in steps {
            match step {
                Step::Compute { op, runs } => {
                    let id = self.steps.len() as u32;
                    self.steps.push(ComputeStep {
                        id,
                        op: *op,
                        repeat,
                    });
                    let mut by_tile: BTreeMap<u32, Vec<KernelRun>> = BTreeMap::new();
                    for run in runs {
                        by_tile.entry(run.tile).or_default().push(run.clone());
                    }
                    for (tile, runs) in by_tile {
                        self.tiles.entry(tile).or_default().push(TileStep {
                            step: id,
                            runs,
                            repeat,
                            advances_counter: false,
                        });
                    }
                }
                Step::Exchange(_) => {}
                Step::Repeat {
                    repeat,
                    count,
                    body,
                    ..
                } => self.walk(body, Some((*repeat, *count))),
            }
        }
    }

    /// A tile that reads per-iteration operands in a repeat keeps a
    /// counter; it advances it at the end of its last step in that
    /// repeat's body.
    fn mark_counter_advances(&mut self) {
        for steps in self.tiles.values_mut() {
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
    }

    /// A tile's steps (none for a tile that runs no kernel).
    pub(crate) fn tile(&self, tile: u32) -> &[TileStep] {
        self.tiles.get(&tile).map_or(&[], Vec::as_slice)
    }
}
