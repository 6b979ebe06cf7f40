//! One tile's image: supervisor code, linked kernels, kernel states, the
//! iteration counters of repeats, and preloaded weights.
//!
//! The tile's code block (region 0, placed first) holds the supervisor's
//! routines, one per compute step the tile takes part in; the kernel-code
//! block after it holds each kernel variant the tile runs, linked at its
//! own address. Placement sizes both beforehand, so emitting an image
//! assembles the supervisor once. The kernel-state block
//! holds the iteration counters and one state struct per kernel run (one
//! per iteration when a run reads per-iteration weights). A routine starts
//! its runs with `runall entry, state` and ends the step with `sync`.

use super::steps::{run_is_per_iteration, TileStep};
use super::supervisor::{self, StateMap, SupervisorError};
use crate::asm::{self, Object};
use crate::kernels::EntryMetadata;
use crate::lower::{KernelRun, OperandRef};
use crate::place::Placement;
use crate::target::Target;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A compiled kernel as the emitter needs it.
pub(crate) struct KernelCode<'a> {
    pub object: &'a Object,
    pub entry: &'a EntryMetadata,
}

/// Bytes to load at an address.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct Segment {
    pub address: u32,
    /// Hex in the result store: a JSON array of numbers is several times
    /// slower to write and read.
    #[serde(with = "crate::fsutil::hex_bytes")]
    pub bytes: Vec<u8>,
    pub code: bool,
}

/// A tile's loadable image and the supervisor entry of each step.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct TileImage {
    pub tile: u32,
    pub segments: Vec<Segment>,
    /// Compute step id to the supervisor routine's address.
    pub entries: BTreeMap<u32, u32>,
    /// Kernel variants the tile runs.
    pub kernels: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EmitError {
    #[error("tile {tile}: kernel `{kernel}` is not compiled")]
    MissingKernel { tile: u32, kernel: String },
    #[error("tile {tile}: kernel `{kernel}` declares state field `{field}`, which its run does not provide")]
    UnknownField {
        tile: u32,
        kernel: String,
        field: String,
    },
    #[error("tile {tile}: buffer {buffer} has no address")]
    Unplaced { tile: u32, buffer: u32 },
    #[error("tile {tile}: {message}")]
    Link { tile: u32, message: String },
    #[error("tile {tile}: {source}")]
    Supervisor { tile: u32, source: SupervisorError },
}

/// The bytes of one state struct.
fn state_size(entry: &EntryMetadata) -> u32 {
    entry
        .params
        .iter()
        .map(|p| {
            p.offset
                + if matches!(p.kind.as_str(), "u16" | "f16") {
                    2
                } else {
                    4
                }
        })
        .max()
        .unwrap_or(0)
        .next_multiple_of(4)
        .max(4)
}

fn state_map(
    tile: u32,
    steps: &[TileStep],
    kernels: &BTreeMap<String, KernelCode>,
    base: u32,
) -> Result<StateMap, EmitError> {
    let mut map = StateMap {
        states: BTreeMap::new(),
        counters: BTreeMap::new(),
        bytes: 0,
    };
    let mut cursor = base;
    for step in steps {
        if let (Some((repeat, _)), true) = (step.repeat, step.per_iteration()) {
            map.counters.entry(repeat).or_insert_with(|| {
                let address = cursor;
                cursor += 4;
                address
            });
        }
    }
    for step in steps {
        for (index, run) in step.runs.iter().enumerate() {
            let code = kernel(kernels, tile, &run.kernel.to_string())?;
            let size = state_size(code.entry);
            let iterations = match (step.repeat, run_is_per_iteration(run)) {
                (Some((_, count)), true) => count,
                _ => 1,
            };
            map.states
                .insert((step.step, index), (cursor, size, iterations));
            cursor += size * iterations;
        }
    }
    map.bytes = cursor - base;
    Ok(map)
}

fn kernel<'k, 'a>(
    kernels: &'k BTreeMap<String, KernelCode<'a>>,
    tile: u32,
    name: &str,
) -> Result<&'k KernelCode<'a>, EmitError> {
    kernels.get(name).ok_or_else(|| EmitError::MissingKernel {
        tile,
        kernel: name.to_string(),
    })
}

fn code_size(object: &Object) -> u32 {
    object.sections.iter().fold(0u32, |cursor, s| {
        cursor.next_multiple_of(s.align.max(1)) + s.bytes.len() as u32
    })
}

/// The sizes a tile's support blocks need, for placement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SupportSizes {
    /// The supervisor's routines.
    pub supervisor: u32,
    /// The kernel variants, each at an 8-byte boundary.
    pub kernels: u32,
    pub states: u32,
}

