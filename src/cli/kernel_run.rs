//! `ipub kernel run`: assemble a kernel and run it on the single-tile
//! executor with a state struct built from command-line values.
//!
//! Every `ptr` field of the kernel's state gets a buffer (`--buffer
//! name=BYTES`, filled with a seeded pattern, or with `:zero`, zeros; `:il`
//! puts it in interleaved memory); every other field takes `--param
//! name=VALUE` (an integer within the field's range, a number for `f32`
//! and `f16` fields). A name the entry does not have, a name given twice,
//! an unknown flag or a value out of range is an error. The supervisor
//! starts all six
//! workers with `runall` and waits with `sync`; the command prints cycles,
//! instructions and AMP work, then the first bytes of each buffer.

use crate::kernels::{self, Variant};
use crate::target::{Target, TargetId};
use crate::vfs::OsFs;
use anyhow::{bail, Context as _};
use camino::Utf8PathBuf;
use std::collections::BTreeMap;

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The kernel source (`.S`).
    pub source: Utf8PathBuf,
    /// The entry symbol to run.
    #[arg(long)]
    pub entry: String,
    /// Predefine a macro: `-D NAME=VALUE`.
    #[arg(short = 'D', value_name = "NAME=VALUE")]
    pub defines: Vec<String>,
    /// A buffer for a `ptr` field: `name=BYTES[:zero][:il]`.
    #[arg(long = "buffer", value_name = "NAME=BYTES")]
    pub buffers: Vec<String>,
    /// A value for a non-pointer field: `name=VALUE` (an integer within
    /// the field's range; a number for `f32` and `f16` fields).
    #[arg(long = "param", value_name = "NAME=VALUE")]
    pub params: Vec<String>,
    /// Bytes of each buffer to print afterwards.
    #[arg(long, default_value_t = 32)]
    pub show: usize,
    /// The machine to run on.
    #[arg(long, default_value = "ipu21", value_parser = super::kernel_source::parse_target)]
    pub target: TargetId,
}

/// Where `kernel run` puts things on its one tile, from the target's memory
/// map: code from the start of region 0, the supervisor, the kernel state
/// and then ordinary buffers in region 0's last 96 KiB, interleaved
/// buffers from 64 KiB into region 1.
struct Layout {
    code: u32,
    code_end: u32,
    supervisor: u32,
    state: u32,
    standard: u32,
    interleaved: u32,
}

impl Layout {
    fn of(target: &Target) -> Layout {
        let region0 = target.memory.region0;
        Layout {
            code: region0.start,
            code_end: region0.end - 0x18000,
            supervisor: region0.end - 0x11000,
            state: region0.end - 0x10000,
            standard: region0.end - 0xF000,
            interleaved: target.memory.region1.start + 0x10000,
        }
    }
}

pub(super) fn run(args: &RunArgs) -> anyhow::Result<i32> {
    let target = args.target.spec();
    let layout = Layout::of(target);
    let mut variant = Variant::new("run", args.source.clone()).entry(args.entry.clone());
    super::kernel_source::add_defines(&mut variant, &args.defines)?;
    let pre = crate::asm::preprocess(
        &OsFs,
        &variant.source,
        &variant.defines,
        &variant.include_dirs,
    );
    let compiled = match kernels::compile_preprocessed(pre, &variant, target, "run") {
        Ok(compiled) => compiled,
        Err(kernels::KernelError::Assembly {
            errors,
            source_path,
            ..
        }) => {
            super::kernel_source::print_asm_errors(&source_path, &errors);
            return Ok(1);
        }
        Err(other) => return Err(other.into()),
    };
    let entry = &compiled.metadata.entries[0];
    let objects = std::slice::from_ref(&compiled.object);
    let linked = crate::asm::link(
        objects,
        &crate::asm::Placement::pack(objects, layout.code, layout.code_end),
        target,
    )
    .map_err(|e| {
        anyhow::anyhow!(
            "{}",
            e.iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        )
    })?;
    let entry_pc = linked
        .symbols
        .get(&entry.symbol)
        .context("entry lost in linking")?
        .value as u32;

    let mut tile = crate::exec::Tile::new(target, 0);
    for section in &linked.sections {
        tile.write_bytes(section.address, &section.bytes)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    let supervisor = crate::isa::text::assemble_program(
        &format!(
            "setzi $m1, {}\nsetzi $m2, {entry_pc}\nrunall $m2, $m1\nsync 0\n",
            layout.state
        ),
        layout.supervisor,
    )
    .map_err(|e| anyhow::anyhow!(e))?;
    let bytes: Vec<u8> = supervisor.iter().flat_map(|w| w.to_le_bytes()).collect();
    tile.write_bytes(layout.supervisor, &bytes)
        .map_err(|e| anyhow::anyhow!("{e}"))?;

    let buffers = named_values("--buffer", &args.buffers, entry, |kind| kind == "ptr")?;
    let params = named_values("--param", &args.params, entry, |kind| kind != "ptr")?;
    let (mut standard, mut interleaved) = (layout.standard, layout.interleaved);
    let mut placed = Vec::new();
    let mut state = vec![0u8; 256];
    let mut seed = 0x9E37_79B9u32;
    for field in &entry.params {
        let value: u32 = if field.kind == "ptr" {
            let spec = buffers.get(&field.name).with_context(|| {
                format!(
                    "field `{}` is a pointer: pass --buffer {}=BYTES",
                    field.name, field.name
                )
            })?;
            let mut parts = spec.split(':');
            let size: u32 = parts
                .next()
                .unwrap_or("")
                .parse()
                .with_context(|| format!("--buffer {}={spec}: a size in bytes", field.name))?;
            let flags: Vec<&str> = parts.collect();
            if let Some(flag) = flags.iter().find(|f| !matches!(**f, "zero" | "il")) {
                bail!(
                    "--buffer {}={spec}: unknown flag `{flag}` (the flags are `zero` and `il`)",
                    field.name
                );
            }
            let cursor = if flags.contains(&"il") {
                &mut interleaved
            } else {
                &mut standard
            };
            let address = *cursor;
            *cursor = (address + size).next_multiple_of(16);
            let data: Vec<u8> = (0..size)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 17;
                    seed ^= seed << 5;
                    if flags.contains(&"zero") {
                        0
                    } else {
                        (seed & 0x3f) as u8
                    }
                })
                .collect();
            tile.write_bytes(address, &data)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            placed.push((field.name.clone(), address, size));
            address
        } else {
            let text = params.get(&field.name).with_context(|| {
                format!("field `{}` needs --param {}=VALUE", field.name, field.name)
            })?;
            field_value(&field.name, &field.kind, text)?
        };
        let at = field.offset as usize;
        let width = if matches!(field.kind.as_str(), "u16" | "f16") {
            2
        } else {
            4
        };
        state[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
    }
    tile.write_bytes(layout.state, &state)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let code_end = linked
        .sections
        .iter()
        .map(|s| s.address + s.bytes.len() as u32)
        .max()
        .unwrap_or(layout.code)
        .max(layout.supervisor + bytes.len() as u32);
    let code = tile
        .read_bytes(layout.code, code_end - layout.code)
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .to_vec();
    tile.set_program(std::sync::Arc::new(crate::exec::Program::decode(
        &code,
        layout.code,
    )));
    match tile.run_supervisor(layout.supervisor, 1_000_000_000) {
        Ok(stats) => {
            super::output::print(format_args!(
                "cycles {} supervisor instructions {} worker instructions {} amp MACs {} workers ok {}\n",
                stats.cycles,
                stats.supervisor_instructions,
                stats.worker_instructions,
                stats.amp_macs,
                stats.workers_ok
            ));
            for (name, address, size) in placed {
                let shown = tile
                    .read_bytes(address, size.min(args.show as u32))
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
                let hex: Vec<String> = shown.iter().map(|b| format!("{b:02x}")).collect();
                super::output::print(format_args!("{name} @ {address:#x}: {}\n", hex.join(" ")));
            }
            Ok(i32::from(!stats.workers_ok))
        }
        Err(fault) => {
            crate::cli::output::error(format!("fault: {fault}"));
            Ok(1)
        }
    }
}

