//! `ipub kernel`: compile a kernel source to `kernel.o` + `kernel.json`, and
//! list an object's contents.

use super::kernel_source::{add_defines, print_asm_errors};
use crate::asm::Object;
use crate::fsutil::write_atomic;
use crate::kernels::cache::{cache_key, KernelCache};
use crate::kernels::{self, KernelError, Variant};
use crate::target::{Target, TargetId};
use crate::vfs::OsFs;
use anyhow::Context as _;
use camino::Utf8PathBuf;

#[derive(Debug, clap::Args)]
pub struct KernelArgs {
    #[command(subcommand)]
    pub command: KernelCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum KernelCommand {
    /// Assemble a kernel source into kernel.o and kernel.json.
    Compile(CompileArgs),
    /// List a kernel object: sections, symbols, relocations, code.
    Disasm(DisasmArgs),
    /// Run a kernel on the single-tile executor with all six workers.
    Run(crate::cli::kernel_run::RunArgs),
}

#[derive(Debug, clap::Args)]
pub struct CompileArgs {
    /// The kernel source (`.S`).
    pub source: Utf8PathBuf,
    /// Predefine a macro: `-D NAME=VALUE` (or `-D NAME`, which is 1).
    #[arg(short = 'D', value_name = "NAME=VALUE")]
    pub defines: Vec<String>,
    /// Also search this directory for `#include`.
    #[arg(short = 'I', value_name = "DIR")]
    pub include_dirs: Vec<Utf8PathBuf>,
    /// Export only this entry symbol (default: every global code label).
    #[arg(long)]
    pub entry: Option<String>,
    /// The variant's name (default: the source's file stem).
    #[arg(long)]
    pub name: Option<String>,
    /// Write kernel.o and kernel.json here instead of the kernel cache.
    #[arg(long, value_name = "DIR")]
    pub out: Option<Utf8PathBuf>,
    /// The machine to compile for.
    #[arg(long, default_value = "ipu21", value_parser = super::kernel_source::parse_target)]
    pub target: TargetId,
}

#[derive(Debug, clap::Args)]
pub struct DisasmArgs {
    /// A kernel object.
    pub object: Utf8PathBuf,
}

pub fn run(args: &KernelArgs) -> anyhow::Result<i32> {
    match &args.command {
        KernelCommand::Compile(a) => compile(a),
        KernelCommand::Disasm(a) => disasm(a),
        KernelCommand::Run(a) => crate::cli::kernel_run::run(a),
    }
}

fn compile(args: &CompileArgs) -> anyhow::Result<i32> {
    let name = args
        .name
        .clone()
        .or_else(|| args.source.file_stem().map(str::to_string))
        .unwrap_or_else(|| "kernel".into());
    let mut variant = Variant::new(name, args.source.clone());
    variant.entry = args.entry.clone();
    variant.include_dirs = args.include_dirs.clone();
    add_defines(&mut variant, &args.defines)?;
    let result = match &args.out {
        Some(dir) => compile_to(dir, &variant, args.target.spec()),
        None => {
            let cache = KernelCache::from_env()
                .context("no cache directory: set IPUB_CACHE_DIR or HOME, or pass --out")?;
            cache
                .get_or_build(&OsFs, &variant, args.target.spec())
                .map(|k| (k.object_path, k.metadata_path))
        }
    };
    match result {
        Ok((object, metadata)) => {
            super::output::print(format_args!(
                "compiled kernel {} object={object} metadata={metadata}\n",
                variant.name
            ));
            Ok(0)
        }
        Err(KernelError::Assembly {
            errors,
            source_path,
            ..
        }) => {
            print_asm_errors(&source_path, &errors);
            let count = errors.len();
            let plural = if count == 1 { "" } else { "s" };
            crate::cli::output::error(format!(
                "could not assemble `{source_path}` due to {count} previous error{plural}"
            ));
            Ok(1)
        }
        Err(other) => Err(other.into()),
    }
}

/// Compiles without the cache, writing into `dir`.
fn compile_to(
    dir: &Utf8PathBuf,
    variant: &Variant,
    target: &Target,
) -> Result<(Utf8PathBuf, Utf8PathBuf), KernelError> {
    let pre = crate::asm::preprocess(
        &OsFs,
        &variant.source,
        &variant.defines,
        &variant.include_dirs,
    );
    let key = cache_key(&pre.files_read(), variant, target);
    let compiled = kernels::compile_preprocessed(pre, variant, target, &key)?;
    let object = dir.join("kernel.o");
    let metadata = dir.join("kernel.json");
    let json = serde_json::to_vec_pretty(&compiled.metadata).map_err(|e| KernelError::Cache {
        path: metadata.clone(),
        source: std::io::Error::other(e),
    })?;
    write_atomic(&object, &compiled.object_bytes).map_err(|source| KernelError::Cache {
        path: object.clone(),
        source,
    })?;
    write_atomic(&metadata, &json).map_err(|source| KernelError::Cache {
        path: metadata.clone(),
        source,
    })?;
    Ok((object, metadata))
}

fn disasm(args: &DisasmArgs) -> anyhow::Result<i32> {
    let bytes =
        crate::fsutil::read_bytes(&args.object, crate::kernels::cache::MAX_ENTRY_FILE_BYTES)
            .with_context(|| format!("cannot read {}", args.object))?;
    let object = Object::read(&bytes)
        .with_context(|| format!("{} is not a valid kernel object", args.object))?;
    super::output::print(format_args!("{}", object.dump()));
    for section in object.sections.iter().filter(|s| s.code) {
        super::output::print(format_args!("disassembly of {}:\n", section.name));
        for line in crate::isa::disassemble(&section.bytes, 0) {
            super::output::print(format_args!("{line}\n"));
        }
    }
    Ok(0)
}
