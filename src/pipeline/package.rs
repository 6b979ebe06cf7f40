//! The package as queries: assembled from the per-tile images and weights,
//! then encoded as the bytes of a `.ipuexe` file.
//!
//! [`package`] re-runs when any tile's image or weights, the program or the
//! placement change, but the per-tile queries under it re-run only for the
//! tiles that changed. [`package_bytes`] is what the driver writes; when an
//! edit leaves the bytes equal, nothing after it runs and the file on disk
//! is left alone.

use super::error::{EmitBug, RunTooLong, TensorFileError};
use super::tiles::{tile_image, tile_weights, tile_works};
use super::{graph, operator_plans, phase_schedule, placement, planned_signatures, program};
use super::{BuildError, KernelMap, Signature};
use crate::asm::CostFormula;
use crate::db::{Db, SourceFile};
use crate::graph::{DType, Graph, Op, OpId, OpKind};
use crate::lower::{KernelRun, Program};
use crate::package::file::{Encoded, Part};
use crate::package::{ExchangeProgram, OpEstimate, Package};
use crate::partition::{KernelId, Partition};
use crate::target::Target;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The planner's estimate of one run: every operation's selected plan,
/// times its repeat count, each repeat's carry, and the host transfers.
pub(crate) fn estimated_cycles(db: &dyn Db, project: SourceFile) -> Result<u64, BuildError> {
    let ops: u64 = op_estimates(db, project)?
        .iter()
        .map(|op| op.total_cycles() * u64::from(op.executions))
        .sum();
    Ok(ops + carry_cycles(db, project)? + host_transfer_cycles(db, project)?)
}

/// The cycles of every repeat's carry, all its iterations: each iteration
/// ends with the exchange that moves the result into the carry, as
/// scheduled, and the sync before it unless the carry shares an
/// operation's phase (`crate::lower::merge_phases`), whose sync that
/// operation's estimate has. A repeat whose input is copied into the
/// carry on the device (a weight, or a tensor computed before it) has that
/// exchange once more, before the first iteration.
pub(crate) fn carry_cycles(db: &dyn Db, project: SourceFile) -> Result<u64, BuildError> {
    use crate::lower::ExchangePhase;
    let graph = graph(db, project)?;
    let program = program(db, project).clone()?;
    let target = super::target_of(&graph);
    let count_of = |purpose: &str| {
        graph.repeats.iter().find_map(|r| {
            if ExchangePhase::carry_purpose(&r.name) == purpose {
                Some(u64::from(r.count))
            } else if ExchangePhase::enter_purpose(&r.name) == purpose {
                Some(1)
            } else {
                None
            }
        })
    };
    let mut cycles = 0;
    for phase in &program.phases {
        for (index, (purpose, transfers)) in phase.parts().into_iter().enumerate() {
            let Some(count) = count_of(purpose) else {
                continue;
            };
            let horizon = crate::schedule::transfers_horizon(target, &program, transfers);
            let sync = match index {
                0 => crate::plan::cost::sync_cycles(target, 1),
                _ => 0,
            };
            cycles += (horizon + sync) * count;
        }
    }
    Ok(cycles)
}

/// The cycles of a run's host transfers: every streamed input written and
/// every output read once per run, at the host link's rate (weights are
/// loaded with the package, not per run).
pub(crate) fn host_transfer_cycles(db: &dyn Db, project: SourceFile) -> Result<u64, BuildError> {
    let graph = graph(db, project)?;
    let program = program(db, project).clone()?;
    let target = super::target_of(&graph);
    let writes = program
        .host_writes
        .iter()
        .filter(|b| graph.tensor(b.tensor).role != crate::graph::Role::Weight);
    Ok(writes
        .chain(&program.host_reads)
        .map(|b| {
            let tensor = graph.tensor(b.tensor);
            let bytes = tensor.element_count() as u64 * tensor.dtype.size_bytes() as u64;
            crate::plan::cost::host_cycles(target, bytes)
        })
        .sum())
}

/// Every operation's selected plan as the profile layout records it, with
/// the matrix products' multiply-accumulates and AMP roofline.
pub(crate) fn op_estimates(
    db: &dyn Db,
    project: SourceFile,
) -> Result<Vec<OpEstimate>, BuildError> {
    let graph = graph(db, project)?;
    let target = super::target_of(&graph);
    let program = program(db, project).clone()?;
    let selected: Vec<&crate::plan::Candidate> = planned_signatures(db, project)
        .iter()
        .map(|signature| operator_plans(db, Signature::new(db, signature.clone())).selected())
        .collect();
    let exchanges = lowered_exchange(&graph, target, &program, &selected);
    Ok(selected
        .iter()
        .zip(exchanges)
        .enumerate()
        .map(|(i, (selected, (exchange_cycles, sync_cycles)))| {
            let id = OpId(i as u32);
            let op = graph.op(id);
            let (macs, roofline_cycles) = matmul_roofline(&graph, target, op);
            OpEstimate {
                name: op.name.clone(),
                kind: op.kind.name().to_string(),
                executions: graph.repeat_of(id).map_or(1, |r| r.count),
                tiles: selected.tiles_used,
                compute_cycles: selected.estimate.compute_cycles
                    + super::refine::held_rearrange_cycles(&program, id),
                exchange_cycles,
                sync_cycles,
                macs,
                roofline_cycles,
                k_slice: match &selected.partition {
                    Partition::Matmul { grid, shard, .. } if grid.inner > 1 => {
                        Some(shard.inner as u32)
                    }
                    _ => None,
                },
                gelu_in_f16: gelu_in_f16(&graph, op, &selected.partition),
            }
        })
        .collect())
}

