//! The verifier run after lowering. A failure is a compiler bug: the
//! message says so and names the first broken fact.
//!
//! Checked: every transfer names buffers the program has and stays inside
//! them, and never writes a weight (the loader fills those); every byte of
//! an operand buffer except its padding is written exactly once, by the
//! exchange or by a block-major rearrange of what its tile holds, and so is
//! every byte of a `concat` output, which only the exchange fills; every
//! materialised activation's home buffers cover each element exactly once,
//! and so do the partial buffers of each K slice of a split matrix product.

use super::layout::flat_index;
use super::program::{Buffer, BufferRole, OperandRef, Program};
use crate::graph::Graph;

#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[error("internal compiler error: lowered program fails verification: {0}")]
pub struct VerifyError(pub String);

pub fn verify(graph: &Graph, program: &Program) -> Result<(), VerifyError> {
    let fail = |message: String| Err(VerifyError(message));
    let written_once = exchange_written(graph);
    // The byte ranges written into each buffer whose every slot must be
    // written exactly once (operands, and the outputs only the exchange
    // fills); `None` for the buffers that are not checked.
    let mut written: Vec<Option<Vec<(u32, u32)>>> = program
        .buffers
        .iter()
        .map(|b| match b.role {
            BufferRole::Operand { .. } => Some(Vec::new()),
            BufferRole::Activation { tensor } if written_once.contains(&tensor) => Some(Vec::new()),
            _ => None,
        })
        .collect();
    // Buffer sizes, computed once rather than per transfer.
    let sizes: Vec<u32> = program.buffers.iter().map(|b| b.bytes()).collect();
    for (phase_index, phase) in program.phases.iter().enumerate() {
        for transfer in &phase.transfers {
            let Some(source) = program.buffers.get(transfer.source.0 as usize) else {
                return fail(format!(
                    "phase {phase_index} reads buffer {}, which the program does not have",
                    transfer.source.0
                ));
            };
            if transfer.source_offset + transfer.bytes > sizes[transfer.source.0 as usize] {
                return fail(format!(
                    "phase {phase_index} reads past the end of buffer {} on tile {}",
                    transfer.source.0, source.tile
                ));
            }
            for &(destination, offset) in &transfer.destinations {
                let Some(buffer) = program.buffers.get(destination.0 as usize) else {
                    return fail(format!(
                        "phase {phase_index} writes buffer {}, which the program does not have",
                        destination.0
                    ));
                };
                // Weights are written by the loader and never change; an
                // exchange into one would overwrite them. (Inputs may be
                // written: a repeat's carry lands in its input's buffers.)
                if matches!(buffer.role, BufferRole::Weight { .. }) {
                    return fail(format!(
                        "phase {phase_index} writes into weight buffer {} on tile {}, which only the loader fills",
                        destination.0, buffer.tile
                    ));
                }
                if offset + transfer.bytes > sizes[destination.0 as usize] {
                    return fail(format!(
                        "phase {phase_index} writes past the end of buffer {} on tile {}",
                        destination.0, buffer.tile
                    ));
                }
                if let Some(ranges) = &mut written[destination.0 as usize] {
                    ranges.push((offset, transfer.bytes));
                }
            }
        }
    }
    // Block-major rearranges write the part of an operand its tile holds.
    for run in program.kernel_runs() {
        if run.kernel != super::local::KERNEL {
            continue;
        }
        let (Some(copy), [OperandRef::Buffer(source), OperandRef::Buffer(destination)]) = (
            super::local::BlockCopy::from_params(&run.params),
            run.operands.as_slice(),
        ) else {
            return fail(format!(
                "a {} run on tile {} lacks its geometry or its two buffers",
                run.kernel, run.tile
            ));
        };
        let (Some(&from), Some(&to)) = (
            sizes.get(source.0 as usize),
            sizes.get(destination.0 as usize),
        ) else {
            return fail(format!(
                "a {} run on tile {} names a buffer the program does not have",
                run.kernel, run.tile
            ));
        };
        for (source_offset, offset, bytes) in copy.chunks() {
            if source_offset + bytes > from || offset + bytes > to {
                return fail(format!(
                    "a {} run on tile {} reaches past the end of buffer {} or {}",
                    run.kernel, run.tile, source.0, destination.0
                ));
            }
            if let Some(ranges) = &mut written[destination.0 as usize] {
                ranges.push((offset, bytes));
            }
        }
    }
    for (id, buffer) in program.buffers.iter().enumerate() {
        if let Some(ranges) = &written[id] {
            check_operand_writes(id, buffer, ranges)?;
        }
    }
    verify_homes(graph, program)
}

