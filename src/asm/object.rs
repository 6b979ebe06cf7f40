//! The relocatable kernel object (`kernel.o`) and its binary form.
//!
//! The layout is documented in `book/src/object-format.md`. Everything is
//! little-endian; strings are a `u32` byte length and UTF-8 bytes. The file
//! ends with the first 16 bytes of the blake3 hash of everything before it,
//! so a flipped bit anywhere is detected before any field is trusted, and
//! [`Object::read`] then checks every field (indices, offsets, alignment,
//! relocation kinds) so a bad file is an error, never a panic.

use crate::isa::RelocKind;
use std::fmt::Write as _;

/// `kernel.o` magic bytes.
pub(super) const MAGIC: [u8; 8] = *b"IPUBOBJ\0";
/// Bumped whenever the layout changes; older files are rejected.
pub(super) const VERSION: u32 = 1;
const CHECKSUM_BYTES: usize = 16;
/// Magic, version and total length.
const HEADER_BYTES: usize = 16;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Object {
    pub sections: Vec<Section>,
    pub symbols: Vec<Symbol>,
    pub relocations: Vec<Relocation>,
    /// Calling conventions and cost formulas of the kernel's functions.
    pub functions: Vec<FunctionInfo>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    pub name: String,
    /// Code sections hold instructions and must be placed in region 0.
    pub code: bool,
    /// Required alignment of the section's address (a power of two).
    pub align: u32,
    pub bytes: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    pub name: String,
    /// The section the symbol is defined in; `None` for an absolute value.
    pub section: Option<u32>,
    /// Offset in the section, or the absolute value.
    pub value: i64,
    pub size: u32,
    pub global: bool,
    pub function: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Relocation {
    pub section: u32,
    /// Byte offset of the patched word in the section (4-byte aligned).
    pub offset: u32,
    pub kind: RelocKind,
    pub symbol: String,
    pub addend: i64,
}

/// What a kernel entry point expects: its state struct and its cost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionInfo {
    pub symbol: String,
    pub params: Vec<Param>,
    /// A cycle-cost formula over the variant's defines (see the assembler
    /// chapter of the book).
    pub cost: Option<String>,
}

/// One field of a kernel's state struct (`.ipub_param name, offset, kind`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    pub offset: u32,
    pub kind: ParamKind,
}

/// The kinds of state fields a kernel can declare.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParamKind {
    /// A tile address (32 bits).
    Ptr,
    U32,
    I32,
    F32,
    U16,
    F16,
}

impl ParamKind {
    pub(super) const ALL: [ParamKind; 6] = [
        ParamKind::Ptr,
        ParamKind::U32,
        ParamKind::I32,
        ParamKind::F32,
        ParamKind::U16,
        ParamKind::F16,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            ParamKind::Ptr => "ptr",
            ParamKind::U32 => "u32",
            ParamKind::I32 => "i32",
            ParamKind::F32 => "f32",
            ParamKind::U16 => "u16",
            ParamKind::F16 => "f16",
        }
    }

    pub(super) fn from_name(name: &str) -> Option<ParamKind> {
        ParamKind::ALL.into_iter().find(|k| k.name() == name)
    }

    pub(super) fn size(self) -> u32 {
        match self {
            ParamKind::U16 | ParamKind::F16 => 2,
            _ => 4,
        }
    }
}

/// Why bytes are not a valid `kernel.o`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ObjectError {
    #[error("not a kernel object (bad magic)")]
    BadMagic,
    #[error("kernel object version {found} is not supported (expected {VERSION})")]
    Version { found: u32 },
    #[error("kernel object is truncated")]
    Truncated,
    #[error("kernel object checksum mismatch: the file is corrupted")]
    Checksum,
    #[error("kernel object is invalid: {0}")]
    Invalid(String),
}

impl Object {
    pub(super) fn section_index(&self, name: &str) -> Option<usize> {
        self.sections.iter().position(|s| s.name == name)
    }

    pub(super) fn symbol(&self, name: &str) -> Option<&Symbol> {
        self.symbols.iter().find(|s| s.name == name)
    }