/// The sizes of a tile's supervisor, kernel code and kernel-state blocks.
/// The supervisor's size is exact without any kernel or state address:
/// its instructions are one word each (see [`supervisor::Supervisor::size`]).
pub(crate) fn support_sizes(
    tile: u32,
    steps: &[TileStep],
    kernels: &BTreeMap<String, KernelCode>,
) -> Result<SupportSizes, EmitError> {
    // The layout of the states, not their addresses, decides the code.
    let states = state_map(tile, steps, kernels, 0)?;
    let supervisor = supervisor::build(steps, &states);
    let mut code = 0u32;
    for name in used_kernels(steps) {
        code = code.next_multiple_of(8) + code_size(kernel(kernels, tile, &name)?.object);
    }
    Ok(SupportSizes {
        supervisor: supervisor.size().next_multiple_of(8),
        kernels: code.next_multiple_of(8),
        states: states.bytes,
    })
}

fn used_kernels(steps: &[TileStep]) -> Vec<String> {
    let mut names: Vec<String> = steps
        .iter()
        .flat_map(|s| s.runs.iter().map(|r| r.kernel.to_string()))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Everything `tile_image` reads besides the tile's own steps.
pub(crate) struct TileInputs<'a> {
    pub target: &'a Target,
    pub placement: &'a Placement,
    pub kernels: &'a BTreeMap<String, KernelCode<'a>>,
    /// The supervisor block: address and size.
    pub code_address: u32,
    pub code_bytes: u32,
    /// Where the kernels are linked.
    pub kernels_address: u32,
    pub states_address: u32,
}

/// Builds a tile's image (weights are added by the caller, which owns the
/// generator).
pub(crate) fn tile_image(
    tile: u32,
    steps: &[TileStep],
    inputs: &TileInputs,
) -> Result<TileImage, EmitError> {
    let TileInputs {
        target,
        placement,
        kernels,
        code_address,
        code_bytes,
        kernels_address,
        states_address,
    } = *inputs;
    let states = state_map(tile, steps, kernels, states_address)?;
    let mut cursor = kernels_address;
    let link_error = |errors: Vec<asm::LinkError>| EmitError::Link {
        tile,
        message: errors
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("; "),
    };
    let mut segments = Vec::new();
    let mut entries = BTreeMap::new();
    let names = used_kernels(steps);
    for name in &names {
        let code = kernel(kernels, tile, name)?;
        cursor = cursor.next_multiple_of(8);
        let objects = std::slice::from_ref(code.object);
        let text_size = code
            .object
            .sections
            .iter()
            .filter(|s| s.code)
            .fold(0u32, |c, s| {
                c.next_multiple_of(s.align.max(1)) + s.bytes.len() as u32
            });
        let placements =
            asm::Placement::pack(objects, cursor, (cursor + text_size).next_multiple_of(8));
        let linked = asm::link(objects, &placements, target).map_err(link_error)?;
        let entry = linked
            .symbols
            .get(&code.entry.symbol)
            .ok_or_else(|| EmitError::Link {
                tile,
                message: format!("kernel `{name}` lost its entry `{}`", code.entry.symbol),
            })?;
        entries.insert(name.clone(), entry.value as u32);
        for section in linked.sections {
            cursor = cursor.max(section.address + section.bytes.len() as u32);
            segments.push(Segment {
                address: section.address,
                bytes: section.bytes,
                code: section.code,
            });
        }
    }
    let supervisor = supervisor::build(steps, &states)
        .encode(&entries)
        .map_err(|source| EmitError::Supervisor { tile, source })?;
    if supervisor.bytes.len() as u32 > code_bytes {
        return Err(EmitError::Link {
            tile,
            message: format!(
                "the supervisor needs {} bytes but its block has {code_bytes} (a compiler bug)",
                supervisor.bytes.len()
            ),
        });
    }
    let step_entries = supervisor
        .steps
        .iter()
        .map(|(&step, &offset)| (step, code_address + offset))
        .collect();
    // A tile with no compute steps has no routines, and no code segment.
    if !supervisor.bytes.is_empty() {
        segments.push(Segment {
            address: code_address,
            bytes: supervisor.bytes,
            code: true,
        });
    }
    segments.push(Segment {
        address: states_address,
        bytes: state_bytes(tile, steps, &states, kernels, placement)?,
        code: false,
    });
    segments.sort_by_key(|s| s.address);
    Ok(TileImage {
        tile,
        segments,
        entries: step_entries,
        kernels: names,
    })
}

