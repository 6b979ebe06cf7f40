//! The verifier run after lowering. A failure is a compiler bug: the
//! message says so and names the first broken fact.
//!
//! Checked: every transfer stays inside its source and destination
//! buffers; every byte of an exchange-filled buffer except its padding is
//! written exactly once; every materialised activation's home buffers cover
//! each element exactly once.

use super::layout::flat_index;
use super::program::{Buffer, BufferRole, Program};
use crate::graph::Graph;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("internal compiler error: lowered program fails verification: {0}")]
pub struct VerifyError(pub String);

pub fn verify(graph: &Graph, program: &Program) -> Result<(), VerifyError> {
    let fail = |message: String| Err(VerifyError(message));
    let mut written: Vec<Vec<u8>> = program
        .buffers
        .iter()
        .map(|b| match b.role {
            BufferRole::Operand { .. } => vec![0; b.bytes() as usize],
            _ => Vec::new(),
        })
        .collect();
    for (phase_index, phase) in program.phases.iter().enumerate() {
        for transfer in &phase.transfers {
            let source = program.buffer(transfer.source);
            if transfer.source_offset + transfer.bytes > source.bytes() {
                return fail(format!(
                    "phase {phase_index} reads past the end of buffer {} on tile {}",
                    transfer.source.0, source.tile
                ));
            }
            for &(destination, offset) in &transfer.destinations {
                let buffer = program.buffer(destination);
                if offset + transfer.bytes > buffer.bytes() {
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
    for (id, buffer) in program.buffers.iter().enumerate() {
        if !matches!(buffer.role, BufferRole::Operand { .. }) {
            continue;
        }
        check_operand_writes(id, buffer, &written[id])?;
    }
    verify_homes(graph, program)
}

/// Checks that the first byte of every slot of operand buffer `id` was
/// written once if the slot holds an element and never if it is padding,
/// reporting the first slot in address order that was not.
fn check_operand_writes(id: usize, buffer: &Buffer, written: &[u8]) -> Result<(), VerifyError> {
    let element = buffer.dtype.size_bytes().max(1);
    // The first slot of `slots` whose first byte was not written `expected`
    // times, with that count.
    let mismatch = |slots: std::ops::Range<usize>, expected: u8| {
        let counts = written.get(slots.start * element..slots.end * element)?;
        let offset = counts
            .iter()
            .step_by(element)
            .position(|&c| c != expected)?;
        Some((slots.start + offset, counts[offset * element], expected))
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

fn verify_homes(graph: &Graph, program: &Program) -> Result<(), VerifyError> {
    let mut coverage: std::collections::HashMap<_, Vec<u32>> = Default::default();
    for buffer in &program.buffers {
        let BufferRole::Activation { tensor } = buffer.role else {
            continue;
        };
        let counts = coverage
            .entry(tensor)
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
    for (tensor, counts) in coverage {
        if let Some(element) = counts.iter().position(|&c| c != 1) {
            return Err(VerifyError(format!(
                "element {element} of `{}` is held by {} home buffers, expected 1",
                graph.tensor(tensor).name,
                counts[element]
            )));
        }
    }
    Ok(())
}