/// `NAME=VALUE` arguments of `option` by name: each name once, and a
/// field of the entry whose kind `fits` (a pointer for `--buffer`,
/// anything else for `--param`).
fn named_values(
    option: &str,
    list: &[String],
    entry: &crate::kernels::EntryMetadata,
    fits: impl Fn(&str) -> bool,
) -> anyhow::Result<BTreeMap<String, String>> {
    let mut values = BTreeMap::new();
    for item in list {
        let Some((name, value)) = item.split_once('=') else {
            bail!("{option} `{item}`: expected NAME=VALUE");
        };
        match entry.params.iter().find(|f| f.name == name) {
            Some(field) if fits(&field.kind) => {}
            Some(field) => bail!(
                "{option} {name}: field `{name}` of `{}` is a {}, set with {}",
                entry.symbol,
                field.kind,
                if field.kind == "ptr" {
                    "--buffer"
                } else {
                    "--param"
                }
            ),
            None => {
                let fields: Vec<&str> = entry
                    .params
                    .iter()
                    .filter(|f| fits(&f.kind))
                    .map(|f| f.name.as_str())
                    .collect();
                bail!(
                    "{option} {name}: `{}` has no such field (its fields here: {})",
                    entry.symbol,
                    if fields.is_empty() {
                        "none".to_string()
                    } else {
                        fields.join(", ")
                    }
                );
            }
        }
        if values.insert(name.to_string(), value.to_string()).is_some() {
            bail!("{option} {name} is given twice");
        }
    }
    Ok(values)
}

/// The state bits of a `--param` value for a field of `kind`: an integer
/// within the kind's range, or a number an f32 or f16 holds (`inf` and
/// `nan` spelled out).
fn field_value(name: &str, kind: &str, text: &str) -> anyhow::Result<u32> {
    let integer = |min: i64, max: i64| -> anyhow::Result<u32> {
        let value: i64 = text
            .parse()
            .with_context(|| format!("--param {name}={text}: a {kind} field takes an integer"))?;
        if !(min..=max).contains(&value) {
            bail!("--param {name}={text}: out of range for a {kind} field ({min} to {max})");
        }
        Ok(value as u32)
    };
    let float = || -> anyhow::Result<f64> {
        text.parse()
            .with_context(|| format!("--param {name}={text}: a {kind} field takes a number"))
    };
    let spelled = |value: f32| {
        value.is_finite() || text.to_ascii_lowercase().contains("inf") || value.is_nan()
    };
    match kind {
        "u32" => integer(0, i64::from(u32::MAX)),
        "i32" => integer(i64::from(i32::MIN), i64::from(i32::MAX)),
        "u16" => integer(0, i64::from(u16::MAX)),
        "f32" => {
            let value = float()? as f32;
            if !spelled(value) {
                bail!("--param {name}={text}: out of range for an f32 field");
            }
            Ok(value.to_bits())
        }
        "f16" => {
            let value = crate::numerics::f16_from_f64(float()?);
            if !spelled(value.to_f32()) {
                bail!("--param {name}={text}: out of range for an f16 field (at most 65504)");
            }
            Ok(u32::from(value.to_bits()))
        }
        other => bail!("--param {name}: fields of kind `{other}` take no value"),
    }
}
