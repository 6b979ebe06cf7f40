//! `decode`: from a word to an [`Inst`].

use super::regs::ControlReg;
use super::table::{self, Kind, Op, OpInfo, MAJOR};

/// A decoded instruction: the op plus its operands. Register-like operands
/// fill `r` in operand order; the one immediate (if any) is in `imm`,
/// sign-extended for signed kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inst {
    pub op: Op,
    pub r: [u8; 4],
    pub imm: i32,
}

impl Inst {
    pub(crate) fn info(&self) -> &'static OpInfo {
        table::info(self.op)
    }
}

/// Why a word is not an instruction.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DecodeError {
    #[error("no instruction has opcode bits {word:#010x}")]
    UnknownOpcode { word: u32 },
    #[error("`{mnemonic}` word {word:#010x} sets reserved bits {bits:#010x}")]
    ReservedBits {
        mnemonic: &'static str,
        word: u32,
        bits: u32,
    },
    #[error("`{mnemonic}` word {word:#010x} has an invalid operand {operand}")]
    BadOperand {
        mnemonic: &'static str,
        word: u32,
        operand: usize,
    },
}

pub(crate) fn decode(word: u32) -> Result<Inst, DecodeError> {
    let rows = &table::lookup().by_major[MAJOR.get(word) as usize];
    let row = rows
        .iter()
        .find(|r| word & r.fixed_mask == r.pattern)
        .ok_or(DecodeError::UnknownOpcode { word })?;
    let reserved = word & !row.used_mask();
    if reserved != 0 {
        return Err(DecodeError::ReservedBits {
            mnemonic: row.mnemonic,
            word,
            bits: reserved,
        });
    }
    let mut inst = Inst {
        op: row.op,
        r: [0; 4],
        imm: 0,
    };
    let mut slot = 0;
    for (index, (kind, field)) in row.operands.iter().enumerate() {
        let raw = field.get(word);
        let valid = match kind {
            Kind::APair => raw % 2 == 0,
            Kind::AQuad => raw % 4 == 0,
            Kind::MTriple => raw <= 12,
            Kind::CReg => ControlReg::from_index(raw as u8).is_some(),
            Kind::Shift => raw <= 31,
            Kind::Len8 => raw >= 1,
            Kind::AccPair => raw <= 1,
            _ => true,
        };
        if !valid {
            return Err(DecodeError::BadOperand {
                mnemonic: row.mnemonic,
                word,
                operand: index,
            });
        }
        if kind.is_immediate() {
            inst.imm = if *kind == Kind::SImm16 {
                i32::from(raw as u16 as i16)
            } else {
                raw as i32
            };
        } else {
            inst.r[slot] = raw as u8;
            slot += 1;
        }
    }
    Ok(inst)
}
