//! A tile's supervisor program as typed instructions.
//!
//! The supervisor has one routine per compute step the tile takes part in:
//! for each kernel run it points `$m1` at the run's state (indexed by the
//! repeat's iteration counter when the run reads per-iteration operands)
//! and `$m2` at the kernel's entry, starts the workers with `runall`, and
//! it ends the step with `sync`. The last step of a repeat's body that a
//! counting tile takes part in advances the counter, wrapping to 0.
//!
//! [`build`] lays the routines out as [`Inst`]s; kernel entries are left
//! as named holes, like relocations, because the kernels are linked after
//! the supervisor's block is placed. Every instruction is one word, so
//! [`Supervisor::size`] is exact before any kernel has an address, and
//! [`Supervisor::encode`] fills the holes and encodes with
//! [`crate::isa::encode`].

use super::steps::TileStep;
use crate::isa::{self, Inst, Op};
use std::collections::BTreeMap;

/// Where a tile's runs keep their states, as the supervisor reads them.
pub(crate) struct StateMap {
    /// (step, run index) to (first state address, stride between
    /// iterations, iterations).
    pub states: BTreeMap<(u32, usize), (u32, u32, u32)>,
    /// Repeat id to counter address.
    pub counters: BTreeMap<u32, u32>,
    pub bytes: u32,
}

/// A tile's supervisor routines, not yet encoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Supervisor {
    insts: Vec<Inst>,
    /// Compute step id to the index of its routine's first instruction.
    steps: Vec<(u32, usize)>,
    /// Instruction index to the kernel whose entry its immediate takes.
    kernel_entries: Vec<(usize, String)>,
}

/// The encoded routines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Encoded {
    pub bytes: Vec<u8>,
    /// Compute step id to its routine's byte offset in `bytes`.
    pub steps: BTreeMap<u32, u32>,
}

/// Why the routines could not be encoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SupervisorError {
    #[error("kernel `{0}` has no entry address")]
    MissingEntry(String),
    #[error(
        "generated supervisor instruction `{inst}` does not encode (a compiler bug): {message}"
    )]
    Encode { inst: String, message: String },
}

/// The supervisor's scratch registers.
const STATE: u8 = 1;
const ENTRY: u8 = 2;
const COUNTER: u8 = 3;
const VALUE: u8 = 4;
const FLAG: u8 = 5;

fn inst(op: Op, registers: &[u8], imm: i64) -> Inst {
    let mut r = [0; 4];
    r[..registers.len()].copy_from_slice(registers);
    // An immediate that does not fit in 32 bits is caught when the word is
    // encoded: saturating keeps it out of every immediate's range.
    let imm = i32::try_from(imm).unwrap_or(if imm < 0 { i32::MIN } else { i32::MAX });
    Inst { op, r, imm }
}

/// `setzi $mN, value`.
fn setzi(register: u8, value: u32) -> Inst {
    inst(Op::SetziM, &[register], i64::from(value))
}

/// Lays out the routines of `steps` with states and counters from
/// `states`.
pub fn build(steps: &[TileStep], states: &StateMap) -> Supervisor {
    let mut program = Supervisor {
        insts: Vec::new(),
        steps: Vec::new(),
        kernel_entries: Vec::new(),
    };
    let code = &mut program.insts;
    for step in steps {
        program.steps.push((step.step, code.len()));
        let counter = step
            .repeat
            .and_then(|(repeat, _)| states.counters.get(&repeat));
        for (index, run) in step.runs.iter().enumerate() {
            let (state, stride, iterations) = states.states[&(step.step, index)];
            match (iterations > 1, counter) {
                (true, Some(&counter)) => code.extend([
                    setzi(COUNTER, counter),
                    inst(Op::Ld32M, &[VALUE, COUNTER], 0),
                    inst(Op::MulI, &[VALUE, VALUE], i64::from(stride)),
                    setzi(STATE, state),
                    inst(Op::AddR, &[STATE, STATE, VALUE], 0),
                ]),
                _ => code.push(setzi(STATE, state)),
            }
            program
                .kernel_entries
                .push((code.len(), run.kernel.to_string()));
            code.extend([setzi(ENTRY, 0), inst(Op::Runall, &[ENTRY, STATE], 0)]);
        }
        if let (true, Some(&counter), Some((_, count))) =
            (step.advances_counter, counter, step.repeat)
        {
            // Wait for the workers before the next iteration's states are
            // chosen: `sync` does, after the update, and the workers never
            // read the counter.
            code.extend([
                setzi(COUNTER, counter),
                inst(Op::Ld32M, &[VALUE, COUNTER], 0),
                inst(Op::AddI, &[VALUE, VALUE], 1),
                inst(Op::CmpultI, &[FLAG, VALUE], i64::from(count)),
                inst(Op::MulR, &[VALUE, VALUE, FLAG], 0),
                inst(Op::St32M, &[VALUE, COUNTER], 0),
            ]);
        }
        code.push(inst(Op::Sync, &[], 0));
    }
    program
}

