//! Kernel variants, their metadata and their compilation.
//!
//! A variant is one kernel source assembled with a set of defines, named the
//! way the planner names it (`gemm_f8_interleaved_k32_c16_r2`). Compiling a
//! variant gives a [`Object`] and a [`KernelMetadata`] (`kernel.json`):
//! entry points with their calling convention (the `.ipub_param` fields of
//! their state struct) and cycle-cost formula (`.ipub_cost`), and section
//! sizes. [`cache`] stores both by content hash.

pub mod cache;

use crate::asm::{self, AsmError, AssembleOptions, Object, Preprocessed, Sources};
use crate::target::Target;
use camino::Utf8PathBuf;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One kernel variant: a source, an optional entry symbol and defines.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Variant {
    pub name: String,
    pub source: Utf8PathBuf,
    /// The one entry point to export; `None` exports every global label in
    /// a code section.
    pub entry: Option<String>,
    pub defines: BTreeMap<String, String>,
    /// Directories searched for `#include` after the source's own.
    pub include_dirs: Vec<Utf8PathBuf>,
}

impl Variant {
    pub(crate) fn new(name: impl Into<String>, source: impl Into<Utf8PathBuf>) -> Variant {
        Variant {
            name: name.into(),
            source: source.into(),
            entry: None,
            defines: BTreeMap::new(),
            include_dirs: Vec::new(),
        }
    }

    pub(crate) fn define(mut self, name: impl Into<String>, value: impl ToString) -> Variant {
        self.defines.insert(name.into(), value.to_string());
        self
    }

    pub fn entry(mut self, symbol: impl Into<String>) -> Variant {
        self.entry = Some(symbol.into());
        self
    }
}

/// Version of the `kernel.json` layout. Version 2 added `checksum`; an
/// entry of another version is stale and is recompiled.
pub(crate) const METADATA_FORMAT: u32 = 2;

/// `kernel.json`: what the planner, placer and emitter need to know about a
/// compiled variant without reading its object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelMetadata {
    pub format: u32,
    /// The cache key the entry was stored under.
    pub key: String,
    pub name: String,
    pub source: String,
    pub target: String,
    pub defines: BTreeMap<String, String>,
    /// Every file the assembly read (the source first, then its includes).
    pub files: Vec<String>,
    pub entries: Vec<EntryMetadata>,
    pub sections: Vec<SectionMetadata>,
    /// blake3 of `kernel.o`, so a torn or swapped pair is detected.
    pub object_hash: String,
    /// The assembler's build identity.
    pub assembler: String,
    /// blake3 over the key, `kernel.o` and every other field of this
    /// metadata ([`KernelMetadata::entry_checksum`]), so damage to either
    /// file, or a whole entry filed under another key, is detected: the
    /// object hash alone leaves the rest of the metadata (parameter
    /// offsets, cost formulas) unchecked. Absent in entries of format 1.
    #[serde(default)]
    pub checksum: String,
}

