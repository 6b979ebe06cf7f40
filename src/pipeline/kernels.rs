//! Kernel variants as queries: one per variant the program runs.
//!
//! A plan names a kernel ([`KernelId`]: a GEMM of some shard, a causal
//! softmax of f16); [`variant_of`] maps it to its source in the
//! project's kernel directory, its entry symbol and its defines, and
//! [`kernel_object`] assembles it. The query reads the source and its
//! includes through the database, so editing one kernel source re-runs only
//! the variants built from it; the on-disk kernel cache makes a fresh
//! process reuse objects compiled before.

use crate::db::{Db, DbFiles};
use crate::graph::{DType, Reduction};
use crate::kernels::{self, Variant};
use crate::partition::KernelId;
use crate::target::{Target, TargetId};
use camino::{Utf8Path, Utf8PathBuf};
use std::sync::Arc;

/// A kernel variant of one project, by kernel and kernel directory.
#[salsa::interned(debug)]
pub(crate) struct KernelVariant<'db> {
    #[returns(copy)]
    pub id: KernelId,
    #[returns(ref)]
    pub kernel_dir: Utf8PathBuf,
    /// The machine the variant is assembled and linked for.
    #[returns(copy)]
    pub target: TargetId,
}

/// A compiled variant, cheap to clone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KernelObject {
    /// The variant's name ([`KernelId`]'s display).
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
    /// The variant assembled but its entry declares no state field the
    /// plan's form of the kernel needs: a source predating that form,
    /// which ignores the define selecting it.
    #[error(
        "kernel `{variant}` declares no state field `{field}` (`.ipub_param`), which its form needs; is `{file}` older than that form?"
    )]
    MissingField {
        variant: String,
        field: &'static str,
        file: Utf8PathBuf,
    },
}

/// A norm kernel's variant in its segmented form when `segmented`
/// (`SEGMENTED`, `device/include/norm.h`); the other form is assembled
/// without the define.
fn with_segments(variant: Variant, segmented: bool) -> Variant {
    if segmented {
        variant.define("SEGMENTED", 1)
    } else {
        variant
    }
}

