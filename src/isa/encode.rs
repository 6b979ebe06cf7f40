//! `assemble`: from a mnemonic and parsed operands to a word.
//!
//! Several rows may share a mnemonic (`add $m0, $m1, $m2` and
//! `add $m0, $m1, 4`; `ld32` into `$m` or `$a`); the operands pick the row.

use super::regs::{self, ControlReg};
use super::table::{self, Field, Kind, OpInfo};
use super::{Encoded, Fixup, Inst, InstError, Operand, RelocKind, Value};

pub(super) fn assemble(mnemonic: &str, operands: &[Operand]) -> Result<Encoded, InstError> {
    let rows: Vec<&OpInfo> = table::all().filter(|r| r.mnemonic == mnemonic).collect();
    if rows.is_empty() {
        return Err(InstError {
            operand: None,
            message: format!("unknown instruction `{mnemonic}`"),
        });
    }
    // Report the row that got furthest before failing, preferring one whose
    // failing operand had the right shape (register or value): it is the
    // form the author most likely meant.
    let mut best: Option<((usize, bool), InstError)> = None;
    for row in rows.iter().filter(|r| r.operands.len() == operands.len()) {
        match encode_row(row, operands) {
            Ok(encoded) => return Ok(encoded),
            Err(e) => {
                let index = e.operand.unwrap_or(0);
                let shape_ok = match (&operands[index], row.operands[index].0) {
                    (Operand::Register(_), kind) => !is_value_kind(kind),
                    (Operand::Value(_), kind) => is_value_kind(kind),
                };
                let score = (index, shape_ok);
                if best.as_ref().is_none_or(|(s, _)| score > *s) {
                    best = Some((score, e));
                }
            }
        }
    }
    Err(best.map(|(_, e)| e).unwrap_or_else(|| {
        let mut counts: Vec<usize> = rows.iter().map(|r| r.operands.len()).collect();
        counts.sort_unstable();
        counts.dedup();
        let counts: Vec<String> = counts.iter().map(|c| c.to_string()).collect();
        InstError {
            operand: None,
            message: format!(
                "`{mnemonic}` takes {} operand(s), not {}",
                counts.join(" or "),
                operands.len()
            ),
        }
    }))
}

fn encode_row(row: &OpInfo, operands: &[Operand]) -> Result<Encoded, InstError> {
    let mut word = row.pattern;
    let mut fixup = None;
    for (index, ((kind, field), operand)) in row.operands.iter().zip(operands).enumerate() {
        let err = |message: String| InstError {
            operand: Some(index),
            message,
        };
        let value = match operand {
            Operand::Register(name) => register(*kind, name).map_err(err)?,
            Operand::Value(value) => match immediate(*kind, value).map_err(err)? {
                Imm::Bits(bits) => bits,
                Imm::Reloc(f) => {
                    fixup = Some(f);
                    0
                }
            },
        };
        word |= place(*field, value);
    }
    Ok(Encoded { word, fixup })
}

/// Encodes a typed instruction: the inverse of [`super::decode()`]. Register
/// operands come from `inst.r` in operand order and the immediate from
/// `inst.imm`, checked exactly as `assemble` checks written operands, so
/// code built as [`Inst`]s encodes to the same words as its text would.
pub(super) fn encode(inst: &Inst) -> Result<u32, InstError> {
    let row = inst.info();
    let mut word = row.pattern;
    let mut slot = 0;
    for (index, (kind, field)) in row.operands.iter().enumerate() {
        let err = |message: String| InstError {
            operand: Some(index),
            message: format!("`{}`: {message}", row.mnemonic),
        };
        let value = if kind.is_immediate() {
            constant(*kind, i64::from(inst.imm)).map_err(err)?
        } else {
            let raw = u32::from(inst.r[slot]);
            slot += 1;
            let valid = match kind {
                Kind::APair => raw % 2 == 0,
                Kind::AQuad => raw % 4 == 0,
                Kind::MTriple => raw <= 12,
                Kind::CReg => ControlReg::from_index(raw as u8).is_some(),
                Kind::Len8 => (1..=255).contains(&raw),
                _ => true,
            };
            if !valid || raw > field.mask() >> field.shift {
                return Err(err(format!("{raw} is not {}", expects(*kind))));
            }
            raw
        };
        word |= place(*field, value);
    }
    Ok(word)
}

