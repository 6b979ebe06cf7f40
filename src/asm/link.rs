//! The linker: places objects' sections at tile addresses, resolves symbols
//! across objects and applies relocations through [`crate::isa::apply_reloc`].
//!
//! A relocation's symbol is looked up in its own object first (local labels
//! included), then among every object's global symbols. Every problem is
//! collected: undefined and duplicate symbols, out-of-range relocations,
//! code outside region 0, sections outside tile memory, misaligned or
//! overlapping placements.

use super::object::Object;
use crate::isa;
use crate::target::Target;
use std::collections::BTreeMap;

/// Where one section of one object goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    pub object: usize,
    pub section: String,
    pub address: u32,
}

impl Placement {
    /// Packs every section one after another: code sections from
    /// `code_start`, data sections from `data_start`, each aligned.
    pub fn pack(objects: &[Object], code_start: u32, data_start: u32) -> Vec<Placement> {
        let (mut code, mut data) = (code_start, data_start);
        let mut placements = Vec::new();
        for (index, object) in objects.iter().enumerate() {
            for section in &object.sections {
                let cursor = if section.code { &mut code } else { &mut data };
                let address = cursor.next_multiple_of(section.align.max(1));
                *cursor = address.saturating_add(section.bytes.len() as u32);
                placements.push(Placement {
                    object: index,
                    section: section.name.clone(),
                    address,
                });
            }
        }
        placements
    }
}

/// A section at its final address with relocations applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlacedSection {
    pub object: usize,
    pub name: String,
    pub address: u32,
    pub code: bool,
    pub bytes: Vec<u8>,
}

/// A global symbol at its final address (or absolute value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkedSymbol {
    pub object: usize,
    pub value: i64,
    pub size: u32,
    pub function: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Linked {
    pub sections: Vec<PlacedSection>,
    /// Global symbols by name.
    pub symbols: BTreeMap<String, LinkedSymbol>,
}