    /// Serializes to the documented binary form.
    pub(crate) fn write(&self) -> Vec<u8> {
        let mut w = Writer(Vec::new());
        w.0.extend_from_slice(&MAGIC);
        w.u32(VERSION);
        // The total length, patched below, tells truncation from corruption.
        w.u32(0);
        w.u32(self.sections.len() as u32);
        for s in &self.sections {
            w.str(&s.name);
            w.u32(u32::from(s.code));
            w.u32(s.align);
            w.u32(s.bytes.len() as u32);
            w.0.extend_from_slice(&s.bytes);
        }
        w.u32(self.symbols.len() as u32);
        for s in &self.symbols {
            w.str(&s.name);
            w.u32(s.section.unwrap_or(u32::MAX));
            w.i64(s.value);
            w.u32(s.size);
            w.u32(u32::from(s.global) | u32::from(s.function) << 1);
        }
        w.u32(self.relocations.len() as u32);
        for r in &self.relocations {
            w.u32(r.section);
            w.u32(r.offset);
            w.str(r.kind.name());
            w.str(&r.symbol);
            w.i64(r.addend);
        }
        w.u32(self.functions.len() as u32);
        for f in &self.functions {
            w.str(&f.symbol);
            w.str(f.cost.as_deref().unwrap_or(""));
            w.u32(f.params.len() as u32);
            for p in &f.params {
                w.str(&p.name);
                w.u32(p.offset);
                w.str(p.kind.name());
            }
        }
        let total = (w.0.len() + CHECKSUM_BYTES) as u32;
        w.0[12..16].copy_from_slice(&total.to_le_bytes());
        let hash = blake3::hash(&w.0);
        w.0.extend_from_slice(&hash.as_bytes()[..CHECKSUM_BYTES]);
        w.0
    }