/// The source, entry and defines of a kernel: which file in the project's
/// kernel directory provides it, compiled how. `None` for a combination no
/// source provides (a GELU of f32, say).
pub fn variant_of(id: KernelId, kernel_dir: &Utf8Path) -> Option<Variant> {
    let name = id.to_string();
    let source = |file: &str| kernel_dir.join(file);
    let plain = |file: &str| Variant::new(name.clone(), source(file)).entry(name.clone());
    Some(match id {
        KernelId::Gemm {
            fp8,
            interleaved,
            k,
            c,
            r,
        } => Variant::new(name.clone(), source("gemm_f16_amp.S"))
            .entry("gemm_amp")
            .define("FP8", u32::from(fp8))
            .define("INTERLEAVED", u32::from(interleaved))
            .define("K", k)
            .define("C", c)
            .define("R", r),
        KernelId::RearrangeBlockMajor {
            dtype: DType::F16,
            rows,
            cols,
        } => Variant::new(name.clone(), source("rearrange_block_major_f16.S"))
            .entry("rearrange_block_major_f16")
            .define("BLOCK_ROWS", rows)
            .define("BLOCK_COLS", cols),
        KernelId::Cast { from, to } => {
            let f16_and = |other: DType| {
                (from == DType::F16 && to == other) || (from == other && to == DType::F16)
            };
            if !(f16_and(DType::F143) || f16_and(DType::F152) || f16_and(DType::F32)) {
                return None;
            }
            plain("cast_f8.S")
        }
        KernelId::Add {
            dtype: DType::F16 | DType::F32,
        } => plain("add.S"),
        KernelId::RearrangeBlocks => plain("rearrange_blocks.S"),
        KernelId::Gelu {
            dtype: DType::F16,
            add,
        } => plain("gelu_f16.S").define("ADD", u32::from(add)),
        KernelId::GeluCast {
            to: DType::F143 | DType::F152,
            add,
        } => plain("gelu_f16.S")
            .define("OUT_F8", 1)
            .define("ADD", u32::from(add)),
        KernelId::ReduceAdd => plain("reduce_add.S"),
        KernelId::ReduceAddPlus {
            addends: addends @ (1 | 2),
        } => plain("reduce_add.S").define("ADDENDS", u32::from(addends)),
        KernelId::ReduceCast {
            to: DType::F143 | DType::F152,
        } => plain("reduce_add.S").define("OUT_F8", 1),
        KernelId::GemmF32Out {
            interleaved,
            k,
            c,
            r,
        } => Variant::new(name.clone(), source("gemm_f16_f32out.S"))
            .entry("gemm_amp_f32out")
            .define("INTERLEAVED", u32::from(interleaved))
            .define("K", k)
            .define("C", c)
            .define("R", r),
        KernelId::ReduceAddF32 => plain("reduce_add_f32.S"),
        KernelId::Layernorm { dtype: DType::F16 } => plain("layernorm_f16.S"),
        KernelId::LayernormCast {
            to: to @ (DType::F143 | DType::F152),
        } => Variant::new(name.clone(), source("layernorm_f16.S"))
            .entry("layernorm_f16_f8")
            .define("OUT_F8", if to == DType::F143 { 1 } else { 2 }),
        KernelId::LayernormStats => plain("layernorm_stats_f16.S"),
        KernelId::RmsnormStats => plain("layernorm_stats_f16.S").define("RMS", 1),
        KernelId::SoftmaxStats { exp_once: false } => {
            Variant::new(name.clone(), source("softmax_f16.S"))
                .entry("softmax_stats_f16")
                .define("STATS", 1)
        }
        KernelId::SoftmaxStats { exp_once: true } => {
            Variant::new(name.clone(), source("softmax_f16.S"))
                .entry("softmax_stats_f16_once")
                .define("STATS", 1)
                .define("EXP_ONCE", 1)
        }
        KernelId::SoftmaxPartsOnce {
            out: out @ (DType::F143 | DType::F152),
        } => Variant::new(name.clone(), source("softmax_f16.S"))
            .entry("softmax_parts_f16_once")
            .define("PARTS", 1)
            .define("EXP_ONCE", 1)
            .define("OUT_F8", if out == DType::F143 { 1 } else { 2 }),
        KernelId::SoftmaxParts => Variant::new(name.clone(), source("softmax_f16.S"))
            .entry("softmax_parts_f16")
            .define("SEGMENTED", 1),
        KernelId::FoldRecords { softmax } => {
            plain("fold_records.S").define("SOFTMAX", i64::from(softmax))
        }
        KernelId::RmsnormParts { segmented } => with_segments(
            Variant::new(name.clone(), source("rmsnorm_f16.S"))
                .entry("rmsnorm_parts_f16")
                .define("PARTS", 1),
            segmented,
        ),
        KernelId::LayernormParts {
            out: DType::F16,
            segmented,
        } => with_segments(
            Variant::new(name.clone(), source("layernorm_f16.S"))
                .entry("layernorm_parts_f16")
                .define("PARTS", 1),
            segmented,
        ),
        KernelId::LayernormParts {
            out: out @ (DType::F143 | DType::F152),
            segmented,
        } => with_segments(
            Variant::new(name.clone(), source("layernorm_f16.S"))
                .entry("layernorm_parts_f16_f8")
                .define("PARTS", 1)
                .define("OUT_F8", if out == DType::F143 { 1 } else { 2 }),
            segmented,
        ),
        KernelId::Softmax {
            dtype: DType::F16,
            causal,
            exp_once,
        } => Variant::new(name.clone(), source("softmax_f16.S"))
            .entry(if exp_once {
                "softmax_f16_once"
            } else {
                "softmax_f16"
            })
            .define("CAUSAL", u32::from(causal))
            .define("EXP_ONCE", u32::from(exp_once)),
        KernelId::Binary {
            dtype: DType::F16 | DType::F32,
            ..
        } => plain("binary.S"),
        KernelId::Unary {
            dtype: DType::F16 | DType::F32,
            ..
        } => plain("unary.S"),
        KernelId::Rmsnorm { dtype: DType::F16 } => plain("rmsnorm_f16.S"),
        KernelId::SoftmaxMasked {
            dtype: DType::F16,
            mask: mask @ (DType::F16 | DType::F32),
        } => Variant::new(name.clone(), source("softmax_mask_f16.S"))
            .entry("softmax_mask_f16")
            .define("MASK_F32", u32::from(mask == DType::F32)),
        KernelId::SoftmaxMaskedStats {
            mask: mask @ (DType::F16 | DType::F32),
        } => Variant::new(name.clone(), source("softmax_mask_f16.S"))
            .entry("softmax_mask_stats_f16")
            .define("STATS", 1)
            .define("MASK_F32", u32::from(mask == DType::F32)),
        KernelId::SoftmaxMaskedParts {
            mask: mask @ (DType::F16 | DType::F32),
        } => Variant::new(name.clone(), source("softmax_mask_f16.S"))
            .entry("softmax_mask_parts_f16")
            .define("SEGMENTED", 1)
            .define("MASK_F32", u32::from(mask == DType::F32)),
        KernelId::ReduceRows {
            dtype: DType::F16 | DType::F32,
            ..
        }
        | KernelId::ReducePartial {
            reduction: Reduction::Sum | Reduction::Max,
            dtype: DType::F16 | DType::F32,
        }
        | KernelId::ReducePartials {
            out: DType::F16, ..
        }
        | KernelId::ReducePartials {
            reduction: Reduction::Mean,
            out: DType::F32,
        } => plain("reduce_rows.S"),
        _ => return None,
    })
}