fn state_bytes(
    tile: u32,
    steps: &[TileStep],
    states: &StateMap,
    kernels: &BTreeMap<String, KernelCode>,
    placement: &Placement,
) -> Result<Vec<u8>, EmitError> {
    let base = states
        .counters
        .values()
        .chain(states.states.values().map(|s| &s.0))
        .min()
        .copied();
    let mut bytes = vec![0u8; states.bytes as usize];
    let Some(base) = base else {
        return Ok(bytes);
    };
    for step in steps {
        for (index, run) in step.runs.iter().enumerate() {
            let (address, stride, iterations) = states.states[&(step.step, index)];
            let entry = kernel(kernels, tile, &run.kernel.to_string())?.entry;
            for iteration in 0..iterations {
                let at = (address - base + iteration * stride) as usize;
                for field in &entry.params {
                    let value = field_value(tile, run, &field.name, iteration, placement)
                        .ok_or_else(|| EmitError::UnknownField {
                            tile,
                            kernel: run.kernel.to_string(),
                            field: field.name.clone(),
                        })??;
                    let width = if matches!(field.kind.as_str(), "u16" | "f16") {
                        2
                    } else {
                        4
                    };
                    let start = at + field.offset as usize;
                    bytes[start..start + width].copy_from_slice(&value.to_le_bytes()[..width]);
                }
            }
        }
    }
    Ok(bytes)
}

