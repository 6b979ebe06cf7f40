//! Merging exchange phases that do not depend on each other. Every phase
//! costs a sync; when a later phase needs nothing that the compute steps
//! after an earlier one write, the steps it does need move up before the
//! earlier phase, the two phases run as one, and one sync goes.
//!
//! The dependencies are the buffers each step reads and writes: a kernel
//! run reads its inputs and writes its output, a transfer reads its source
//! and writes its destinations. Two steps keep their order when one
//! writes a buffer the other reads or writes. A repeat is a wall: nothing
//! moves into, out of or across one, and its body is merged on its own.
//!
//! Moving compute steps changes no step's work, only which sync it follows,
//! so a merged program runs the same kernels and moves the same bytes as
//! the one it came from.

use super::program::{ExchangePhase, OperandRef, PhaseId, Program, Step};
use super::BufferId;
use std::collections::BTreeSet;

/// The buffers a step reads and writes.
#[derive(Default)]
struct Access {
    reads: BTreeSet<BufferId>,
    writes: BTreeSet<BufferId>,
}

impl Access {
    fn of(program: &Program, step: &Step) -> Access {
        let mut access = Access::default();
        match step {
            Step::Compute { runs, .. } => {
                for run in runs {
                    let Some((output, inputs)) = run.operands.split_last() else {
                        continue;
                    };
                    for operand in inputs {
                        access.reads.extend(buffers(operand));
                    }
                    access.writes.extend(buffers(output));
                }
            }
            Step::Exchange(phase) => {
                for transfer in &program.phase(*phase).transfers {
                    access.reads.insert(transfer.source);
                    access
                        .writes
                        .extend(transfer.destinations.iter().map(|&(buffer, _)| buffer));
                }
            }
            Step::Repeat { .. } => {}
        }
        access
    }

    /// Whether the two steps must keep their order.
    fn conflicts(&self, other: &Access) -> bool {
        !self.writes.is_disjoint(&other.reads)
            || !self.writes.is_disjoint(&other.writes)
            || !self.reads.is_disjoint(&other.writes)
    }
}

fn buffers(operand: &OperandRef) -> Vec<BufferId> {
    match operand {
        OperandRef::Buffer(id) => vec![*id],
        OperandRef::PerIteration(ids) => ids.clone(),
    }
}

/// Merges what phases it can in `program`, then numbers the phases left in
/// the order the steps first name them.
pub(crate) fn merge_phases(program: &mut Program) {
    let steps = std::mem::take(&mut program.steps);
    program.steps = merge_steps(program, steps);
    renumber(program);
}

fn merge_steps(program: &mut Program, steps: Vec<Step>) -> Vec<Step> {
    let mut steps: Vec<Step> = steps
        .into_iter()
        .map(|step| match step {
            Step::Repeat {
                repeat,
                count,
                body,
            } => Step::Repeat {
                repeat,
                count,
                body: merge_steps(program, body),
            },
            step => step,
        })
        .collect();
    let mut at = 0;
    while at < steps.len() {
        let Step::Exchange(first) = steps[at] else {
            at += 1;
            continue;
        };
        let Some(next) = (at + 1..steps.len()).find(|&i| !matches!(steps[i], Step::Compute { .. }))
        else {
            break;
        };
        let Step::Exchange(second) = steps[next] else {
            at = next;
            continue;
        };
        match hoisted(program, &steps[at..=next]) {
            Some(hoisted) => {
                // The steps the second phase needs go first, then the
                // merged phase, then the rest in their order.
                let between: Vec<Step> = steps.drain(at + 1..=next).collect();
                let (mut early, mut late) = (Vec::new(), Vec::new());
                for (i, step) in between.into_iter().enumerate() {
                    if hoisted.contains(&i) {
                        early.push(step);
                    } else if !matches!(step, Step::Exchange(_)) {
                        late.push(step);
                    }
                }
                join(program, first, second);
                let phase_at = at + early.len();
                steps.splice(at..=at, early.into_iter().chain([Step::Exchange(first)]));
                steps.splice(phase_at + 1..phase_at + 1, late);
                // The merged phase may take in the next one too.
                at = phase_at;
            }
            None => at = next,
        }
    }
    steps
}