/// Assembles one variant (through the database's kernel cache hook when
/// it has a kernel cache, in memory otherwise).
#[salsa::tracked(returns(ref))]
pub(crate) fn kernel_object<'db>(
    db: &'db dyn Db,
    variant: KernelVariant<'db>,
) -> Result<Arc<KernelObject>, KernelBuildError> {
    let id = variant.id(db);
    let name = &id.to_string();
    let target: &Target = variant.target(db).spec();
    let spec = variant_of(id, variant.kernel_dir(db))
        .ok_or_else(|| KernelBuildError::UnknownVariant(name.clone()))?;
    let files = DbFiles(db);
    let compiled = match db.persistence().kernel(&files, &spec, target) {
        Some(cached) => cached.map(|c| {
            if !c.built {
                db.persistence().reused("kernels", format!("kernel {name}"));
            }
            (c.object, c.metadata, c.sources, c.key)
        }),
        None => {
            let pre =
                crate::asm::preprocess(&files, &spec.source, &spec.defines, &spec.include_dirs);
            let files_read = pre.files_read();
            let sources = files_read.iter().map(|(p, _)| p.clone()).collect();
            let key = crate::kernels::cache::cache_key(&files_read, &spec, target);
            kernels::compile_preprocessed(pre, &spec, target, &key)
                .map(|c| (c.object, c.metadata, sources, key))
        }
    };
    if let Ok((_, metadata, _, _)) = &compiled {
        let declared = |field: &str| {
            metadata
                .entries
                .iter()
                .filter(|e| Some(&e.symbol) == spec.entry.as_ref())
                .any(|e| e.params.iter().any(|p| p.name == field))
        };
        if let Some(&field) = id.required_fields().iter().find(|f| !declared(f)) {
            return Err(KernelBuildError::MissingField {
                variant: name.clone(),
                field,
                file: spec.source.clone(),
            });
        }
    }
    match compiled {
        Ok((object, metadata, sources, key)) => Ok(Arc::new(KernelObject {
            variant: name.clone(),
            sources,
            key,
            object,
            metadata,
        })),
        Err(error) => {
            let mut rendered = match &error {
                kernels::KernelError::Assembly { rendered, .. } => rendered.clone(),
                other => other.to_string(),
            };
            let mut diagnostics =
                match &error {
                    kernels::KernelError::Assembly { errors, .. } => errors
                        .iter()
                        .map(crate::asm::AsmError::to_diagnostic)
                        .collect(),
                    other => vec![crate::diagnostic::Diagnostic::error(other.to_string())
                        .at(&spec.source, 0..0)],
                };
            // A missing source is most often a kernel directory that is
            // not where the project says (or, by default, `../device`).
            if crate::vfs::FileSource::read(&files, &spec.source).is_err() {
                let help = format!(
                    "kernel sources are read from `{}`, the project's `kernels` directory (`{}` from the project file unless [project] sets `kernels`)",
                    variant.kernel_dir(db),
                    crate::project::DEFAULT_KERNEL_DIR
                );
                rendered = format!("{}\n  = help: {help}", rendered.trim_end());
                diagnostics = diagnostics
                    .into_iter()
                    .map(|d| d.help(help.clone()))
                    .collect();
            }
            Err(KernelBuildError::Compile {
                variant: name.clone(),
                rendered,
                diagnostics,
            })
        }
    }
}