/// The activations whose homes the exchange fills with no kernel (the
/// outputs of `concat`): like operand buffers, every slot is written once.
fn exchange_written(graph: &Graph) -> std::collections::BTreeSet<crate::graph::TensorId> {
    graph
        .ops
        .iter()
        .filter(|op| matches!(op.kind, crate::graph::OpKind::Concat { .. }))
        .map(|op| op.output)
        .collect()
}

/// Checks that the first byte of every slot of operand buffer `id` was
/// written once if the slot holds an element and never if it is padding,
/// reporting the first slot in address order that was not. `ranges` are
/// the (offset, bytes) ranges written into it.
fn check_operand_writes(
    id: usize,
    buffer: &Buffer,
    ranges: &[(u32, u32)],
) -> Result<(), VerifyError> {
    let element = buffer.dtype.size_bytes().max(1);
    // A range writes the first byte of the slots from the first whose
    // first byte it reaches to the last.
    let writes: Vec<(usize, usize)> = ranges
        .iter()
        .map(|&(offset, bytes)| {
            let (offset, end) = (offset as usize, (offset + bytes) as usize);
            (offset.div_ceil(element), end.div_ceil(element))
        })
        .collect();
    // Runs come in address order; the gaps between them are padding.
    let mut held = Vec::new();
    buffer.piece.for_each_run(|run| match held.last_mut() {
        Some((_, end)) if *end == run.slot => *end += run.len,
        _ => held.push((run.slot, run.slot + run.len)),
    });
    match first_miscount(writes, &held, buffer.piece.slots()) {
        None => Ok(()),
        Some((slot, count, expected)) => Err(VerifyError(format!(
            "slot {slot} of operand buffer {id} on tile {} is written {count} times, expected {expected}",
            buffer.tile
        ))),
    }
}

/// The first position in `0..total` not covered as often as expected by
/// the half-open intervals `covers`, where `once` (sorted, disjoint
/// intervals) is where exactly one cover is expected and everywhere else
/// none is: the position, its cover count and the count expected.
///
/// The count only changes at an interval's ends, so it is checked once per
/// stretch between consecutive ends rather than once per position; the
/// work grows with the number of intervals, not with what they cover.
fn first_miscount(
    covers: Vec<(usize, usize)>,
    once: &[(usize, usize)],
    total: usize,
) -> Option<(usize, usize, usize)> {
    let mut events: Vec<(usize, bool)> = covers
        .iter()
        .filter(|(start, end)| start < end)
        .flat_map(|&(start, end)| [(start, true), (end, false)])
        .collect();
    events.sort_unstable();
    // Where the count or the expectation may change, in order: the ends of
    // the covers merged with those of `once` (already in order), and 0.
    let mut bounds = Vec::with_capacity(events.len() + 2 * once.len() + 1);
    let mut ends = once
        .iter()
        .flat_map(|&(start, end)| [start, end])
        .peekable();
    bounds.push(0);
    for &(at, _) in &events {
        while let Some(end) = ends.next_if(|&end| end <= at) {
            bounds.push(end);
        }
        bounds.push(at);
    }
    bounds.extend(ends);
    bounds.dedup();
    let (mut count, mut next_event, mut next_once) = (0usize, 0, 0);
    for &at in bounds.iter().take_while(|&&at| at < total) {
        while let Some(&(position, starts)) = events.get(next_event) {
            if position > at {
                break;
            }
            if starts {
                count += 1;
            } else {
                count -= 1;
            }
            next_event += 1;
        }
        while once.get(next_once).is_some_and(|&(_, end)| end <= at) {
            next_once += 1;
        }
        let expected = usize::from(once.get(next_once).is_some_and(|&(start, _)| start <= at));
        if count != expected {
            return Some((at, count, expected));
        }
    }
    None
}

/// Checks that the home buffers of every materialised activation, and the
/// partial buffers of every slice of a split matrix product, cover each
/// element exactly once.
fn verify_homes(graph: &Graph, program: &Program) -> Result<(), VerifyError> {
    let mut holders: std::collections::BTreeMap<_, Vec<&Buffer>> = Default::default();
    for buffer in &program.buffers {
        let key = match buffer.role {
            BufferRole::Activation { tensor } => (tensor, None),
            BufferRole::Partial { op, slice } => (graph.op(op).output, Some(slice)),
            _ => continue,
        };
        holders.entry(key).or_default().push(buffer);
    }
    for ((tensor, slice), buffers) in holders {
        let total = graph.tensor(tensor).element_count();
        if boxes_tile(&buffers, total) {
            continue;
        }
        let Some((element, count, _)) = first_miscount(held_ranges(&buffers), &[(0, total)], total)
        else {
            continue;
        };
        let what = match slice {
            None => "home buffers",
            Some(_) => "partial buffers",
        };
        let of = slice.map_or(String::new(), |s| format!(" (K slice {s})"));
        return Err(VerifyError(format!(
            "element {element} of `{}`{of} is held by {count} {what}, expected 1",
            graph.tensor(tensor).name,
        )));
    }
    Ok(())
}