    /// Parses and validates the binary form.
    pub(crate) fn read(bytes: &[u8]) -> Result<Object, ObjectError> {
        if bytes.len() < MAGIC.len() || bytes[..MAGIC.len()] != MAGIC {
            return Err(if MAGIC.starts_with(bytes) {
                ObjectError::Truncated
            } else {
                ObjectError::BadMagic
            });
        }
        if bytes.len() < HEADER_BYTES + CHECKSUM_BYTES {
            return Err(ObjectError::Truncated);
        }
        let version = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
        if version != VERSION {
            return Err(ObjectError::Version { found: version });
        }
        let total = u32::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]) as usize;
        if bytes.len() < total {
            return Err(ObjectError::Truncated);
        }
        if bytes.len() > total {
            return Err(invalid(format!(
                "{} bytes after the end of the object",
                bytes.len() - total
            )));
        }
        let (body, checksum) = bytes.split_at(bytes.len() - CHECKSUM_BYTES);
        if blake3::hash(body).as_bytes()[..CHECKSUM_BYTES] != *checksum {
            return Err(ObjectError::Checksum);
        }
        let mut r = Reader {
            bytes: body,
            at: HEADER_BYTES,
        };
        let mut object = Object {
            sections: Vec::new(),
            symbols: Vec::new(),
            relocations: Vec::new(),
            functions: Vec::new(),
        };
        for _ in 0..r.count()? {
            let name = r.str()?;
            let code = r.flag()?;
            let align = r.u32()?;
            let len = r.u32()? as usize;
            let bytes = r.take(len)?.to_vec();
            object.sections.push(Section {
                name,
                code,
                align,
                bytes,
            });
        }
        for _ in 0..r.count()? {
            let name = r.str()?;
            let section = r.u32()?;
            let value = r.i64()?;
            let size = r.u32()?;
            let flags = r.u32()?;
            if flags > 3 {
                return Err(invalid(format!(
                    "symbol `{name}` has unknown flags {flags:#x}"
                )));
            }
            object.symbols.push(Symbol {
                name,
                section: (section != u32::MAX).then_some(section),
                value,
                size,
                global: flags & 1 != 0,
                function: flags & 2 != 0,
            });
        }
        for _ in 0..r.count()? {
            let section = r.u32()?;
            let offset = r.u32()?;
            let kind_name = r.str()?;
            let kind = RelocKind::from_name(&kind_name)
                .ok_or_else(|| invalid(format!("unknown relocation kind `{kind_name}`")))?;
            let symbol = r.str()?;
            let addend = r.i64()?;
            object.relocations.push(Relocation {
                section,
                offset,
                kind,
                symbol,
                addend,
            });
        }
        for _ in 0..r.count()? {
            let symbol = r.str()?;
            let cost = r.str()?;
            let mut params = Vec::new();
            for _ in 0..r.count()? {
                let name = r.str()?;
                let offset = r.u32()?;
                let kind_name = r.str()?;
                let kind = ParamKind::from_name(&kind_name)
                    .ok_or_else(|| invalid(format!("unknown parameter kind `{kind_name}`")))?;
                params.push(Param { name, offset, kind });
            }
            object.functions.push(FunctionInfo {
                symbol,
                params,
                cost: (!cost.is_empty()).then_some(cost),
            });
        }
        if r.at != body.len() {
            return Err(invalid(format!(
                "{} unexpected bytes after the last table",
                body.len() - r.at
            )));
        }
        object.validate()?;
        Ok(object)
    }

    /// Checks the cross-references a reader must be able to trust.
    pub(super) fn validate(&self) -> Result<(), ObjectError> {
        for (i, s) in self.sections.iter().enumerate() {
            if !s.align.is_power_of_two() {
                return Err(invalid(format!(
                    "section `{}` alignment {} is not a power of two",
                    s.name, s.align
                )));
            }
            if self.sections[..i].iter().any(|o| o.name == s.name) {
                return Err(invalid(format!("section `{}` appears twice", s.name)));
            }
        }
        for s in &self.symbols {
            if let Some(index) = s.section {
                let section = self.sections.get(index as usize).ok_or_else(|| {
                    invalid(format!(
                        "symbol `{}` names section {index}, which does not exist",
                        s.name
                    ))
                })?;
                if s.value < 0 || s.value as u64 + u64::from(s.size) > section.bytes.len() as u64 {
                    return Err(invalid(format!(
                        "symbol `{}` lies outside section `{}`",
                        s.name, section.name
                    )));
                }
            }
        }
        for r in &self.relocations {
            let section = self.sections.get(r.section as usize).ok_or_else(|| {
                invalid(format!(
                    "relocation names section {}, which does not exist",
                    r.section
                ))
            })?;
            if r.offset % 4 != 0 || u64::from(r.offset) + 4 > section.bytes.len() as u64 {
                return Err(invalid(format!(
                    "relocation at {:#x} is outside or misaligned in section `{}`",
                    r.offset, section.name
                )));
            }
        }
        for f in &self.functions {
            if self.symbol(&f.symbol).is_none() {
                return Err(invalid(format!(
                    "function info names unknown symbol `{}`",
                    f.symbol
                )));
            }
        }
        Ok(())
    }

    /// A stable text listing: sections (hex words), symbols, relocations,
    /// functions. Disassembly is the CLI's business; this is the raw view.
    pub fn dump(&self) -> String {
        let mut out = String::new();
        for (i, s) in self.sections.iter().enumerate() {
            let kind = if s.code { "code" } else { "data" };
            let _ = writeln!(
                out,
                "section {i} {} {kind} align={} size={}",
                s.name,
                s.align,
                s.bytes.len()
            );
            for (offset, chunk) in s.bytes.chunks(16).enumerate() {
                let words: Vec<String> = chunk
                    .chunks(4)
                    .map(|w| w.iter().rev().map(|b| format!("{b:02x}")).collect())
                    .collect();
                let _ = writeln!(out, "  {:04x}: {}", offset * 16, words.join(" "));
            }
        }
        for s in &self.symbols {
            let place = match s.section {
                Some(index) => {
                    let name = self
                        .sections
                        .get(index as usize)
                        .map_or("?", |s| s.name.as_str());
                    format!("{name}+{:#x}", s.value)
                }
                None => format!("abs {:#x}", s.value),
            };
            let binding = if s.global { "global" } else { "local" };
            let kind = if s.function { " function" } else { "" };
            let _ = writeln!(
                out,
                "symbol {} {place} size={} {binding}{kind}",
                s.name, s.size
            );
        }
        for r in &self.relocations {
            let name = self
                .sections
                .get(r.section as usize)
                .map_or("?", |s| s.name.as_str());
            let _ = writeln!(
                out,
                "reloc {name}+{:#x} {} {}{:+}",
                r.offset,
                r.kind.name(),
                r.symbol,
                r.addend
            );
        }
        for f in &self.functions {
            let _ = writeln!(
                out,
                "function {} cost={}",
                f.symbol,
                f.cost.as_deref().unwrap_or("-")
            );
            for p in &f.params {
                let _ = writeln!(
                    out,
                    "  param {} offset={} {}",
                    p.name,
                    p.offset,
                    p.kind.name()
                );
            }
        }
        out
    }
}