/// A variant's machine code: the object and metadata keyed by their own
/// content, not by the source text. Tile images are emitted from this, so
/// a comment-only edit recompiles the kernel ([`kernel_object`] re-runs)
/// but leaves its code equal, and no tile that runs it is emitted again.
#[salsa::tracked(returns(ref))]
pub(crate) fn kernel_code<'db>(
    db: &'db dyn Db,
    variant: KernelVariant<'db>,
) -> Result<Arc<KernelObject>, KernelBuildError> {
    let object = kernel_object(db, variant).clone()?;
    let mut code = (*object).clone();
    code.metadata.key.clear();
    // The entry's checksum covers the key, so it follows the source text
    // as the key does.
    code.metadata.checksum.clear();
    let metadata = serde_json::to_vec(&code.metadata).unwrap_or_default();
    let mut hasher = blake3::Hasher::new();
    hasher.update(b"ipub kernel code v1");
    hasher.update(&(metadata.len() as u64).to_le_bytes());
    hasher.update(&metadata);
    code.key = hasher.finalize().to_hex().to_string();
    Ok(Arc::new(code))
}

/// A variant's footprint: its object with the section contents zeroed
/// (sizes, alignments, symbols and state layout kept). Placement sizes code
/// from footprints, so an edit that changes a kernel's instructions but
/// not its size re-emits the tiles that run it without re-placing anything.
#[salsa::tracked(returns(ref))]
pub(crate) fn kernel_footprint<'db>(
    db: &'db dyn Db,
    variant: KernelVariant<'db>,
) -> Result<Arc<KernelObject>, KernelBuildError> {
    let object = kernel_object(db, variant).clone()?;
    let mut footprint = (*object).clone();
    footprint.key.clear();
    footprint.metadata.key.clear();
    footprint.metadata.object_hash.clear();
    footprint.metadata.checksum.clear();
    for section in &mut footprint.object.sections {
        section.bytes.iter_mut().for_each(|b| *b = 0);
    }
    Ok(Arc::new(footprint))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_map_to_sources_entries_and_defines() {
        let dir = Utf8Path::new("device");
        let gemm = KernelId::Gemm {
            fp8: true,
            interleaved: true,
            k: 384,
            c: 16,
            r: 25,
        };
        let variant = variant_of(gemm, dir).expect("gemm");
        assert_eq!(variant.name, "gemm_f8_interleaved_k384_c16_r25");
        assert_eq!(variant.source, "device/gemm_f16_amp.S");
        assert_eq!(variant.entry.as_deref(), Some("gemm_amp"));
        let defines: Vec<String> = variant
            .defines
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        assert_eq!(defines, ["C=16", "FP8=1", "INTERLEAVED=1", "K=384", "R=25"]);
        let causal = KernelId::Softmax {
            dtype: DType::F16,
            causal: true,
            exp_once: false,
        };
        let variant = variant_of(causal, dir).expect("softmax");
        assert_eq!(variant.defines.get("CAUSAL").map(String::as_str), Some("1"));
        assert_eq!(variant.entry.as_deref(), Some("softmax_f16"));
        let rearrange = KernelId::RearrangeBlockMajor {
            dtype: DType::F16,
            rows: 16,
            cols: 4,
        };
        assert!(variant_of(rearrange, dir).is_some());
        assert!(variant_of(
            KernelId::Gelu {
                dtype: DType::F32,
                add: false,
            },
            dir,
        )
        .is_none());
        let cast = KernelId::Cast {
            from: DType::F143,
            to: DType::F152,
        };
        assert!(variant_of(cast, dir).is_none());
    }
}