impl KernelMetadata {
    /// The checksum an entry of this metadata and `object_bytes` carries:
    /// blake3 over the key, the object and the metadata's compact JSON
    /// with `checksum` left empty. A reader recomputes it from what it
    /// parsed, so any field whose value differs from the one written
    /// changes it.
    pub(crate) fn entry_checksum(&self, object_bytes: &[u8]) -> String {
        let unsealed = KernelMetadata {
            checksum: String::new(),
            ..self.clone()
        };
        let json = serde_json::to_vec(&unsealed).expect("kernel metadata serializes");
        let mut hasher = blake3::Hasher::new();
        for part in [
            b"ipub kernel entry v1".as_slice(),
            self.key.as_bytes(),
            object_bytes,
            &json,
        ] {
            hasher.update(&(part.len() as u64).to_le_bytes());
            hasher.update(part);
        }
        hasher.finalize().to_hex().to_string()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryMetadata {
    pub symbol: String,
    pub section: String,
    pub offset: u32,
    pub size: u32,
    /// The state struct's fields, in offset order.
    pub params: Vec<ParamMetadata>,
    pub cost: Option<CostMetadata>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamMetadata {
    pub name: String,
    pub offset: u32,
    pub kind: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CostMetadata {
    /// An expression over the variant's defines and the run's parameters
    /// (`+ - * / % << >> & | ^`, comparisons, `?:`), optionally after
    /// `name = expression;` bindings; see [`eval_cost`].
    pub formula: String,
    /// The formula evaluated with this variant's defines, when they are all
    /// integers.
    pub cycles: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SectionMetadata {
    pub name: String,
    pub code: bool,
    pub align: u32,
    pub size: u32,
}

/// Evaluates a cost formula with `values` bound to its names.
pub fn eval_cost(formula: &str, values: &BTreeMap<String, i64>) -> Result<i64, asm::FormulaError> {
    asm::eval_cost_formula(formula, &|name| values.get(name).copied())
}

/// Why a variant did not compile.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error("could not assemble `{source_path}` due to {} previous error{}", errors.len(), if errors.len() == 1 { "" } else { "s" })]
    Assembly {
        source_path: Utf8PathBuf,
        errors: Vec<AsmError>,
        /// The errors rendered rustc-style.
        rendered: String,
    },
    #[error("entry point `{entry}` of kernel `{variant}` is not a label in a code section")]
    MissingEntry { variant: String, entry: String },
    #[error("kernel `{variant}` has no entry point: no global label in a code section")]
    NoEntries { variant: String },
    #[error("kernel cache at {path}: {source}")]
    Cache {
        path: Utf8PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A compiled variant: the object, its bytes and its metadata.
#[derive(Clone, Debug)]
pub struct Compiled {
    pub object: Object,
    pub object_bytes: Vec<u8>,
    pub metadata: KernelMetadata,
}

/// The assembly options of a variant.
pub fn options(variant: &Variant) -> AssembleOptions {
    AssembleOptions {
        defines: variant.defines.clone(),
        include_dirs: variant.include_dirs.clone(),
    }
}

/// Assembles preprocessed lines of `variant` and builds its metadata.
pub fn compile_preprocessed(
    pre: Preprocessed,
    variant: &Variant,
    target: &Target,
    key: &str,
) -> Result<Compiled, KernelError> {
    let assembly = asm::assemble_preprocessed(pre);
    let files: Vec<String> = assembly
        .files_read()
        .into_iter()
        .map(|(p, _)| p.to_string())
        .collect();
    let Some(object) = assembly.object.clone() else {
        return Err(assembly_error(variant, assembly.errors, &assembly.sources));
    };
    // A missing entry point is reported like the assembler's errors, at
    // the source it is missing from.
    let entries = entries(&object, variant).map_err(|error| {
        let at = crate::asm::source::Pos {
            file: 0,
            line: 1,
            col: 0,
        };
        let mut located = assembly.sources.error(
            crate::asm::ErrorKind::UndefinedSymbol,
            error.to_string(),
            at,
            1,
            None,
        );
        located.label = "in this source".into();
        assembly_error(variant, vec![located], &assembly.sources)
    })?;
    let object_bytes = object.write();
    let mut metadata = KernelMetadata {
        format: METADATA_FORMAT,
        key: key.to_string(),
        name: variant.name.clone(),
        source: variant.source.to_string(),
        target: target.name.to_string(),
        defines: variant.defines.clone(),
        files,
        entries,
        sections: object
            .sections
            .iter()
            .map(|s| SectionMetadata {
                name: s.name.clone(),
                code: s.code,
                align: s.align,
                size: s.bytes.len() as u32,
            })
            .collect(),
        object_hash: blake3::hash(&object_bytes).to_hex().to_string(),
        assembler: cache::BUILD_IDENTITY.to_string(),
        checksum: String::new(),
    };
    metadata.checksum = metadata.entry_checksum(&object_bytes);
    Ok(Compiled {
        object,
        object_bytes,
        metadata,
    })
}

fn assembly_error(variant: &Variant, errors: Vec<AsmError>, sources: &Sources) -> KernelError {
    KernelError::Assembly {
        source_path: variant.source.clone(),
        rendered: sources.render(&errors),
        errors,
    }
}

/// The entry points a variant exports, with their conventions and costs.
fn entries(object: &Object, variant: &Variant) -> Result<Vec<EntryMetadata>, KernelError> {
    let integer_defines: BTreeMap<String, i64> = variant
        .defines
        .iter()
        .filter_map(|(k, v)| asm::lex::parse_int(v.trim()).map(|n| (k.clone(), n)))
        .collect();
    let in_code = |s: &asm::Symbol| {
        s.section
            .and_then(|i| object.sections.get(i as usize))
            .is_some_and(|sec| sec.code)
    };
    let chosen: Vec<&asm::Symbol> = match &variant.entry {
        Some(entry) => {
            let symbol = object
                .symbols
                .iter()
                .find(|s| &s.name == entry && in_code(s))
                .ok_or_else(|| KernelError::MissingEntry {
                    variant: variant.name.clone(),
                    entry: entry.clone(),
                })?;
            vec![symbol]
        }
        None => object
            .symbols
            .iter()
            .filter(|s| s.global && in_code(s))
            .collect(),
    };
    if chosen.is_empty() {
        return Err(KernelError::NoEntries {
            variant: variant.name.clone(),
        });
    }
    Ok(chosen
        .into_iter()
        .map(|symbol| {
            let info = object.functions.iter().find(|f| f.symbol == symbol.name);
            let mut params: Vec<ParamMetadata> = info
                .map(|f| {
                    f.params
                        .iter()
                        .map(|p| ParamMetadata {
                            name: p.name.clone(),
                            offset: p.offset,
                            kind: p.kind.name().to_string(),
                        })
                        .collect()
                })
                .unwrap_or_default();
            params.sort_by_key(|p| p.offset);
            let cost = info
                .and_then(|f| f.cost.clone())
                .map(|formula| CostMetadata {
                    cycles: eval_cost(&formula, &integer_defines).ok(),
                    formula,
                });
            let section = symbol
                .section
                .and_then(|i| object.sections.get(i as usize))
                .map_or(String::new(), |s| s.name.clone());
            EntryMetadata {
                symbol: symbol.name.clone(),
                section,
                offset: symbol.value as u32,
                size: symbol.size,
                params,
                cost,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests;
