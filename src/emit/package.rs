//! The package: tile images with preloaded weights, exchange programs with
//! tile addresses, the host calls, bindings for inputs and outputs, and the
//! profile layout.

use super::bindings::binding_runs;
use super::profile_layout::{self, RunEstimate};
use super::steps::{ComputeStep, ProgramSteps};
use super::tile::TileImage as EmittedImage;
use crate::graph::{Graph, Role};
use crate::lower::{Program, Step as ProgramStep};
use crate::package::{
    Binding, Call, ExchangeProgram, Header, HostCall, OpEstimate, Package, Piece, ProfileLayout,
    Segment, SegmentKind, Step, StepKernels, TileImage, Transfer,
};
use crate::place::Placement;
use crate::schedule::ExchangeSchedule;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Everything the package is made of.
pub(crate) struct PackageInputs<'a> {
    /// The graph the program was compiled from (legalized).
    pub graph: &'a Graph,
    /// The project as written, which the package carries for the host
    /// reference; its tensors are a prefix of `graph`'s.
    pub reference_graph: &'a Graph,
    pub program: &'a Program,
    /// The program's compute steps, numbered.
    pub steps: &'a ProgramSteps,
    pub placement: &'a Placement,
    pub images: &'a [Arc<EmittedImage>],
    /// Each tile's preloaded weights, as data segments.
    pub weights: &'a BTreeMap<u32, Arc<Vec<Segment>>>,
    /// From [`exchange_programs`].
    pub exchanges: Arc<Vec<ExchangeProgram>>,
    pub estimated_cycles: u64,
    /// The planner's estimate of every operation, for reports.
    pub ops: Vec<OpEstimate>,
    /// A kernel run's cycles by its kernel's cost formula.
    pub run_estimate: RunEstimate<'a>,
}

/// A buffer the package must address that the placement did not place (a
/// compiler bug: placement verifies every buffer has an address).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unaddressed {
    #[error("a host-written buffer has no address")]
    HostWrite,
    #[error("an output buffer has no address")]
    Output,
    #[error("an exchange source has no address")]
    ExchangeSource,
    #[error("an exchange destination has no address")]
    ExchangeDestination,
}

pub(crate) fn package(inputs: &PackageInputs) -> Result<Package, Unaddressed> {
    let PackageInputs {
        graph,
        reference_graph,
        program,
        steps: numbered,
        placement,
        images,
        weights,
        ref exchanges,
        estimated_cycles,
        ref ops,
        run_estimate,
    } = *inputs;
    // Weights go into the images; every other host write is a binding.
    let mut weight_segments: BTreeMap<u32, Vec<Segment>> = weights
        .iter()
        .filter(|(_, segments)| !segments.is_empty())
        .map(|(tile, segments)| (*tile, segments.to_vec()))
        .collect();
    let mut bindings = Vec::new();
    let mut host_writes = Vec::new();
    for binding in &program.host_writes {
        if graph.tensor(binding.tensor).role == Role::Weight {
            continue;
        }
        let runs = binding_runs(program, placement, binding).ok_or(Unaddressed::HostWrite)?;
        host_writes.push(bindings.len() as u32);
        bindings.push(package_binding(graph, binding, runs));
    }
    let mut host_reads = Vec::new();
    for binding in &program.host_reads {
        let runs = binding_runs(program, placement, binding).ok_or(Unaddressed::Output)?;
        host_reads.push(bindings.len() as u32);
        bindings.push(package_binding(graph, binding, runs));
    }

    let tiles = images
        .iter()
        .map(|image| {
            let mut segments: Vec<Segment> = image
                .segments
                .iter()
                .filter(|s| !s.bytes.is_empty())
                .map(|s| Segment {
                    address: s.address,
                    memory_size: s.bytes.len() as u32,
                    kind: if s.code {
                        SegmentKind::Code
                    } else {
                        SegmentKind::Data
                    },
                    data: s.bytes.clone(),
                })
                .collect();
            segments.extend(weight_segments.remove(&image.tile).unwrap_or_default());
            segments.sort_by_key(|s| s.address);
            TileImage {
                tile: image.tile,
                segments,
            }
        })
        .collect::<Vec<_>>();
    let mut tiles = tiles;
    // Tiles that hold only weights still need an image.
    for (tile, mut segments) in weight_segments {
        segments.sort_by_key(|s| s.address);
        tiles.push(TileImage { tile, segments });
    }
    tiles.sort_by_key(|t| t.tile);

    // Entry points of each compute step on each tile.
    let mut entries: BTreeMap<u32, Vec<(u32, u32)>> = BTreeMap::new();
    let mut kernels_of: BTreeMap<(u32, u32), String> = BTreeMap::new();
    for image in images {
        for (&step, &pc) in &image.entries {
            entries.entry(step).or_default().push((image.tile, pc));
        }
    }
    // A tile that runs several kernels in a step (a rearrange before its
    // GEMM) is profiled under all their names, joined with `+`.
    for (&tile, steps) in &numbered.tiles {
        for (step, run) in steps
            .iter()
            .flat_map(|s| s.runs.iter().map(move |r| (s, r)))
        {
            let names = kernels_of.entry((step.step, tile)).or_default();
            let name = run.kernel.to_string();
            if !names.split('+').any(|k| k == name) {
                if !names.is_empty() {
                    names.push('+');
                }
                names.push_str(&name);
            }
        }
    }
    let mut run_steps: Vec<Step> = host_writes
        .iter()
        .map(|&binding| Step::HostWrite { binding })
        .collect();
    run_steps.extend(convert(
        graph,
        &program.steps,
        &entries,
        &mut numbered.steps.iter(),
    ));
    run_steps.extend(host_reads.iter().map(|&binding| Step::HostRead { binding }));
    let run = HostCall { steps: run_steps };

    // The profile layout: kernels per compute step (pre-order index).
    let mut kernels: Vec<String> = kernels_of.values().cloned().collect();
    kernels.sort();
    kernels.dedup();
    let mut profile_steps = Vec::new();
    let mut preorder = 0u32;
    let mut compute = 0u32;
    layout_steps(
        &run.steps,
        &mut preorder,
        &mut compute,
        &kernels_of,
        &kernels,
        &mut profile_steps,
    );
    let report = ProfileLayout {
        ops: ops.clone(),
        estimates: profile_layout::step_estimates(
            numbered,
            &profile_layout::compute_preorder(&run),
            run_estimate,
        ),
        exchange_ops: profile_layout::exchange_ops(graph, program, &run),
        memory: profile_layout::tile_memories(graph, program, placement, &run),
        ..ProfileLayout::default()
    };
    Ok(Package {
        header: Header::current(graph.target.name()),
        tiles,
        exchanges: Arc::clone(exchanges),
        initialize: HostCall::default(),
        run,
        bindings,
        profile: ProfileLayout {
            estimated_cycles,
            kernels,
            steps: profile_steps,
            ..report
        },
        graph: reference_graph.clone(),
        // The pipeline adds the values of inputs and weights from files.
        file_values: Vec::new(),
    })
}