/// Whether `buffers`, all in the same coordinates of `total` elements,
/// hold boxes that lie inside those coordinates, do not overlap and
/// together have `total` elements: then they cover each element exactly
/// once. Checked box by box, so the work grows with the buffers, not with
/// the elements; `false` also when the buffers use different coordinates,
/// which [`held_ranges`] settles element range by element range.
fn boxes_tile(buffers: &[&Buffer], total: usize) -> bool {
    let Some(coordinates) = buffers.first().map(|b| &b.coordinates) else {
        return total == 0;
    };
    let inside = |b: &Buffer| {
        b.piece.start.len() == coordinates.len()
            && b.piece.extent.len() == coordinates.len()
            && (0..coordinates.len())
                .all(|d| b.piece.start[d] + b.piece.extent[d] <= coordinates[d])
    };
    if coordinates.iter().product::<usize>() != total
        || buffers
            .iter()
            .any(|b| &b.coordinates != coordinates || !inside(b))
        || buffers.iter().map(|b| b.piece.elements()).sum::<usize>() != total
    {
        return false;
    }
    // Two boxes overlap when their ranges overlap along every dimension.
    // Sweeping along the first, a box is compared only with those whose
    // range there it starts inside.
    let overlap = |a: &Buffer, b: &Buffer| {
        (0..coordinates.len()).all(|d| {
            let (a0, b0) = (a.piece.start[d], b.piece.start[d]);
            a0 < b0 + b.piece.extent[d] && b0 < a0 + a.piece.extent[d]
        })
    };
    let mut order: Vec<&Buffer> = buffers
        .iter()
        .copied()
        .filter(|b| b.piece.elements() > 0)
        .collect();
    if coordinates.is_empty() {
        return order.len() == usize::from(total > 0);
    }
    order.sort_by_key(|b| b.piece.start[0]);
    let mut open: Vec<&Buffer> = Vec::new();
    for buffer in order {
        let at = buffer.piece.start[0];
        open.retain(|a| a.piece.start[0] + a.piece.extent[0] > at);
        if open.iter().any(|a| overlap(a, buffer)) {
            return false;
        }
        open.push(buffer);
    }
    true
}

