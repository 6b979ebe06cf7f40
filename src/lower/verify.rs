//! The verifier run after lowering. A failure is a compiler bug: the
//! message says so and names the first broken fact.
//!
//! Checked: every transfer stays inside its source and destination
//! buffers; every byte of an exchange-filled buffer except its padding is
//! written exactly once; every materialised activation's home buffers cover
//! each element exactly once.

use super::layout::flat_index;
use super::program::{BufferRole, Program};
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
                    for byte in &mut bytes[offset as usize..(offset + transfer.bytes) as usize] {
                        *byte += 1;
                    }
                }
            }
        }
    }
    for (id, buffer) in program.buffers.iter().enumerate() {
        if !matches!(buffer.role, BufferRole::Operand { .. }) {
            continue;
        }
        let element = buffer.dtype.size_bytes();
        let mut result = Ok(());
        buffer.piece.for_each_slot(|slot, index| {
            let count = written[id][slot * element];
            let expected = u8::from(index.is_some());
            if result.is_ok() && count != expected {
                result = Err(VerifyError(format!(
                    "slot {slot} of operand buffer {id} on tile {} is written {count} times, expected {expected}",
                    buffer.tile
                )));
            }
        });
        result?;
    }
    verify_homes(graph, program)
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
        buffer.piece.for_each_slot(|_, index| {
            if let Some(index) = index {
                counts[flat_index(&buffer.coordinates, index)] += 1;
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