/// For a window of a phase, compute steps and a second phase: the indices
/// (counted after the first phase) of the compute steps that must run
/// before the second phase, when they can all move up before the first
/// and the two phases can run as one; `None` when they cannot.
fn hoisted(program: &Program, window: &[Step]) -> Option<BTreeSet<usize>> {
    let accesses: Vec<Access> = window.iter().map(|s| Access::of(program, s)).collect();
    let (first, rest) = accesses.split_first()?;
    let (second, between) = rest.split_last()?;
    if first.conflicts(second) {
        return None;
    }
    // What the second phase needs, and what those steps need in turn,
    // walking back.
    let mut needed = BTreeSet::new();
    for i in (0..between.len()).rev() {
        let needs = |later: &Access| between[i].conflicts(later);
        if needs(second) || needed.iter().any(|&j| needs(&between[j])) {
            needed.insert(i);
        }
    }
    needed
        .iter()
        .all(|&i| !first.conflicts(&between[i]))
        .then_some(needed)
}

/// Appends phase `second`'s transfers to phase `first`'s, noting where
/// they start and what they were for; `second` is left empty.
fn join(program: &mut Program, first: PhaseId, second: PhaseId) {
    let taken = std::mem::take(&mut program.phases[second.0 as usize]);
    let phase = &mut program.phases[first.0 as usize];
    phase
        .merged
        .push((taken.purpose, phase.transfers.len() as u32));
    phase.merged.extend(
        taken
            .merged
            .into_iter()
            .map(|(purpose, start)| (purpose, start + phase.transfers.len() as u32)),
    );
    phase.transfers.extend(taken.transfers);
}