/// The element ranges (flat, half open) that `buffers` hold, run by run.
fn held_ranges(buffers: &[&Buffer]) -> Vec<(usize, usize)> {
    let mut ranges = Vec::new();
    for buffer in buffers {
        let coordinates = &buffer.coordinates;
        buffer.piece.for_each_run(|run| {
            let first = flat_index(coordinates, run.index);
            let stride: usize = coordinates[run.dim + 1..].iter().product();
            if stride == 1 {
                ranges.push((first, first + run.len));
            } else {
                ranges.extend((0..run.len).map(|t| (first + t * stride, first + t * stride + 1)));
            }
        });
    }
    ranges
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{DType, OpKind, Role};
    use crate::lower::program::{BufferId, Transfer};
    use crate::lower::tests::{lowered, Builder};
    use expect_test::{expect, Expect};

    /// A product whose left operand is gathered into rows padded from 42
    /// to 44 elements, so operand buffers have padding slots.
    fn graph() -> crate::graph::Graph {
        let mut b = Builder::new(4);
        let x = b.tensor("x", &[16, 42], DType::F16, Role::Input);
        let w = b.tensor("w", &[42, 16], DType::F16, Role::Weight);
        let y = b.op(OpKind::Add, &[x, x], &[16, 42], DType::F16);
        let z = b.op(
            OpKind::Matmul {
                transpose_rhs: false,
                epilogue: Vec::new(),
            },
            &[y, w],
            &[16, 16],
            DType::F16,
        );
        b.graph.outputs = vec![z];
        b.graph
    }

    /// Breaks the lowered program with `edit` and checks the verifier's
    /// message.
    fn check(edit: impl FnOnce(&mut Program), expected: Expect) {
        check_with(edit, |error| expected.assert_eq(error));
    }

    fn check_with(edit: impl FnOnce(&mut Program), judge: impl FnOnce(&str)) {
        let graph = graph();
        let mut program = lowered(&graph);
        verify(&graph, &program).expect("the lowered program is correct");
        edit(&mut program);
        let error = verify(&graph, &program).expect_err("the edit breaks the program");
        judge(&error.to_string());
    }

    fn padded_operand(program: &Program) -> (BufferId, usize) {
        let (id, buffer) = program
            .buffers
            .iter()
            .enumerate()
            .find(|(_, b)| matches!(b.role, BufferRole::Operand { .. }) && b.piece.has_padding())
            .expect("a padded operand");
        let mut padding = None;
        buffer.piece.for_each_slot(|slot, index| {
            if index.is_none() && padding.is_none() {
                padding = Some(slot);
            }
        });
        (BufferId(id as u32), padding.expect("a padding slot"))
    }

    /// The interval sweep against a count kept position by position.
    #[test]
    fn miscounts_are_found_where_a_position_by_position_count_finds_them() {
        type Ranges = &'static [(usize, usize)];
        let cases: [(Ranges, Ranges, usize); 7] = [
            (&[(0, 4), (4, 10)], &[(0, 10)], 10),
            (&[(4, 10), (0, 4)], &[(0, 10)], 10),
            (&[(0, 4), (5, 10)], &[(0, 10)], 10),
            (&[(0, 6), (4, 10)], &[(0, 10)], 10),
            (&[(0, 3), (4, 7)], &[(0, 3), (4, 7)], 8),
            (&[(0, 3), (3, 5)], &[(0, 3), (4, 7)], 8),
            (&[(0, 3), (4, 7), (7, 8), (2, 2)], &[(0, 3), (4, 7)], 8),
        ];
        for (covers, once, total) in cases {
            let mut counts = vec![0usize; total];
            for &(start, end) in covers {
                counts[start..end].iter_mut().for_each(|c| *c += 1);
            }
            let expected = |at: usize| usize::from(once.iter().any(|&(s, e)| s <= at && at < e));
            let slow = (0..total)
                .find(|&at| counts[at] != expected(at))
                .map(|at| (at, counts[at], expected(at)));
            assert_eq!(
                first_miscount(covers.to_vec(), once, total),
                slow,
                "{covers:?}"
            );
        }
    }

    #[test]
    fn a_byte_written_twice_is_reported_at_its_slot() {
        check(
            |program| {
                let transfer = program.phases[0].transfers[1].clone();
                program.phases[0].transfers.push(transfer);
            },
            expect!["internal compiler error: lowered program fails verification: slot 16 of operand buffer 8 on tile 0 is written 2 times, expected 1"],
        );
    }

    #[test]
    fn a_slot_never_written_is_reported() {
        check(
            |program| {
                program.phases[0].transfers.remove(0);
            },
            expect!["internal compiler error: lowered program fails verification: slot 0 of operand buffer 8 on tile 0 is written 0 times, expected 1"],
        );
    }

    #[test]
    fn padding_written_by_exchange_is_reported() {
        check(
            |program| {
                let (buffer, slot) = padded_operand(program);
                let source = program.phases[0].transfers[0].source;
                program.phases[0].transfers.push(Transfer {
                    source,
                    source_offset: 0,
                    bytes: 2,
                    destinations: vec![(buffer, slot as u32 * 2)],
                });
            },
            expect!["internal compiler error: lowered program fails verification: slot 138 of operand buffer 8 on tile 0 is written 1 times, expected 0"],
        );
    }

    #[test]
    fn transfers_past_the_end_of_a_buffer_are_reported() {
        check(
            |program| program.phases[0].transfers[0].source_offset = 1 << 20,
            expect!["internal compiler error: lowered program fails verification: phase 0 reads past the end of buffer 1 on tile 0"],
        );
    }

    #[test]
    fn transfers_naming_buffers_the_program_lacks_are_reported() {
        check(
            |program| {
                let nowhere = BufferId(program.buffers.len() as u32);
                program.phases[0].transfers[0].destinations[0].0 = nowhere;
            },
            expect!["internal compiler error: lowered program fails verification: phase 0 writes buffer 20, which the program does not have"],
        );
        check(
            |program| {
                program.phases[0].transfers[0].source = BufferId(program.buffers.len() as u32);
            },
            expect!["internal compiler error: lowered program fails verification: phase 0 reads buffer 20, which the program does not have"],
        );
    }

    #[test]
    fn an_exchange_into_a_weight_is_reported() {
        check_with(
            |program| {
                let weight = program
                    .buffers
                    .iter()
                    .position(|b| matches!(b.role, BufferRole::Weight { .. }))
                    .expect("the test program has a weight");
                let mut extra = program.phases[0].transfers[0].clone();
                extra.destinations = vec![(BufferId(weight as u32), 0)];
                program.phases[0].transfers.push(extra);
            },
            |error| assert!(error.contains("writes into weight buffer"), "{error}"),
        );
    }

    #[test]
    fn an_element_with_two_homes_is_reported() {
        check(
            |program| {
                let home = program
                    .buffers
                    .iter()
                    .find(|b| matches!(b.role, BufferRole::Activation { .. }))
                    .cloned()
                    .expect("an activation home");
                program.buffers.push(home);
            },
            expect!["internal compiler error: lowered program fails verification: element 0 of `add0` is held by 2 home buffers, expected 1"],
        );
    }
}
