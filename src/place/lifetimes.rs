//! Buffer lifetimes: the step positions during which a buffer must keep
//! its contents, from the program's step sequence (repeats included).

use crate::lower::{BufferId, BufferRole, OperandRef, Program, Step};

/// Inclusive range of step positions during which a buffer must keep its
/// contents.
pub(super) type Lifetime = (u32, u32);

/// Computes every buffer's lifetime from the step sequence.
pub(crate) fn lifetimes(program: &Program) -> Vec<Lifetime> {
    #[derive(Clone, Copy)]
    struct Touches {
        first: u32,
        last: u32,
    }
    let mut touches: Vec<Option<Touches>> = vec![None; program.buffers.len()];
    let mut first_is_read: Vec<Vec<(u32, u32, bool)>> = vec![Vec::new(); program.buffers.len()];
    let mut repeats: Vec<(u32, u32)> = Vec::new();
    let mut position = 1u32;

    fn touch(
        touches: &mut [Option<Touches>],
        log: &mut [Vec<(u32, u32, bool)>],
        id: BufferId,
        at: u32,
        write: bool,
    ) {
        let t = touches[id.0 as usize].get_or_insert(Touches {
            first: at,
            last: at,
        });
        t.first = t.first.min(at);
        t.last = t.last.max(at);
        log[id.0 as usize].push((at, at, write));
    }

    fn walk(
        program: &Program,
        steps: &[Step],
        position: &mut u32,
        touches: &mut [Option<Touches>],
        log: &mut [Vec<(u32, u32, bool)>],
        repeats: &mut Vec<(u32, u32)>,
    ) {
        for step in steps {
            match step {
                Step::Compute { runs, .. } => {
                    for run in runs {
                        let last = run.operands.len() - 1;
                        for (i, operand) in run.operands.iter().enumerate() {
                            let ids: Vec<BufferId> = match operand {
                                OperandRef::Buffer(id) => vec![*id],
                                OperandRef::PerIteration(ids) => ids.clone(),
                            };
                            for id in ids {
                                touch(touches, log, id, *position, i == last);
                            }
                        }
                    }
                    *position += 1;
                }
                Step::Exchange(phase) => {
                    for transfer in &program.phase(*phase).transfers {
                        touch(touches, log, transfer.source, *position, false);
                        for &(id, _) in &transfer.destinations {
                            touch(touches, log, id, *position, true);
                        }
                    }
                    *position += 1;
                }
                Step::Repeat { body, .. } => {
                    let start = *position;
                    walk(program, body, position, touches, log, repeats);
                    repeats.push((start, *position - 1));
                }
            }
        }
    }
    walk(
        program,
        &program.steps,
        &mut position,
        &mut touches,
        &mut first_is_read,
        &mut repeats,
    );
    let end = position;

    program
        .buffers
        .iter()
        .enumerate()
        .map(|(i, buffer)| {
            let whole = (0, end);
            if matches!(buffer.role, BufferRole::Weight { .. }) || buffer.piece.has_padding() {
                return whole;
            }
            let Some(t) = touches[i] else { return whole };
            let (mut first, mut last) = (t.first, t.last);
            if matches!(buffer.role, BufferRole::Input { .. }) {
                first = 0;
            }
            if program
                .host_reads
                .iter()
                .any(|b| b.pieces.iter().any(|(id, _)| id.0 as usize == i))
            {
                last = end;
            }
            // A value that flows around a loop's back edge, or into or out
            // of the loop, lives for the whole loop.
            for &(start, stop) in &repeats {
                let inside: Vec<_> = first_is_read[i]
                    .iter()
                    .filter(|(at, _, _)| (start..=stop).contains(at))
                    .collect();
                if inside.is_empty() {
                    continue;
                }
                let outside = first_is_read[i].len() > inside.len() || first < start || last > stop;
                let read_first = inside
                    .iter()
                    .min_by_key(|(at, _, write)| (*at, *write))
                    .is_some_and(|(_, _, write)| !write);
                if outside || read_first {
                    first = first.min(start);
                    last = last.max(stop);
                }
            }
            (first, last)
        })
        .collect()
}

/// Whether two lifetimes share a step.
pub(super) fn overlaps(a: Lifetime, b: Lifetime) -> bool {
    a.0 <= b.1 && b.0 <= a.1
}
