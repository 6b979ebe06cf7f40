//! Kernel variants as queries: one per variant the program runs.
//!
//! A plan names a kernel variant (`gemm_f8_interleaved_k384_c16_r25`,
//! `softmax_f16_causal`); [`variant_of`] maps the name to its source in the
//! project's kernel directory, its entry symbol and its defines, and
//! [`kernel_object`] assembles it. The query reads the source and its
//! includes through the database, so editing one kernel source re-runs only
//! the variants built from it; the on-disk kernel cache makes a fresh
//! process reuse objects compiled before.

use crate::db::{Db, DbFiles};
use crate::kernels::{self, Variant};
use crate::target::Target;
use camino::{Utf8Path, Utf8PathBuf};
use std::sync::Arc;

/// A kernel variant of one project, by name and kernel directory.
#[salsa::interned(debug)]
pub struct KernelVariant<'db> {
    #[returns(ref)]
    pub name: String,
    #[returns(ref)]
    pub kernel_dir: Utf8PathBuf,
}

/// A compiled variant, cheap to clone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelObject {
    pub variant: String,
    /// The files it was assembled from (source and includes).
    pub sources: Vec<Utf8PathBuf>,
    /// The kernel cache's key: a hash of everything it was built from.
    pub key: String,
    pub object: crate::asm::Object,
    pub metadata: kernels::KernelMetadata,
}

/// Why a variant is not available.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KernelBuildError {
    #[error("no kernel source provides `{0}`")]
    UnknownVariant(String),
    /// The assembler's errors, rendered with their source lines, and as
    /// located diagnostics (for editors and JSON output).
    #[error("kernel `{variant}` did not compile:\n{rendered}")]
    Compile {
        variant: String,
        rendered: String,
        diagnostics: Vec<crate::diagnostic::Diagnostic>,
    },
}

/// The source, entry and defines of a variant name the planner produces.
pub fn variant_of(name: &str, kernel_dir: &Utf8Path) -> Option<Variant> {
    let source = |file: &str| kernel_dir.join(file);
    if let Some(rest) = name.strip_prefix("gemm_") {
        // gemm_{f16|f8}[_interleaved]_k{K}_c{C}_r{R}
        let mut parts = rest.split('_');
        let family = parts.next()?;
        let fp8 = match family {
            "f16" => 0,
            "f8" => 1,
            _ => return None,
        };
        let mut interleaved = 0;
        let (mut k, mut c, mut r) = (None, None, None);
        for part in parts {
            if part == "interleaved" {
                interleaved = 1;
            } else if let Some(v) = part.strip_prefix('k') {
                k = v.parse::<u32>().ok();
            } else if let Some(v) = part.strip_prefix('c') {
                c = v.parse::<u32>().ok();
            } else if let Some(v) = part.strip_prefix('r') {
                r = v.parse::<u32>().ok();
            } else {
                return None;
            }
        }
        return Some(
            Variant::new(name, source("gemm_f16_amp.S"))
                .entry("gemm_amp")
                .define("FP8", fp8)
                .define("INTERLEAVED", interleaved)
                .define("K", k?)
                .define("C", c?)
                .define("R", r?),
        );
    }
    if let Some(rest) = name.strip_prefix("rearrange_f16_b") {
        let (rows, cols) = rest.split_once('x')?;
        return Some(
            Variant::new(name, source("rearrange_block_major_f16.S"))
                .entry("rearrange_block_major_f16")
                .define("BLOCK_ROWS", rows.parse::<u32>().ok()?)
                .define("BLOCK_COLS", cols.parse::<u32>().ok()?),
        );
    }
    let (file, entry, causal) = match name {
        "cast_f16_f143" | "cast_f16_f152" | "cast_f143_f16" | "cast_f152_f16" | "cast_f16_f32"
        | "cast_f32_f16" => ("cast_f8.S", name, None),
        "add_f16" | "add_f32" => ("add.S", name, None),
        "rearrange_blocks" => ("rearrange_blocks.S", name, None),
        "gelu_f16" => ("gelu_f16.S", name, None),
        "reduce_add_f16" => ("reduce_add.S", name, None),
        "layernorm_f16" => ("layernorm_f16.S", name, None),
        "softmax_f16" => ("softmax_f16.S", "softmax_f16", Some(0)),
        "softmax_f16_causal" => ("softmax_f16.S", "softmax_f16", Some(1)),
        _ => return None,
    };
    let mut variant = Variant::new(name, source(file)).entry(entry);
    if let Some(causal) = causal {
        variant = variant.define("CAUSAL", causal);
    }
    Some(variant)
}