fn invalid(message: String) -> ObjectError {
    ObjectError::Invalid(message)
}

struct Writer(Vec<u8>);

impl Writer {
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn str(&mut self, s: &str) {
        self.u32(s.len() as u32);
        self.0.extend_from_slice(s.as_bytes());
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8], ObjectError> {
        let end = self.at.checked_add(len).ok_or(ObjectError::Truncated)?;
        let slice = self.bytes.get(self.at..end).ok_or(ObjectError::Truncated)?;
        self.at = end;
        Ok(slice)
    }
    fn u32(&mut self) -> Result<u32, ObjectError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn i64(&mut self) -> Result<i64, ObjectError> {
        let b = self.take(8)?;
        let mut a = [0; 8];
        a.copy_from_slice(b);
        Ok(i64::from_le_bytes(a))
    }
    fn flag(&mut self) -> Result<bool, ObjectError> {
        match self.u32()? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(invalid(format!("flag value {other} is not 0 or 1"))),
        }
    }
    /// A table length, bounded by the bytes left so a corrupted count cannot
    /// make the reader allocate or loop without end.
    fn count(&mut self) -> Result<usize, ObjectError> {
        let n = self.u32()? as usize;
        if n > self.bytes.len() - self.at {
            return Err(ObjectError::Truncated);
        }
        Ok(n)
    }
    fn str(&mut self) -> Result<String, ObjectError> {
        let len = self.u32()? as usize;
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| invalid("a name is not UTF-8".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Object {
        Object {
            sections: vec![
                Section {
                    name: ".text".into(),
                    code: true,
                    align: 8,
                    bytes: vec![1, 0, 0, 0, 0, 0, 0, 0],
                },
                Section {
                    name: ".data".into(),
                    code: false,
                    align: 4,
                    bytes: vec![0; 4],
                },
            ],
            symbols: vec![
                Symbol {
                    name: "entry".into(),
                    section: Some(0),
                    value: 0,
                    size: 8,
                    global: true,
                    function: true,
                },
                Symbol {
                    name: "N".into(),
                    section: None,
                    value: -3,
                    size: 0,
                    global: true,
                    function: false,
                },
            ],
            relocations: vec![Relocation {
                section: 1,
                offset: 0,
                kind: RelocKind::Abs32,
                symbol: "entry".into(),
                addend: 4,
            }],
            functions: vec![FunctionInfo {
                symbol: "entry".into(),
                params: vec![Param {
                    name: "out".into(),
                    offset: 0,
                    kind: ParamKind::Ptr,
                }],
                cost: Some("K * 2".into()),
            }],
        }
    }

    #[test]
    fn round_trips() {
        let object = sample();
        assert_eq!(Object::read(&object.write()), Ok(object));
    }

    #[test]
    fn every_truncation_and_every_flipped_byte_is_an_error() {
        let bytes = sample().write();
        for len in 0..bytes.len() {
            assert!(Object::read(&bytes[..len]).is_err(), "truncated to {len}");
        }
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert!(Object::read(&bad).is_err(), "flipped byte {i}");
        }
    }

    #[test]
    fn a_well_formed_file_with_bad_references_is_rejected() {
        let mut object = sample();
        object.relocations[0].offset = 2;
        assert_eq!(
            Object::read(&object.write()),
            Err(ObjectError::Invalid(
                "relocation at 0x2 is outside or misaligned in section `.data`".into()
            ))
        );
        let mut object = sample();
        object.symbols[0].section = Some(9);
        assert!(Object::read(&object.write()).is_err());
    }
}