impl Supervisor {
    /// The routines' bytes: every instruction is one word, so this does
    /// not depend on where the kernels or states end up.
    pub(super) fn size(&self) -> u32 {
        4 * self.insts.len() as u32
    }

    /// Encodes the routines with each kernel's entry from `entries`.
    pub(super) fn encode(
        &self,
        entries: &BTreeMap<String, u32>,
    ) -> Result<Encoded, SupervisorError> {
        let mut insts = self.insts.clone();
        for (index, kernel) in &self.kernel_entries {
            let entry = entries
                .get(kernel)
                .ok_or_else(|| SupervisorError::MissingEntry(kernel.clone()))?;
            insts[*index].imm = i32::try_from(*entry).unwrap_or(i32::MAX);
        }
        let mut bytes = Vec::with_capacity(4 * insts.len());
        for inst in &insts {
            let word = isa::encode(inst).map_err(|e| SupervisorError::Encode {
                inst: inst.to_string(),
                message: e.message,
            })?;
            bytes.extend_from_slice(&word.to_le_bytes());
        }
        Ok(Encoded {
            bytes,
            steps: self
                .steps
                .iter()
                .map(|&(step, index)| (step, 4 * index as u32))
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::{BufferId, KernelRun, OperandRef};
    use crate::partition::KernelId;

    /// One step on one tile running `reduce_add` once, its state at 0x100.
    fn check(entries: &[(&str, u32)]) -> Result<Encoded, SupervisorError> {
        let step = TileStep {
            step: 7,
            runs: vec![KernelRun {
                tile: 0,
                kernel: KernelId::ReduceAdd,
                operands: vec![OperandRef::Buffer(BufferId(0))],
                params: Vec::new(),
            }],
            repeat: None,
            advances_counter: false,
        };
        let states = StateMap {
            states: BTreeMap::from([((7, 0), (0x100, 8, 1))]),
            counters: BTreeMap::new(),
            bytes: 8,
        };
        let program = build(std::slice::from_ref(&step), &states);
        let entries = entries.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        let encoded = program.encode(&entries)?;
        assert_eq!(encoded.bytes.len() as u32, program.size());
        Ok(encoded)
    }

    #[test]
    fn kernel_entries_are_filled_at_encoding_and_checked() {
        let name = KernelId::ReduceAdd.to_string();
        let encoded = check(&[(&name, 0x4c040)]).expect("encodes");
        let listing: Vec<String> = isa::disassemble(&encoded.bytes, 0)
            .iter()
            .map(|l| l.text.clone())
            .collect();
        assert_eq!(encoded.steps, BTreeMap::from([(7, 0)]));
        expect_test::expect![[r#"
            [
                "setzi $m1, 0x100",
                "setzi $m2, 0x4c040",
                "runall $m2, $m1",
                "sync 0",
            ]
        "#]]
        .assert_debug_eq(&listing);
        expect_test::expect!["kernel `reduce_add_f16` has no entry address"]
            .assert_eq(&check(&[]).unwrap_err().to_string());
        expect_test::expect!["generated supervisor instruction `setzi $m2, 0x200000` does not encode (a compiler bug): `setzi`: 2097152 is out of range for a 21-bit address (0..=2097151)"]
            .assert_eq(&check(&[(&name, 1 << 21)]).unwrap_err().to_string());
    }
}
