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
    let mut written: Vec<Vec<u8>> = program
        .buffers
        .iter()
        .map(|b| match b.role {
            BufferRole::Operand { .. } => vec![0; b.bytes() as usize],
            BufferRole::Activation { tensor } if written_once.contains(&tensor) => {
                vec![0; b.bytes() as usize]
            }
            _ => Vec::new(),
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
                if let Some(bytes) = written
                    .get_mut(destination.0 as usize)
                    .filter(|w| !w.is_empty())
                {
                    // Saturating: a byte written 255 times or more is as
                    // wrong as one written twice, and must not wrap to 0.
                    for byte in &mut bytes[offset as usize..(offset + transfer.bytes) as usize] {
                        *byte = byte.saturating_add(1);
                    }
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
            if let Some(written) = written
                .get_mut(destination.0 as usize)
                .filter(|w| !w.is_empty())
            {
                for byte in &mut written[offset as usize..(offset + bytes) as usize] {
                    *byte = byte.saturating_add(1);
                }
            }
        }
    }
    for (id, buffer) in program.buffers.iter().enumerate() {
        if written[id].is_empty() {
            continue;
        }
        check_operand_writes(id, buffer, &written[id])?;
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
/// reporting the first slot in address order that was not.
fn check_operand_writes(id: usize, buffer: &Buffer, written: &[u8]) -> Result<(), VerifyError> {
    let element = buffer.dtype.size_bytes().max(1);
    // The first slot of `slots` whose first byte was not written `expected`
    // times, with that count.
    let mismatch = |slots: std::ops::Range<usize>, expected: u8| {
        for slot in slots {
            let count = written[slot * element];
            if count != expected {
                return Some((slot, count, expected));
            }
        }
        None
    };
    // Runs come in address order; the gaps between them are padding.
    let mut next = 0;
    let mut found = None;
    buffer.piece.for_each_run(|run| {
        if found.is_none() {
            found =
                mismatch(next..run.slot, 0).or_else(|| mismatch(run.slot..run.slot + run.len, 1));
        }
        next = run.slot + run.len;
    });
    match found.or_else(|| mismatch(next..buffer.piece.slots(), 0)) {
        None => Ok(()),
        Some((slot, count, expected)) => Err(VerifyError(format!(
            "slot {slot} of operand buffer {id} on tile {} is written {count} times, expected {expected}",
            buffer.tile
        ))),
    }
}

/// Checks that the home buffers of every materialised activation, and the
/// partial buffers of every slice of a split matrix product, cover each
/// element exactly once.
fn verify_homes(graph: &Graph, program: &Program) -> Result<(), VerifyError> {
    let mut coverage: std::collections::BTreeMap<_, Vec<u32>> = Default::default();
    for buffer in &program.buffers {
        let (tensor, slice) = match buffer.role {
            BufferRole::Activation { tensor } => (tensor, None),
            BufferRole::Partial { op, slice } => (graph.op(op).output, Some(slice)),
            _ => continue,
        };
        let counts = coverage
            .entry((tensor, slice))
            .or_insert_with(|| vec![0; graph.tensor(tensor).element_count()]);
        let coordinates = &buffer.coordinates;
        buffer.piece.for_each_run(|run| {
            let first = flat_index(coordinates, run.index);
            let stride: usize = coordinates[run.dim + 1..].iter().product();
            for t in 0..run.len {
                counts[first + t * stride] += 1;
            }
        });
    }
    for ((tensor, slice), counts) in coverage {
        if let Some(element) = counts.iter().position(|&c| c != 1) {
            let what = match slice {
                None => "home buffers",
                Some(_) => "partial buffers",
            };
            let of = slice.map_or(String::new(), |s| format!(" (K slice {s})"));
            return Err(VerifyError(format!(
                "element {element} of `{}`{of} is held by {} {what}, expected 1",
                graph.tensor(tensor).name,
                counts[element]
            )));
        }
    }
    Ok(())
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