/// A state field's 32-bit value: an operand's address or a parameter.
fn field_value(
    tile: u32,
    run: &KernelRun,
    name: &str,
    iteration: u32,
    placement: &Placement,
) -> Option<Result<u32, EmitError>> {
    let operand = match name {
        "out" => run.operands.last(),
        _ => name
            .strip_prefix("in")
            .and_then(|i| i.parse::<usize>().ok())
            .filter(|&i| i + 1 < run.operands.len())
            .and_then(|i| run.operands.get(i)),
    };
    if let Some(operand) = operand {
        let buffer = match operand {
            OperandRef::Buffer(b) => *b,
            OperandRef::PerIteration(buffers) => *buffers.get(iteration as usize)?,
        };
        return Some(placement.address(tile, buffer).ok_or(EmitError::Unplaced {
            tile,
            buffer: buffer.0,
        }));
    }
    run.params
        .iter()
        .find(|(p, _)| p == name)
        .map(|(_, v)| Ok(*v as u32))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emit::steps::ProgramSteps;
    use crate::graph::{DType, OpKind, Repeat, Role};
    use crate::lower::tests::{lowered, Builder};
    use crate::place::{SupportBlock, SupportKind};
    use crate::target::IPU21;
    use crate::vfs::MemoryFs;
    use expect_test::expect;

    /// A stand-in kernel for the test: worker 0 adds `rows` to the first
    /// word of `out` (so repeated runs accumulate); the others just exit.
    const COUNTING_KERNEL: &str = "
    .text
    .globl count_rows
    .type count_rows, @function
    .ipub_param out, 0, ptr
    .ipub_param rows, 4, u32
    .ipub_param in1, 8, ptr
count_rows:
    get $m3, $wid
    brnz $m3, done
    ld32 $m1, $m0, 0
    ld32 $m2, $m0, 4
    ld32 $m4, $m1, 0
    add $m4, $m4, $m2
    st32 $m4, $m1, 0
    ld32 $m5, $m0, 8
    st32 $m5, $m1, 4
done:
    exitz $mzero
";

    fn compile(source: &str, entry: &str) -> (Object, EntryMetadata) {
        let fs = MemoryFs::new();
        fs.write("k.S", source);
        let variant = crate::kernels::Variant::new("k", "k.S").entry(entry);
        let pre = asm::preprocess(
            &fs,
            &variant.source,
            &variant.defines,
            &variant.include_dirs,
        );
        let compiled = crate::kernels::compile_preprocessed(pre, &variant, &IPU21, "test")
            .unwrap_or_else(|e| panic!("{e}"));
        let entry = compiled.metadata.entries[0].clone();
        (compiled.object, entry)
    }

    #[test]
    fn supervisor_routines_launch_kernels_with_their_states_and_loop_counters() {
        // gelu over a carried activation inside a repeat of 3, on one tile.
        let mut b = Builder::new(1);
        let x = b.tensor("x", &[8, 16], DType::F16, Role::Input);
        let h = b.tensor("h", &[8, 16], DType::F16, Role::Activation);
        let w = b.tensor("w", &[8, 16], DType::F16, Role::Weight);
        b.graph.tensors[w.0 as usize].repeat = Some(0);
        let first = b.graph.ops.len() as u32;
        let g = b.op(OpKind::Add, &[h, w], &[8, 16], DType::F16);
        let out = b.tensor("out", &[8, 16], DType::F16, Role::Activation);
        b.graph.repeats.push(Repeat {
            name: "r".into(),
            count: 3,
            init: x,
            carry_in: h,
            carry_out: g,
            output: out,
            body: vec![crate::graph::OpId(first)],
        });
        b.graph.outputs = vec![out];
        let program = lowered(&b.graph);
        let (object, entry) = compile(COUNTING_KERNEL, "count_rows");
        let kernels: BTreeMap<String, KernelCode> = [(
            "add_f16".to_string(),
            KernelCode {
                object: &object,
                entry: &entry,
            },
        )]
        .into();
        let numbered = ProgramSteps::of(&program);
        let tile_steps = numbered.tile(0);
        let sizes = support_sizes(0, tile_steps, &kernels).expect("sizes");
        let support = |_| {
            vec![
                SupportBlock {
                    kind: SupportKind::Code,
                    bytes: sizes.supervisor,
                },
                SupportBlock {
                    kind: SupportKind::KernelCode,
                    bytes: sizes.kernels,
                },
                SupportBlock {
                    kind: SupportKind::KernelStates,
                    bytes: sizes.states,
                },
            ]
        };
        let placement =
            crate::place::placement(&IPU21, &b.graph, &program, &support).expect("fits");
        let blocks = &placement.tiles[&0].support;
        let image = tile_image(
            0,
            tile_steps,
            &TileInputs {
                target: &IPU21,
                placement: &placement,
                kernels: &kernels,
                code_address: blocks[0].1,
                code_bytes: blocks[0].2,
                kernels_address: blocks[1].1,
                states_address: blocks[2].1,
            },
        )
        .expect("image");
        assert_eq!(image.kernels, ["add_f16"]);
        // The routine as placed: states and the kernel entry are absolute,
        // so it is listed with the addresses it loads named.
        let routine = image
            .segments
            .iter()
            .find(|s| s.address == blocks[0].1)
            .expect("the supervisor's segment");
        assert_eq!(
            routine.bytes.len() as u32,
            sizes.supervisor,
            "sized exactly"
        );
        let names = [
            (blocks[1].1, "kernels"),
            (blocks[2].1, "states"),
            (blocks[2].1 + 4, "states+4"),
        ];
        let listing: String = crate::isa::disassemble(&routine.bytes, blocks[0].1)
            .iter()
            .map(|line| {
                let mut text = line.text.clone();
                for (address, name) in names.iter().rev() {
                    text = text.replace(&format!("{address:#x}"), name);
                }
                format!("{:04x}  {text}\n", line.address - blocks[0].1)
            })
            .collect();
        expect![[r#"
            0000  setzi $m3, states
            0004  ld32 $m4, $m3, 0
            0008  mul $m4, $m4, 12
            000c  setzi $m1, states+4
            0010  add $m1, $m1, $m4
            0014  setzi $m2, kernels
            0018  runall $m2, $m1
            001c  setzi $m3, states
            0020  ld32 $m4, $m3, 0
            0024  add $m4, $m4, 1
            0028  cmpult $m5, $m4, 3
            002c  mul $m4, $m4, $m5
            0030  st32 $m4, $m3, 0
            0034  sync 0
        "#]]
        .assert_eq(&listing);

        let mut device = crate::exec::Tile::new(&IPU21, 0);
        for segment in &image.segments {
            device
                .write_bytes(segment.address, &segment.bytes)
                .expect("load");
        }
        let code_end = image
            .segments
            .iter()
            .filter(|s| s.code)
            .map(|s| s.address + s.bytes.len() as u32)
            .max()
            .unwrap();
        let code_bytes = device
            .read_bytes(blocks[0].1, code_end - blocks[0].1)
            .unwrap()
            .to_vec();
        device.set_program(std::sync::Arc::new(crate::exec::Program::decode(
            &code_bytes,
            blocks[0].1,
        )));
        let entry_pc = image.entries[&0];
        let output = program
            .kernel_runs()
            .iter()
            .map(|r| match r.operands.last() {
                Some(OperandRef::Buffer(b)) => placement.address(0, *b).unwrap(),
                _ => unreachable!(),
            })
            .next()
            .unwrap();
        let weight = |i: usize| {
            let run = program.kernel_runs()[0];
            match &run.operands[1] {
                OperandRef::PerIteration(buffers) => placement.address(0, buffers[i]).unwrap(),
                other => panic!("expected per-iteration weights, got {other:?}"),
            }
        };
        for iteration in 1..=4u32 {
            let stats = device.run_supervisor(entry_pc, 1_000_000).expect("runs");
            assert!(stats.workers_ok);
            let word = |a| u32::from_le_bytes(device.read_bytes(a, 4).unwrap().try_into().unwrap());
            assert_eq!(word(output), 8 * iteration, "rows accumulate");
            // Iterations 1, 2, 3 see the weights of iterations 0, 1, 2; the
            // counter then wraps, so a fourth run starts over.
            assert_eq!(word(output + 4), weight((iteration as usize - 1) % 3));
        }
    }
}
