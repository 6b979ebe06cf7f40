//! The tile instruction set: ipub's own encoding of an IPU21-style worker and
//! supervisor ISA (see `book/src/isa.md`).
//!
//! This module is the single source of truth for instructions. The assembler
//! (`crate::asm`) hands it a mnemonic with parsed operands and gets back an
//! encoded word plus, when an operand names a symbol, a fixup for the linker;
//! the executor decodes words back into [`Inst`]s.
//!
//! Fixed facts of the encoding that the rest of the crate relies on:
//! - every instruction is one 32-bit little-endian word at a 4-byte aligned
//!   address;
//! - a bundle `{ main ; aux }` is two words at an 8-byte aligned address, the
//!   main-pipeline instruction first;
//! - relocations patch one word; [`RelocKind::Abs32`] is the whole word (used
//!   by `.word symbol`);
//! - a main-pipeline instruction at an 8-byte aligned address followed by an
//!   aux-pipeline instruction issues with it as one bundle, unless the main
//!   one changes control flow. There is no bundle bit: `{ main ; aux }` in
//!   source only asks the assembler to check the pair and align it, and a
//!   bundle means exactly "main, then aux" executed in one issue slot.

mod decode;
mod disasm;
mod encode;
pub mod fp8;
pub(crate) mod regs;
pub(crate) mod table;
#[cfg(test)]
mod tests;
pub mod text;

pub(crate) use decode::{decode, Inst};
pub use disasm::{disassemble, pairs, DisasmLine};
pub use fp8::{erf, Fp8Format};
pub use regs::ControlReg;
pub use table::{Contexts, Kind, Op, OpInfo, Pipe};

/// An operand as the assembler parsed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Operand {
    /// A register, written without the `$`, exactly as in the source after
    /// lower-casing: `m3`, `a0:1` (pair), `a4:7` (quad), `azero`, `mzero`,
    /// or a control/status register name.
    Register(String),
    /// A value: a constant or a symbol plus addend (resolved by the linker).
    Value(Value),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Const(i64),
    Symbol { name: String, addend: i64 },
}

/// One encoded instruction word; `fixup` is present when an operand named a
/// symbol, and says how the linker must patch the word.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Encoded {
    pub word: u32,
    pub fixup: Option<Fixup>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fixup {
    pub kind: RelocKind,
    pub symbol: String,
    pub addend: i64,
}

/// How a relocation patches a word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RelocKind {
    /// The whole 32-bit word holds `S + A`.
    Abs32,
    /// Bits 20..0 hold `S + A`, a tile address (`setzi`, branches, `call`).
    Abs21,
}

impl RelocKind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            RelocKind::Abs32 => "abs32",
            RelocKind::Abs21 => "abs21",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<RelocKind> {
        match name {
            "abs32" => Some(RelocKind::Abs32),
            "abs21" => Some(RelocKind::Abs21),
            _ => None,
        }
    }

    /// Whether the patched field holds `S + A - P` (P = the word's address).
    pub(crate) fn is_pc_relative(self) -> bool {
        false
    }
}

/// Why an instruction could not be encoded. `operand` is the 0-based index
/// of the offending operand, so the assembler can point at its column.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InstError {
    pub operand: Option<usize>,
    pub message: String,
}

/// Encodes one instruction.
pub fn assemble(mnemonic: &str, operands: &[Operand]) -> Result<Encoded, InstError> {
    encode::assemble(mnemonic, operands)
}

/// Encodes a typed instruction, checking its operands as [`assemble`]
/// does; the inverse of [`decode()`].
pub(crate) fn encode(inst: &Inst) -> Result<u32, InstError> {
    encode::encode(inst)
}

/// Checks that two encoded words may issue together as `{ main ; aux }`:
/// the first must be a main-pipeline instruction that does not change
/// control flow, the second an aux-pipeline one.
pub(crate) fn check_bundle(main: u32, aux: u32) -> Result<(), InstError> {
    let bad = |message: String| InstError {
        operand: None,
        message,
    };
    let m = decode(main).map_err(|e| bad(e.to_string()))?;
    let a = decode(aux).map_err(|e| bad(e.to_string()))?;
    let (mi, ai) = (m.info(), a.info());
    if mi.pipe != Pipe::Main {
        return Err(bad(format!(
            "`{}` issues in the aux pipeline and cannot be the first of a bundle",
            mi.mnemonic
        )));
    }
    if mi.control {
        return Err(bad(format!(
            "`{}` changes control flow and cannot be bundled",
            mi.mnemonic
        )));
    }
    if ai.pipe != Pipe::Aux {
        return Err(bad(format!(
            "`{}` issues in the main pipeline and cannot be the second of a bundle",
            ai.mnemonic
        )));
    }
    Ok(())
}

/// A relocated value that does not fit its field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RelocError {
    #[error("value {0:#x} does not fit in 32 bits")]
    Value32(i64),
    #[error("address {0:#x} does not fit in 21 bits")]
    Address21(i64),
}

/// Patches `word` (at address `place`) with `value` = S + A.
pub(crate) fn apply_reloc(
    kind: RelocKind,
    word: u32,
    value: i64,
    place: u32,
) -> Result<u32, RelocError> {
    let _ = place;
    match kind {
        RelocKind::Abs32 => u32::try_from(value)
            .or_else(|_| i32::try_from(value).map(|v| v as u32))
            .map_err(|_| RelocError::Value32(value)),
        RelocKind::Abs21 => {
            if (0..1 << 21).contains(&value) {
                Ok((word & !0x1F_FFFF) | value as u32)
            } else {
                Err(RelocError::Address21(value))
            }
        }
    }
}
