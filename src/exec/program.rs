//! Decoded programs: a tile's code decoded once into a compact array, so
//! the execute loop dispatches on an enum and never re-parses bits.

use crate::isa::{self, Contexts, Inst, Op, Pipe};

/// One decoded word.
#[derive(Clone, Copy, Debug)]
pub(super) struct Slot {
    pub inst: Inst,
    /// The word did not decode; `inst` is a `nop` placeholder and `word`
    /// holds the bits for the fault report.
    pub invalid: bool,
    /// This main instruction issues together with the aux one after it.
    pub paired: bool,
    pub control: bool,
    pub worker_ok: bool,
    pub supervisor_ok: bool,
    pub issues: u8,
    pub word: u32,
}

impl Slot {
    pub(super) fn decode(word: u32) -> Slot {
        match isa::decode(word) {
            Ok(inst) => {
                let info = inst.info();
                Slot {
                    inst,
                    invalid: false,
                    paired: false,
                    control: info.control,
                    worker_ok: info.contexts != Contexts::Supervisor,
                    supervisor_ok: info.contexts != Contexts::Worker,
                    issues: info.issues,
                    word,
                }
            }
            Err(_) => Slot {
                inst: Inst {
                    op: Op::Nop,
                    r: [0; 4],
                    imm: 0,
                },
                invalid: true,
                paired: false,
                control: false,
                worker_ok: false,
                supervisor_ok: false,
                issues: 1,
                word,
            },
        }
    }
}

/// The decoded code of `[base, base + 4 * slots.len())`. Identical images
/// on many tiles share one `Arc<Program>`.
#[derive(Clone, Debug)]
pub(crate) struct Program {
    base: u32,
    slots: Vec<Slot>,
}

impl Program {
    /// Decodes little-endian code bytes that will sit at `base` (4-byte
    /// aligned); a trailing partial word is ignored.
    pub(crate) fn decode(code: &[u8], base: u32) -> Program {
        let mut slots: Vec<Slot> = code
            .chunks_exact(4)
            .map(|c| Slot::decode(u32::from_le_bytes([c[0], c[1], c[2], c[3]])))
            .collect();
        for i in 0..slots.len().saturating_sub(1) {
            let at = base.wrapping_add(4 * i as u32);
            let (main, aux) = (&slots[i], &slots[i + 1]);
            slots[i].paired = at.is_multiple_of(8)
                && !main.invalid
                && !aux.invalid
                && isa::pairs(&main.inst, &aux.inst);
        }
        Program { base, slots }
    }

    pub(crate) fn empty() -> Program {
        Program {
            base: 0,
            slots: Vec::new(),
        }
    }

    /// The slot at `pc`, when the program covers it.
    #[inline]
    pub(super) fn get(&self, pc: u32) -> Option<&Slot> {
        let offset = pc.wrapping_sub(self.base);
        self.slots.get((offset / 4) as usize)
    }
}

/// Whether a decoded instruction is an aux-pipeline one (used when pairing
/// words decoded outside a program).
pub(super) fn is_aux(inst: &Inst) -> bool {
    inst.info().pipe == Pipe::Aux
}
