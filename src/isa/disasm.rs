//! Disassembly: text that `assemble` accepts back.

use super::decode::{decode, Inst};
use super::regs::{a_name, m_name, ControlReg};
use super::table::{Kind, Pipe};
use std::fmt;

impl fmt::Display for Inst {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let info = self.info();
        f.write_str(info.mnemonic)?;
        let mut slot = 0;
        for (index, (kind, _)) in info.operands.iter().enumerate() {
            f.write_str(if index == 0 { " " } else { ", " })?;
            if kind.is_immediate() {
                match kind {
                    Kind::Addr21 => write!(f, "{:#x}", self.imm)?,
                    _ => write!(f, "{}", self.imm)?,
                }
                continue;
            }
            let r = self.r[slot];
            slot += 1;
            match kind {
                Kind::M => f.write_str(&m_name(r))?,
                Kind::MInc => write!(f, "{}+=", m_name(r))?,
                Kind::MTriple => write!(f, "$m{}:{}+=", r, r + 2)?,
                Kind::A => f.write_str(&a_name(r))?,
                Kind::APair => write!(f, "$a{}:{}", r, r + 1)?,
                Kind::AQuad => write!(f, "$a{}:{}", r, r + 3)?,
                Kind::CReg => match ControlReg::from_index(r) {
                    Some(c) => write!(f, "${}", c.name())?,
                    None => write!(f, "$creg{r}")?,
                },
                Kind::Len8 => write!(f, "{r}")?,
                _ => write!(f, "?")?,
            }
        }
        Ok(())
    }
}

/// One disassembled line: a single instruction, a bundle, or an
/// undecodable word shown as `.word`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DisasmLine {
    pub address: u32,
    pub words: Vec<u32>,
    /// Assembler syntax: `assemble` (or the assembler's `.word`) accepts it.
    pub text: String,
}

impl fmt::Display for DisasmLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let words: Vec<String> = self.words.iter().map(|w| format!("{w:08x}")).collect();
        write!(
            f,
            "{:05x}  {:<17}  {}",
            self.address,
            words.join(" "),
            self.text
        )
    }
}

/// Whether `main` at an 8-byte aligned address and `aux` after it issue
/// together as a bundle: a main-pipeline instruction that does not change
/// control flow followed by an aux-pipeline one.
pub fn pairs(main: &Inst, aux: &Inst) -> bool {
    let (m, a) = (main.info(), aux.info());
    m.pipe == Pipe::Main && !m.control && a.pipe == Pipe::Aux
}

/// Disassembles little-endian words starting at `address` (4-byte aligned).
/// Pairs that issue together are printed as `{ main ; aux }`; trailing
/// bytes that do not fill a word are ignored.
pub fn disassemble(bytes: &[u8], address: u32) -> Vec<DisasmLine> {
    let words: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let mut lines = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let at = address.wrapping_add(4 * i as u32);
        let first = decode(words[i]);
        if let (Ok(main), true) = (&first, at.is_multiple_of(8) && i + 1 < words.len()) {
            if let Ok(aux) = decode(words[i + 1]) {
                if pairs(main, &aux) {
                    lines.push(DisasmLine {
                        address: at,
                        words: vec![words[i], words[i + 1]],
                        text: format!("{{ {main} ; {aux} }}"),
                    });
                    i += 2;
                    continue;
                }
            }
        }
        let text = match first {
            Ok(inst) => inst.to_string(),
            Err(_) => format!(".word {:#010x}", words[i]),
        };
        lines.push(DisasmLine {
            address: at,
            words: vec![words[i]],
            text,
        });
        i += 1;
    }
    lines
}