impl Linked {
    #[cfg(test)]
    /// A stable text dump: placed sections, then global symbols.
    pub(super) fn dump(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        for s in &self.sections {
            let end = s.address as u64 + s.bytes.len() as u64;
            let _ = writeln!(
                out,
                "section object={} {} {:#x}..{:#x}",
                s.object, s.name, s.address, end
            );
        }
        for (name, s) in &self.symbols {
            let _ = writeln!(
                out,
                "symbol {name} = {:#x} size={} object={}{}",
                s.value,
                s.size,
                s.object,
                if s.function { " function" } else { "" }
            );
        }
        out
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    #[error("undefined symbol `{symbol}` referenced from object {object} section `{section}` offset {offset:#x}")]
    UndefinedSymbol {
        symbol: String,
        object: usize,
        section: String,
        offset: u32,
    },
    #[error("symbol `{symbol}` is defined in object {first} and object {second}")]
    DuplicateSymbol {
        symbol: String,
        first: usize,
        second: usize,
    },
    #[error("relocation against `{symbol}` at {address:#x} (object {object} section `{section}`) is out of range: {problem}")]
    OutOfRange {
        symbol: String,
        object: usize,
        section: String,
        address: u32,
        problem: crate::isa::RelocError,
    },
    #[error("section `{section}` of object {object} is not placed")]
    NotPlaced { object: usize, section: String },
    #[error("placement names section `{section}` of object {object}, which does not exist")]
    UnknownSection { object: usize, section: String },
    #[error("section `{section}` of object {object} at {address:#x}: {reason}")]
    BadPlacement {
        object: usize,
        section: String,
        address: u32,
        reason: String,
    },
    #[error("section `{first}` overlaps section `{second}`")]
    Overlap { first: String, second: String },
}

/// Links `objects` with every section placed as `placements` says.
pub fn link(
    objects: &[Object],
    placements: &[Placement],
    target: &Target,
) -> Result<Linked, Vec<LinkError>> {
    let mut errors = Vec::new();
    // Section addresses, per object and section index.
    let mut addresses: Vec<Vec<Option<u32>>> = objects
        .iter()
        .map(|o| vec![None; o.sections.len()])
        .collect();
    for p in placements {
        let Some(index) = objects
            .get(p.object)
            .and_then(|o| o.section_index(&p.section))
        else {
            errors.push(LinkError::UnknownSection {
                object: p.object,
                section: p.section.clone(),
            });
            continue;
        };
        let section = &objects[p.object].sections[index];
        let len = section.bytes.len() as u32;
        let memory = &target.memory;
        let bad = |reason: String| LinkError::BadPlacement {
            object: p.object,
            section: p.section.clone(),
            address: p.address,
            reason,
        };
        if p.address % section.align.max(1) != 0 {
            errors.push(bad(format!("not aligned to {} bytes", section.align)));
        } else if !memory.tile.contains_span(p.address, len) {
            errors.push(bad(format!(
                "{len} bytes do not fit in tile memory {:#x}..{:#x}",
                memory.tile.start, memory.tile.end
            )));
        } else if section.code && !memory.region0.contains_span(p.address, len) {
            errors.push(bad(format!(
                "code must lie in region 0 ({:#x}..{:#x})",
                memory.region0.start, memory.region0.end
            )));
        }
        addresses[p.object][index] = Some(p.address);
    }
    let mut spans = Vec::new();
    for (o, object) in objects.iter().enumerate() {
        for (s, section) in object.sections.iter().enumerate() {
            match addresses[o][s] {
                Some(address) => spans.push((
                    address as u64,
                    address as u64 + section.bytes.len() as u64,
                    format!("{}#{o}", section.name),
                )),
                None => errors.push(LinkError::NotPlaced {
                    object: o,
                    section: section.name.clone(),
                }),
            }
        }
    }
    spans.sort();
    for pair in spans.windows(2) {
        if pair[1].0 < pair[0].1 && pair[1].0 < pair[1].1 {
            errors.push(LinkError::Overlap {
                first: pair[0].2.clone(),
                second: pair[1].2.clone(),
            });
        }
    }
    // Value of a symbol of an object: absolute, or section address + offset.
    let value_of = |o: usize, symbol: &super::object::Symbol| -> Option<i64> {
        match symbol.section {
            None => Some(symbol.value),
            Some(s) => addresses[o][s as usize].map(|a| i64::from(a) + symbol.value),
        }
    };
    let mut globals: BTreeMap<String, LinkedSymbol> = BTreeMap::new();
    for (o, object) in objects.iter().enumerate() {
        for symbol in object.symbols.iter().filter(|s| s.global) {
            if let Some(first) = globals.get(&symbol.name) {
                errors.push(LinkError::DuplicateSymbol {
                    symbol: symbol.name.clone(),
                    first: first.object,
                    second: o,
                });
                continue;
            }
            if let Some(value) = value_of(o, symbol) {
                globals.insert(
                    symbol.name.clone(),
                    LinkedSymbol {
                        object: o,
                        value,
                        size: symbol.size,
                        function: symbol.function,
                    },
                );
            }
        }
    }
    let mut sections = Vec::new();
    for (o, object) in objects.iter().enumerate() {
        let mut bytes: Vec<Vec<u8>> = object.sections.iter().map(|s| s.bytes.clone()).collect();
        for r in &object.relocations {
            let section = &object.sections[r.section as usize];
            let Some(base) = addresses[o][r.section as usize] else {
                continue;
            };
            let place = base.wrapping_add(r.offset);
            let local = object
                .symbols
                .iter()
                .find(|s| s.name == r.symbol)
                .and_then(|s| value_of(o, s));
            let Some(value) = local.or_else(|| globals.get(&r.symbol).map(|g| g.value)) else {
                errors.push(LinkError::UndefinedSymbol {
                    symbol: r.symbol.clone(),
                    object: o,
                    section: section.name.clone(),
                    offset: r.offset,
                });
                continue;
            };
            let at = r.offset as usize;
            let target_bytes = &mut bytes[r.section as usize][at..at + 4];
            let word = u32::from_le_bytes([
                target_bytes[0],
                target_bytes[1],
                target_bytes[2],
                target_bytes[3],
            ]);
            match isa::apply_reloc(r.kind, word, value + r.addend, place) {
                Ok(patched) => target_bytes.copy_from_slice(&patched.to_le_bytes()),
                Err(problem) => errors.push(LinkError::OutOfRange {
                    symbol: r.symbol.clone(),
                    object: o,
                    section: section.name.clone(),
                    address: place,
                    problem,
                }),
            }
        }
        for (s, section) in object.sections.iter().enumerate() {
            if let Some(address) = addresses[o][s] {
                sections.push(PlacedSection {
                    object: o,
                    name: section.name.clone(),
                    address,
                    code: section.code,
                    bytes: std::mem::take(&mut bytes[s]),
                });
            }
        }
    }
    if errors.is_empty() {
        sections.sort_by_key(|s| s.address);
        Ok(Linked {
            sections,
            symbols: globals,
        })
    } else {
        Err(errors)
    }
}