fn is_value_kind(kind: Kind) -> bool {
    kind.is_immediate() || kind == Kind::Len8
}

fn place(field: Field, value: u32) -> u32 {
    (value << field.shift) & field.mask()
}

fn register(kind: Kind, name: &str) -> Result<u32, String> {
    let parsed = match kind {
        Kind::M => regs::parse_single(name, 'm'),
        Kind::A => regs::parse_single(name, 'a'),
        Kind::MInc => name
            .strip_suffix("+=")
            .and_then(|n| regs::parse_single(n, 'm')),
        Kind::MTriple => name
            .strip_suffix("+=")
            .and_then(|n| regs::parse_range(n, 'm', 3))
            .filter(|first| *first <= 12),
        Kind::APair => regs::parse_range(name, 'a', 2).filter(|f| f % 2 == 0),
        Kind::AQuad => regs::parse_range(name, 'a', 4).filter(|f| f % 4 == 0),
        Kind::CReg => ControlReg::from_name(name).map(ControlReg::index),
        _ => {
            return Err(format!(
                "expected {}, found register `${name}`",
                expects(kind)
            ))
        }
    };
    parsed
        .map(u32::from)
        .ok_or_else(|| format!("expected {}, found `${name}`", expects(kind)))
}

enum Imm {
    Bits(u32),
    Reloc(Fixup),
}

fn immediate(kind: Kind, value: &Value) -> Result<Imm, String> {
    let range = range(kind)?;
    match value {
        Value::Const(v) => in_range(kind, range, *v).map(Imm::Bits),
        Value::Symbol { name, addend } if kind == Kind::Addr21 => Ok(Imm::Reloc(Fixup {
            kind: RelocKind::Abs21,
            symbol: name.clone(),
            addend: *addend,
        })),
        Value::Symbol { name, .. } => Err(format!(
            "`{name}` is not a constant; only 21-bit address operands take symbols"
        )),
    }
}

/// The values an immediate operand of `kind` takes.
fn range(kind: Kind) -> Result<(i64, i64), String> {
    Ok(match kind {
        Kind::SImm16 => (-0x8000, 0x7FFF),
        Kind::UImm16 | Kind::Count16 => (0, 0xFFFF),
        Kind::Shift => (0, 31),
        Kind::Len8 => (1, 255),
        Kind::AccPair => (0, 1),
        Kind::Addr21 => (0, (1 << 21) - 1),
        _ => return Err(format!("expected {}, found a value", expects(kind))),
    })
}

/// A constant's bits in an immediate field of `kind`.
fn constant(kind: Kind, v: i64) -> Result<u32, String> {
    in_range(kind, range(kind)?, v)
}

fn in_range(kind: Kind, range: (i64, i64), v: i64) -> Result<u32, String> {
    if !(range.0..=range.1).contains(&v) {
        return Err(format!(
            "{v} is out of range for {} ({}..={})",
            expects(kind),
            range.0,
            range.1
        ));
    }
    Ok(if kind == Kind::SImm16 {
        (v as i16) as u16 as u32
    } else {
        v as u32
    })
}

fn expects(kind: Kind) -> &'static str {
    match kind {
        Kind::M => "an `$m` register",
        Kind::MInc => "a post-incremented `$m` register (`$mN+=`)",
        Kind::MTriple => "three post-incremented `$m` registers (`$mN:N+2+=`, N <= 12)",
        Kind::A => "an `$a` register",
        Kind::APair => "an `$a` register pair (`$aN:N+1`, N even)",
        Kind::AQuad => "an `$a` register quad (`$aN:N+3`, N a multiple of 4)",
        Kind::CReg => "a control register (`$fp8cfg`, `$wid`, `$tile`, `$wstatus`)",
        Kind::SImm16 => "a signed 16-bit immediate",
        Kind::UImm16 => "an unsigned 16-bit immediate",
        Kind::Shift => "a shift amount",
        Kind::Addr21 => "a 21-bit address",
        Kind::Count16 => "a repeat count",
        Kind::Len8 => "a repeat body length in words",
        Kind::AccPair => "a vector accumulator pair (0 or 1)",
    }
}