/// The exchange programs of a placed program: each phase's transfers at
/// tile addresses, with its schedule's choice and horizon.
pub(crate) fn exchange_programs(
    program: &Program,
    placement: &Placement,
    schedules: &[ExchangeSchedule],
) -> Result<Vec<ExchangeProgram>, Unaddressed> {
    program
        .phases
        .iter()
        .zip(schedules)
        .map(|(phase, schedule)| {
            let transfers = phase
                .transfers
                .iter()
                .map(|t| {
                    let source = program.buffer(t.source);
                    let at = |buffer: crate::lower::BufferId, offset: u32| {
                        let b = program.buffer(buffer);
                        placement
                            .address(b.tile, buffer)
                            .map(|a| (b.tile, a + offset))
                    };
                    Ok(Transfer {
                        source_tile: source.tile,
                        source_address: at(t.source, t.source_offset)
                            .ok_or(Unaddressed::ExchangeSource)?
                            .1,
                        bytes: t.bytes,
                        destinations: t
                            .destinations
                            .iter()
                            .map(|&(d, o)| at(d, o).ok_or(Unaddressed::ExchangeDestination))
                            .collect::<Result<_, _>>()?,
                    })
                })
                .collect::<Result<Vec<_>, Unaddressed>>()?;
            Ok(ExchangeProgram {
                label: phase.label(),
                transfers,
                paired: schedule.use_paired,
                horizon_cycles: schedule.horizon(),
            })
        })
        .collect::<Result<Vec<_>, Unaddressed>>()
}

fn package_binding(graph: &Graph, binding: &crate::lower::Binding, runs: Vec<Piece>) -> Binding {
    let tensor = graph.tensor(binding.tensor);
    Binding {
        tensor: binding.tensor,
        iteration: binding.iteration,
        dtype: tensor.dtype,
        element_count: tensor.element_count() as u64,
        pieces: runs,
    }
}

fn convert(
    graph: &Graph,
    steps: &[ProgramStep],
    entries: &BTreeMap<u32, Vec<(u32, u32)>>,
    numbered: &mut std::slice::Iter<ComputeStep>,
) -> Vec<Step> {
    steps
        .iter()
        .map(|step| match step {
            ProgramStep::Compute { op, .. } => {
                // The numbering lists the compute steps in this walk's
                // order.
                let id = numbered.next().filter(|s| s.op == *op).map(|s| s.id);
                let name = graph.op(*op).name.clone();
                Step::Compute {
                    label: name.clone(),
                    op: Some(name),
                    tiles: id
                        .and_then(|id| entries.get(&id))
                        .cloned()
                        .unwrap_or_default(),
                }
            }
            ProgramStep::Exchange(phase) => Step::Exchange { program: phase.0 },
            ProgramStep::Repeat { count, body, .. } => Step::Repeat {
                count: *count,
                body: convert(graph, body, entries, numbered),
            },
        })
        .collect()
}

fn layout_steps(
    steps: &[Step],
    preorder: &mut u32,
    compute: &mut u32,
    kernels_of: &BTreeMap<(u32, u32), String>,
    kernels: &[String],
    out: &mut Vec<StepKernels>,
) {
    for step in steps {
        let index = *preorder;
        *preorder += 1;
        match step {
            Step::Compute { tiles, .. } => {
                let id = *compute;
                *compute += 1;
                out.push(StepKernels {
                    call: Call::Run,
                    step: index,
                    tiles: tiles
                        .iter()
                        .filter_map(|(tile, _)| {
                            let name = kernels_of.get(&(id, *tile))?;
                            let k = kernels.iter().position(|k| k == name)? as u32;
                            Some((*tile, k))
                        })
                        .collect(),
                });
            }
            Step::Repeat { body, .. } => {
                layout_steps(body, preorder, compute, kernels_of, kernels, out)
            }
            _ => {}
        }
    }
}