/// Assembles one variant (through the kernel cache when the database has
/// one).
#[salsa::tracked(returns(ref))]
pub fn kernel_object<'db>(
    db: &'db dyn Db,
    variant: KernelVariant<'db>,
) -> Result<Arc<KernelObject>, KernelBuildError> {
    let name = variant.name(db);
    let target: &Target = &crate::target::IPU21;
    let spec = variant_of(name, variant.kernel_dir(db))
        .ok_or_else(|| KernelBuildError::UnknownVariant(name.clone()))?;
    let files = DbFiles(db);
    let compiled = match db.kernel_cache() {
        Some(cache) => cache.get_or_build(&files, &spec, target).map(|c| {
            if c.built {
                db.record_execution("kernels", format!("kernel {name}"));
            }
            (c.object, c.metadata, c.sources, c.key)
        }),
        None => {
            let pre =
                crate::asm::preprocess(&files, &spec.source, &spec.defines, &spec.include_dirs);
            let files_read = pre.files_read();
            let sources = files_read.iter().map(|(p, _)| p.clone()).collect();
            let key = crate::kernels::cache::cache_key(&files_read, &spec, target);
            db.record_execution("kernels", format!("kernel {name}"));
            kernels::compile_preprocessed(pre, &spec, target, &key)
                .map(|c| (c.object, c.metadata, sources, key))
        }
    };
    match compiled {
        Ok((object, metadata, sources, key)) => Ok(Arc::new(KernelObject {
            variant: name.clone(),
            sources,
            key,
            object,
            metadata,
        })),
        Err(error) => {
            Err(KernelBuildError::Compile {
                variant: name.clone(),
                rendered: match &error {
                    kernels::KernelError::Assembly { rendered, .. } => rendered.clone(),
                    other => other.to_string(),
                },
                diagnostics: match &error {
                    kernels::KernelError::Assembly { errors, .. } => errors
                        .iter()
                        .map(crate::asm::AsmError::to_diagnostic)
                        .collect(),
                    other => vec![crate::diagnostic::Diagnostic::error(other.to_string())
                        .at(&spec.source, 0..0)],
                },
            })
        }
    }
}

/// A variant's footprint: its object with the section contents zeroed
/// (sizes, alignments, symbols and state layout kept). Placement sizes code
/// from footprints, so an edit that changes a kernel's instructions but
/// not its size re-emits the tiles that run it without re-placing anything.
#[salsa::tracked(returns(ref))]
pub fn kernel_footprint<'db>(
    db: &'db dyn Db,
    variant: KernelVariant<'db>,
) -> Result<Arc<KernelObject>, KernelBuildError> {
    let object = kernel_object(db, variant).clone()?;
    let mut footprint = (*object).clone();
    footprint.key.clear();
    footprint.metadata.key.clear();
    footprint.metadata.object_hash.clear();
    for section in &mut footprint.object.sections {
        section.bytes.iter_mut().for_each(|b| *b = 0);
    }
    Ok(Arc::new(footprint))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn planner_names_map_to_sources_entries_and_defines() {
        let dir = Utf8Path::new("device");
        let gemm = variant_of("gemm_f8_interleaved_k384_c16_r25", dir).expect("gemm");
        assert_eq!(gemm.source, "device/gemm_f16_amp.S");
        assert_eq!(gemm.entry.as_deref(), Some("gemm_amp"));
        let defines: Vec<String> = gemm
            .defines
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        assert_eq!(defines, ["C=16", "FP8=1", "INTERLEAVED=1", "K=384", "R=25"]);
        let causal = variant_of("softmax_f16_causal", dir).expect("softmax");
        assert_eq!(causal.defines.get("CAUSAL").map(String::as_str), Some("1"));
        assert!(variant_of("rearrange_f16_b16x4", dir).is_some());
        assert!(variant_of("gemm_f8_k12", dir).is_none());
        assert!(variant_of("relu_f16", dir).is_none());
    }
}