/// Whether `op`, run as `partition`, evaluates a GELU in f16: the GELU
/// variants that store FP8 (`KernelId::GeluCast`), on their own or as the
/// last step of a product's epilogue.
fn gelu_in_f16(graph: &Graph, op: &Op, partition: &Partition) -> bool {
    let in_f16 = |kernel: KernelId| matches!(kernel, KernelId::GeluCast { .. });
    match (partition, &op.kind) {
        (Partition::Matmul { .. }, OpKind::Matmul { epilogue, .. }) => {
            crate::partition::epilogue_kernels(epilogue, graph.tensor(op.output).dtype)
                .into_iter()
                .any(|run| in_f16(run.kernel))
        }
        (
            Partition::Rows { kernel, .. }
            | Partition::Segments { kernel, .. }
            | Partition::Elements { kernel, .. },
            _,
        ) => in_f16(*kernel),
        _ => false,
    }
}

/// Each operation's estimated exchange and sync cycles, from the lowered
/// program, which the per-signature plans cannot see: an operation whose
/// operands are all in place has no exchange phase and spends nothing on
/// exchange and sync (what it rearranges of the pieces it holds is
/// compute: `refine::held_rearrange_cycles`); one with fewer phases than
/// its plan (a gather left out because the operands were in place or
/// gathered by another operation) syncs only for those it has; and each
/// phase's exchange is its schedule's horizon, the figure the whole
/// program's estimate takes, rather than the plan's, which costs operands
/// laid out as the planner spreads them (a product's result is in channel
/// blocks) and cannot know which pieces another operation gathered. A
/// phase is charged, with the phases merged into it
/// (`crate::lower::merge_phases`), to the operation it first serves, as
/// the profile charges its measured cycles.
pub(super) fn lowered_exchange(
    graph: &Graph,
    target: &Target,
    program: &Program,
    selected: &[&crate::plan::Candidate],
) -> Vec<(u64, u64)> {
    use crate::lower::ExchangePhase;
    let served = ExchangePhase::served_ops(graph);
    let mut horizons = vec![0u64; selected.len()];
    let mut phases = vec![0u32; selected.len()];
    for phase in &program.phases {
        let Some(first) = phase.purposes().find_map(|p| served.get(p).copied()) else {
            continue;
        };
        let Some(horizon) = horizons.get_mut(first.0 as usize) else {
            continue;
        };
        *horizon += crate::schedule::exchange_schedule(target, program, phase).horizon();
        phases[first.0 as usize] += 1;
    }
    selected
        .iter()
        .zip(horizons.into_iter().zip(phases))
        .map(|(selected, (exchange, phases))| {
            let sync = selected
                .estimate
                .sync_cycles
                .min(crate::plan::cost::sync_cycles(target, phases));
            (exchange, sync)
        })
        .collect()
}

/// A matrix product's multiply-accumulates, and the cycles they take at the
/// AMP units' peak for its input format on every tile the project may use.
fn matmul_roofline(graph: &Graph, target: &Target, op: &Op) -> (u64, u64) {
    if !matches!(op.kind, OpKind::Matmul { .. }) {
        return (0, 0);
    }
    let lhs = graph.tensor(op.inputs[0]);
    let inner = *lhs.shape.last().unwrap_or(&1) as u64;
    let macs = graph.tensor(op.output).element_count() as u64 * inner;
    let per_cycle = u64::from(match lhs.dtype {
        DType::F143 | DType::F152 => target.throughput.amp_f8_macs_per_cycle,
        DType::F16 => target.throughput.amp_f16_macs_per_cycle,
        DType::F32 => target.throughput.amp_f32_macs_per_cycle,
    });
    let peak = per_cycle * u64::from(graph.tiles.max(1));
    (macs, macs.div_ceil(peak.max(1)))
}

/// Every kernel's cost formula (`.ipub_cost`), parsed once, with the
/// variant's integer defines: a full-chip program has hundreds of
/// thousands of kernel runs to estimate.
struct RunFormulas(BTreeMap<String, (CostFormula, Vec<(String, i64)>)>);

impl RunFormulas {
    fn new(kernels: &KernelMap) -> RunFormulas {
        let formulas = kernels
            .iter()
            .filter_map(|(name, object)| {
                let metadata = &object.metadata;
                let text = &metadata.entries.first()?.cost.as_ref()?.formula;
                let formula = CostFormula::parse(text).ok()?;
                let defines = metadata
                    .defines
                    .iter()
                    .filter_map(|(k, v)| Some((k.clone(), crate::asm::lex::parse_int(v.trim())?)))
                    .collect();
                Some((name.clone(), (formula, defines)))
            })
            .collect();
        RunFormulas(formulas)
    }