/// Keeps the phases the steps name, numbered in the order they first
/// appear.
fn renumber(program: &mut Program) {
    fn walk(steps: &mut [Step], old: &mut Vec<ExchangePhase>, new: &mut Vec<ExchangePhase>) {
        for step in steps {
            match step {
                Step::Exchange(id) => {
                    new.push(std::mem::take(&mut old[id.0 as usize]));
                    *id = PhaseId(new.len() as u32 - 1);
                }
                Step::Repeat { body, .. } => walk(body, old, new),
                Step::Compute { .. } => {}
            }
        }
    }
    let mut old = std::mem::take(&mut program.phases);
    let mut new = Vec::with_capacity(old.len());
    walk(&mut program.steps, &mut old, &mut new);
    program.phases = new;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{DType, OpId, TensorId};
    use crate::lower::layout::Piece;
    use crate::lower::{Buffer, BufferRole, KernelRun, Transfer};
    use crate::partition::{KernelId, MemoryClass};

    /// A program of `buffers` one-word buffers on tile 0 and the given
    /// phases, each `(purpose, [(source, destination)])`.
    fn program(buffers: u32, phases: &[(&str, &[(u32, u32)])]) -> Program {
        let buffer = Buffer {
            tile: 0,
            dtype: DType::F16,
            piece: Piece::row_major(vec![0], vec![2]),
            coordinates: vec![2],
            class: MemoryClass::Standard,
            role: BufferRole::Activation {
                tensor: TensorId(0),
            },
        };
        Program {
            buffers: vec![buffer; buffers as usize],
            phases: phases
                .iter()
                .map(|(purpose, transfers)| ExchangePhase {
                    purpose: purpose.to_string(),
                    transfers: transfers
                        .iter()
                        .map(|&(source, destination)| Transfer {
                            source: BufferId(source),
                            source_offset: 0,
                            bytes: 4,
                            destinations: vec![(BufferId(destination), 0)],
                        })
                        .collect(),
                    merged: Vec::new(),
                })
                .collect(),
            ..Program::default()
        }
    }

    /// Operation `op` reading `inputs` and writing `output`.
    fn compute(op: u32, inputs: &[u32], output: u32) -> Step {
        let operands = inputs
            .iter()
            .chain([&output])
            .map(|&b| OperandRef::Buffer(BufferId(b)))
            .collect();
        Step::Compute {
            op: OpId(op),
            runs: vec![KernelRun {
                tile: 0,
                kernel: KernelId::Add { dtype: DType::F16 },
                operands,
                params: Vec::new(),
            }],
        }
    }

    /// The steps as text: `c<op>` and `x<purposes>`.
    fn shape(program: &Program, steps: &[Step]) -> Vec<String> {
        steps
            .iter()
            .map(|step| match step {
                Step::Compute { op, .. } => format!("c{}", op.0),
                Step::Exchange(id) => format!("x{}", program.phase(*id).label()),
                Step::Repeat { body, .. } => format!("r[{}]", shape(program, body).join(" ")),
            })
            .collect()
    }

    #[test]
    fn independent_reductions_merge_and_their_products_move_up() {
        // Three split products (partials 0, 1, 2), each reduced from what
        // its phase brings (3, 4, 5) into its result (6, 7, 8).
        let mut program = program(9, &[("q", &[(0, 3)]), ("k", &[(1, 4)]), ("v", &[(2, 5)])]);
        program.steps = vec![
            compute(0, &[], 0),
            Step::Exchange(PhaseId(0)),
            compute(1, &[3], 6),
            compute(2, &[], 1),
            Step::Exchange(PhaseId(1)),
            compute(3, &[4], 7),
            compute(4, &[], 2),
            Step::Exchange(PhaseId(2)),
            compute(5, &[5], 8),
        ];
        merge_phases(&mut program);
        assert_eq!(
            shape(&program, &program.steps),
            ["c0", "c2", "c4", "xq, k, v", "c1", "c3", "c5"]
        );
        assert_eq!(program.phases.len(), 1);
        let phase = &program.phases[0];
        assert_eq!(phase.merged, [("k".to_string(), 1), ("v".to_string(), 2)]);
        let parts: Vec<(&str, usize)> = phase.parts().iter().map(|(p, t)| (*p, t.len())).collect();
        assert_eq!(parts, [("q", 1), ("k", 1), ("v", 1)]);
    }

    #[test]
    fn a_phase_that_reads_what_follows_the_one_before_it_waits() {
        // The second phase sends what the step after the first computes
        // from the first's delivery: nothing can merge.
        let mut program = program(4, &[("a", &[(0, 1)]), ("b", &[(2, 3)])]);
        program.steps = vec![
            Step::Exchange(PhaseId(0)),
            compute(0, &[1], 2),
            Step::Exchange(PhaseId(1)),
            compute(1, &[3], 0),
        ];
        let before = program.clone();
        merge_phases(&mut program);
        assert_eq!(program, before);
    }

    #[test]
    fn phases_writing_what_the_other_reads_or_writes_stay_apart() {
        // The second overwrites the first's destination, then the second
        // reads what the first writes.
        for second in [&[(2, 1)][..], &[(1, 3)]] {
            let mut program = program(4, &[("a", &[(0, 1)]), ("b", second)]);
            program.steps = vec![Step::Exchange(PhaseId(0)), Step::Exchange(PhaseId(1))];
            let before = program.clone();
            merge_phases(&mut program);
            assert_eq!(program, before);
        }
    }

    #[test]
    fn a_step_the_first_phase_feeds_cannot_move_above_it() {
        // The second phase needs step 1, which reads what the first phase
        // delivers.
        let mut program = program(5, &[("a", &[(0, 1)]), ("b", &[(2, 3)])]);
        program.steps = vec![
            Step::Exchange(PhaseId(0)),
            compute(1, &[1], 2),
            Step::Exchange(PhaseId(1)),
            compute(2, &[3], 4),
        ];
        let before = program.clone();
        merge_phases(&mut program);
        assert_eq!(program, before);
    }

    #[test]
    fn steps_the_second_phase_needs_bring_what_they_need_along() {
        // Step 2 (needed by phase b) reads what step 1 writes, so step 1
        // moves up too; step 3 stays after the merged phase.
        let mut program = program(8, &[("a", &[(0, 1)]), ("b", &[(3, 4)])]);
        program.steps = vec![
            Step::Exchange(PhaseId(0)),
            compute(3, &[1], 5),
            compute(1, &[], 2),
            compute(2, &[2], 3),
            Step::Exchange(PhaseId(1)),
            compute(4, &[4], 6),
        ];
        merge_phases(&mut program);
        assert_eq!(
            shape(&program, &program.steps),
            ["c1", "c2", "xa, b", "c3", "c4"]
        );
    }

    #[test]
    fn repeats_are_walls_and_their_bodies_merge_on_their_own() {
        let mut program = program(8, &[("a", &[(0, 1)]), ("b", &[(2, 3)]), ("c", &[(4, 5)])]);
        program.steps = vec![
            Step::Exchange(PhaseId(0)),
            Step::Repeat {
                repeat: 0,
                count: 2,
                body: vec![
                    Step::Exchange(PhaseId(1)),
                    compute(0, &[3], 6),
                    Step::Exchange(PhaseId(2)),
                    compute(1, &[5], 7),
                ],
            },
        ];
        merge_phases(&mut program);
        assert_eq!(shape(&program, &program.steps), ["xa", "r[xb, c c0 c1]"]);
        assert_eq!(program.phases.len(), 2);
    }
}