    /// A kernel run's cycles by its kernel's formula, evaluated with the
    /// run's parameters over the variant's defines.
    fn estimate(&self, run: &KernelRun) -> Option<u64> {
        let (formula, defines) = self.0.get(&run.kernel.to_string())?;
        let value = |name: &str| {
            let param = run.params.iter().rev().find(|(k, _)| k == name);
            param
                .or_else(|| defines.iter().find(|(k, _)| k == name))
                .map(|&(_, v)| v)
        };
        u64::try_from(formula.eval(&value).ok()?).ok()
    }
}

/// The whole package of a project.
#[salsa::tracked(returns(ref))]
pub(crate) fn package(db: &dyn Db, project: SourceFile) -> Result<Arc<Package>, BuildError> {
    let graph = graph(db, project)?;
    let program = program(db, project).clone()?;
    let placement = placement(db, project).clone()?;
    let works = tile_works(db, project).clone()?;
    let mut images = Vec::with_capacity(works.len());
    let mut weights = BTreeMap::new();
    for &tile in works.keys() {
        let key = super::TileKey::new(db, project, tile);
        images.push(tile_image(db, key).clone()?);
        weights.insert(tile, tile_weights(db, key).clone()?);
    }
    let reference_graph = super::validated_graph(db, project)?;
    let kernels = super::project_kernels(db, project).clone()?;
    let steps = super::program_steps(db, project).clone()?;
    let formulas = RunFormulas::new(&kernels);
    let package = crate::emit::package::package(&crate::emit::package::PackageInputs {
        graph: &graph,
        reference_graph: &reference_graph,
        program: &program,
        steps: &steps,
        placement: &placement,
        images: &images,
        weights: &weights,
        exchanges: exchange_programs(db, project).clone()?,
        estimated_cycles: estimated_cycles(db, project)?,
        ops: op_estimates(db, project)?,
        run_estimate: &|run| formulas.estimate(run),
    })?;
    let package = crate::package::Package {
        file_values: file_values(db, &reference_graph)?,
        ..package
    };
    Ok(Arc::new(package))
}

/// The device bytes of every instance of every input and weight read from
/// a tensor file, which the package carries for the reference and for its
/// input streams.
fn file_values(
    db: &dyn Db,
    graph: &crate::graph::Graph,
) -> Result<Vec<crate::package::FileValues>, BuildError> {
    let mut values = Vec::new();
    for (id, t) in graph.tensors.iter().enumerate() {
        let iterations: Vec<Option<u32>> = match t.repeat {
            Some(r) => (0..graph.repeats[r as usize].count).map(Some).collect(),
            None => vec![None],
        };
        for iteration in iterations {
            let Some(bytes) = crate::data::query::file_tensor_bytes(db, t, iteration) else {
                break;
            };
            values.push(crate::package::FileValues {
                tensor: crate::graph::TensorId(id as u32),
                iteration,
                bytes: bytes.map_err(|error| TensorFileError::Values {
                    tensor: t.name.clone(),
                    error,
                })?,
            });
        }
    }
    Ok(values)
}

/// The exchange programs at tile addresses (re-run only when the program,
/// the placement or a schedule changes, not when a kernel does).
#[salsa::tracked(returns(ref))]
pub(crate) fn exchange_programs(
    db: &dyn Db,
    project: SourceFile,
) -> Result<Arc<Vec<ExchangeProgram>>, BuildError> {
    let program = program(db, project).clone()?;
    let placement = placement(db, project).clone()?;
    let schedules: Vec<_> = (0..program.phases.len() as u32)
        .filter_map(|p| {
            let key = super::PhaseKey::new(db, project, p);
            phase_schedule(db, key).as_ref().copied()
        })
        .collect();
    let programs = crate::emit::package::exchange_programs(&program, &placement, &schedules)?;
    Ok(Arc::new(programs))
}

/// The package's `exchange` part, encoded and hashed.
#[salsa::tracked(returns(ref))]
pub(crate) fn exchange_part(db: &dyn Db, project: SourceFile) -> Result<Part, BuildError> {
    let programs = exchange_programs(db, project).clone()?;
    Ok(Part::new(crate::package::exchange_part::encode(&programs)))
}

/// The package encoded as a `.ipuexe` file.
#[salsa::tracked(returns(ref))]
pub fn package_bytes(db: &dyn Db, project: SourceFile) -> Result<Arc<Encoded>, BuildError> {
    let package = package(db, project).clone()?;
    let exchange = exchange_part(db, project).clone()?;
    let bytes =
        crate::package::file::encode_with_exchange(&package, &exchange).map_err(|e| match e {
            crate::package::PackageError::RunTooLong { call, message } => {
                BuildError::RunTooLong(RunTooLong { call, message })
            }
            crate::package::PackageError::ExchangeTooLarge { message } => {
                BuildError::ExchangeTooLarge(message)
            }
            other => BuildError::Emit(EmitBug::Encode(other.to_string())),
        })?;
    Ok(Arc::new(bytes))
}
