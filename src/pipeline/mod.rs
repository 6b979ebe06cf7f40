//! The compiler pipeline as salsa queries.
//!
//! Each phase is a free function named for what it produces, `db` first,
//! at the granularity where invalidation should stop:
//!
//! - [`project_graph`](crate::project::project_graph): one per project file;
//! - [`operator_plans`]: one per distinct [`OpSignature`] (interned), so
//!   identical operations (the iterations of a repeat, Q/K/V projections)
//!   share one plan and an edit to one operation re-plans only its signature;
//! - [`program`]: the lowered program of a project;
//! - [`phase_schedule`]: one per exchange phase (keyed by an interned
//!   [`PhaseKey`]);
//! - [`place::tile_placement`]: one per tile (keyed by an interned
//!   [`TileKey`], as every per-tile query is), from its request in
//!   tile-local terms, assembled by [`placement`];
//! - [`tiles::tile_image`]: one per tile, and the package from them.
//!
//! Results are cheap to clone (`Arc`) and compare by value, so a phase whose
//! output did not change stops the recomputation there (early cutoff).

pub(crate) mod error;
pub(crate) mod fit;
pub(crate) mod items;
pub mod kernels;
pub mod package;
pub(crate) mod persist;
pub(crate) mod place;
pub(crate) mod refine;
pub(crate) mod tiles;

pub use error::BuildError;
pub(crate) use fit::{fitted_program, planned_signatures};
pub(crate) use place::placement;

use crate::db::{Db, SourceFile};
use crate::emit::steps::ProgramSteps;
use crate::graph::Graph;
use crate::lower::Program;
use crate::partition::KernelId;
use crate::plan::signature::OpSignature;
use crate::plan::{OperatorPlans, Partition};
use crate::schedule::ExchangeSchedule;
use crate::target::{Target, TargetId};
use std::sync::Arc;

/// An operation's signature, interned so it can key a query.
#[salsa::interned(debug)]
pub(crate) struct Signature<'db> {
    #[returns(ref)]
    pub value: OpSignature,
}

/// One tile of a project, interned so it can key the per-tile queries
/// ([`place::tile_placement`], [`tiles::tile_image`],
/// [`tiles::tile_weights`]): a salsa event then names a key whose tile can
/// be looked up after the build (see [`items`]), which a query keyed on
/// `(project, tile)` would not, its arguments being interned inside salsa.
#[salsa::interned(debug)]
pub(crate) struct TileKey<'db> {
    #[returns(copy)]
    pub project: SourceFile,
    #[returns(copy)]
    pub tile: u32,
}

/// One exchange phase of a project, interned to key [`phase_schedule`]
/// (see [`TileKey`]).
#[salsa::interned(debug)]
pub(crate) struct PhaseKey<'db> {
    #[returns(copy)]
    pub project: SourceFile,
    #[returns(copy)]
    pub phase: u32,
}

/// The graph the compiler works on (validated, then legalized), or the
/// project's diagnostics.
pub fn graph(db: &dyn Db, project: SourceFile) -> Result<Arc<Graph>, BuildError> {
    legal_graph(db, project).clone()
}

/// The project as written (validated, not legalized): what the package
/// carries for the host reference, which evaluates it independently.
pub(crate) fn validated_graph(db: &dyn Db, project: SourceFile) -> Result<Arc<Graph>, BuildError> {
    let result = crate::project::project_graph(db, project);
    result
        .graph
        .clone()
        .ok_or_else(|| BuildError::Project(result.diagnostics.clone()))
}

/// The validated graph after legalization ([`crate::legalize`]) and fusion
/// ([`fusion`]): what every phase after validation works on.
#[salsa::tracked(returns(ref))]
pub(crate) fn legal_graph(db: &dyn Db, project: SourceFile) -> Result<Arc<Graph>, BuildError> {
    let written = validated_graph(db, project)?.tensors.len();
    let fusion = fusion(db, project).clone()?;
    let graph = Arc::new(fusion.graph.clone());
    Ok(match db.settings().read_back(db) {
        crate::db::ReadBack::Checked => graph,
        crate::db::ReadBack::All => Arc::new(reading_back_all(&graph, written)),
    })
}

/// The legalized graph's fusion ([`crate::fuse`]): the operations merged
/// into one compute step each, and the graph with them merged. It reads the
/// graph before `--dump-all` adds its read-backs, so dumping every
/// intermediate does not change what fuses; the intermediates fusion
/// removes are then simply not read back.
#[salsa::tracked(returns(ref))]
pub(crate) fn fusion(
    db: &dyn Db,
    project: SourceFile,
) -> Result<Arc<crate::fuse::Fusion>, BuildError> {
    let graph = validated_graph(db, project)?;
    let (legal, removed, inserted) = crate::legalize::legalize(&graph);
    tracing::info!(removed = removed.len(), "eliminated unread operations");
    for op in &removed {
        // The project's located `unread-result` warning tells the user;
        // this is the log's record of it.
        tracing::info!(op = op.as_str(), "operation result is never read; removed");
    }
    tracing::info!(
        inserted = inserted.len(),
        "inserted implicit casts and the reshapes of shared-matrix products"
    );
    // A product absorbs an elementwise step when its plan with the step
    // is no slower than the two plans apart. A step planned alone is
    // refined against operands laid out as it wants them, which the
    // channel blocks of a product's result never are, so it is costed
    // with the analytical exchange of every operand when that is more.
    let plan = |op: &crate::graph::Op| {
        let signature = OpSignature::of(&legal, op);
        operator_plans(db, Signature::new(db, signature))
            .selected()
            .clone()
    };
    let worthwhile =
        |product: &crate::graph::Op, step: &crate::graph::Op, merged: &crate::graph::Op| {
            let alone = plan(step);
            let step_cycles = refine::selection_cycles(&alone).max(alone.estimate.total_cycles());
            refine::selection_cycles(&plan(merged))
                <= refine::selection_cycles(&plan(product)) + step_cycles
        };
    let fusion = crate::fuse::fuse_with(&legal, &worthwhile);
    tracing::info!(fused = fusion.fused.len(), "fused operations");
    for fused in &fusion.fused {
        let op = fusion.graph.op(fused.op).name.as_str();
        tracing::info!(op, "fused into one compute step");
    }
    Ok(Arc::new(fusion))
}

/// `graph` with every materialised intermediate read back as an output
/// (for `ipub run --dump-all`): each result of an operation that is not a
/// view, and each repeat's result. Reading them back at the end of the run
/// keeps them live until then. A repeat body is emitted once and looped,
/// so an intermediate inside it holds its last iteration's value at the
/// end, which is also the value the reference keeps. Only the project's
/// own tensors (the first `written`) are read back: the casts legalization
/// inserts are not in the graph the package carries for the reference.
fn reading_back_all(graph: &Graph, written: usize) -> Graph {
    let mut all = graph.clone();
    let results = graph
        .ops
        .iter()
        .filter(|op| !op.kind.is_view())
        .map(|op| op.output)
        .chain(graph.repeats.iter().map(|r| r.output))
        .filter(|t| (t.0 as usize) < written);
    for tensor in results {
        if !all.outputs.contains(&tensor) {
            all.outputs.push(tensor);
        }
    }
    all
}

/// The graph as lowering, placement and scheduling see it: the values a
/// tensor starts with (`init`, the seed) and how the check judges the
/// outputs do not change the program, so an edit to them stops here (only
/// the weights' bytes and the package follow it).
#[salsa::tracked(returns(ref))]
pub(crate) fn program_graph(db: &dyn Db, project: SourceFile) -> Result<Arc<Graph>, BuildError> {
    let graph = graph(db, project)?;
    let mut structure = (*graph).clone();
    structure.seed = 0;
    for tensor in &mut structure.tensors {
        tensor.init = None;
    }
    structure.check.min_cosine_similarity = 0.0;
    structure.check.max_abs_error = 0.0;
    structure.check.reference_precision = crate::graph::ReferencePrecision::Device;
    Ok(Arc::new(structure))
}

/// The name of the target a project builds for (a query of its own, so
/// what reads only the target does not depend on the whole graph).
#[salsa::tracked(returns(ref))]
pub(crate) fn target_name(db: &dyn Db, project: SourceFile) -> Option<TargetId> {
    graph(db, project).ok().map(|g| g.target)
}

/// The machine a graph was validated for.
pub(crate) fn target_of(graph: &Graph) -> &'static Target {
    graph.target.spec()
}

/// The plans of every operation with this signature.
#[salsa::tracked(returns(ref))]
pub(crate) fn operator_plans<'db>(db: &'db dyn Db, signature: Signature<'db>) -> OperatorPlans {
    let value = signature.value(db);
    let target = value.target.spec();
    persist::persisted(
        db,
        "plans",
        persist::key_of("plans", &[value, &target.name]),
        ("plan", format!("plans of {value}")),
        |plans: &OperatorPlans| plans.check_against(value),
        || refine::operator_plans(value),
    )
}

/// The signature of every operation of a project, in op order.
#[salsa::tracked(returns(ref))]
pub(crate) fn op_signatures(db: &dyn Db, project: SourceFile) -> Vec<OpSignature> {
    match graph(db, project) {
        Ok(graph) => graph
            .ops
            .iter()
            .map(|op| OpSignature::of(&graph, op))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// The partition selected for each operation, in op order, at the spread
/// level the program was fitted with ([`fit`]).
pub fn selected_partitions(db: &dyn Db, project: SourceFile) -> Vec<Partition> {
    partitions_of(db, &planned_signatures(db, project))
}

/// The partition each operation would get at level 0, before fitting: the
/// planning the build's plan phase reports.
pub(crate) fn initial_partitions(db: &dyn Db, project: SourceFile) -> Vec<Partition> {
    partitions_of(db, op_signatures(db, project))
}

fn partitions_of(db: &dyn Db, signatures: &[OpSignature]) -> Vec<Partition> {
    signatures
        .iter()
        .map(|s| {
            operator_plans(db, Signature::new(db, s.clone()))
                .selected()
                .partition
                .clone()
        })
        .collect()
}

/// The lowered program of a project (see [`fit::fitted_program`]).
#[salsa::tracked(returns(ref))]
pub fn program(db: &dyn Db, project: SourceFile) -> Result<Arc<Program>, BuildError> {
    fitted_program(db, project)
        .as_ref()
        .map(|fitted| fitted.program.clone())
        .map_err(Clone::clone)
}

/// The program's compute steps, numbered once for placement, emission and
/// the package (see [`crate::emit::steps`]).
#[salsa::tracked(returns(ref))]
pub(crate) fn program_steps(
    db: &dyn Db,
    project: SourceFile,
) -> Result<Arc<ProgramSteps>, BuildError> {
    let program = program(db, project).clone()?;
    Ok(Arc::new(ProgramSteps::of(&program)))
}

/// The schedule of one exchange phase (`None` past the last phase or when
/// the program did not build).
#[salsa::tracked(returns(ref))]
pub(crate) fn phase_schedule<'db>(db: &'db dyn Db, key: PhaseKey<'db>) -> Option<ExchangeSchedule> {
    let (project, phase) = (key.project(db), key.phase(db));
    let program = program(db, project).as_ref().ok()?;
    let target = (*target_name(db, project))?.spec();
    let index = phase;
    let phase = program.phases.get(phase as usize)?;
    let schedule = crate::schedule::exchange_schedule(target, program, phase);
    tracing::info!(
        phase = index,
        candidates = schedule.senders,
        ordinary_horizon = schedule.ordinary_horizon,
        paired_horizon = schedule.paired_horizon,
        use_paired = schedule.use_paired,
        "compared ordinary and paired exchange schedules"
    );
    Some(schedule)
}

/// Every kernel variant the project's program runs, compiled.
#[salsa::tracked(returns(ref))]
pub(crate) fn project_kernels(db: &dyn Db, project: SourceFile) -> Result<KernelMap, BuildError> {
    each_variant(db, project, |db, variant| {
        kernels::kernel_object(db, variant).clone()
    })
}

/// The footprint of every kernel variant the program runs (see
/// [`kernels::kernel_footprint`]).
#[salsa::tracked(returns(ref))]
pub(crate) fn project_kernel_footprints(
    db: &dyn Db,
    project: SourceFile,
) -> Result<KernelMap, BuildError> {
    each_variant(db, project, |db, variant| {
        kernels::kernel_footprint(db, variant).clone()
    })
}

/// Compiled kernels by variant name.
pub(crate) type KernelMap = Arc<std::collections::BTreeMap<String, Arc<kernels::KernelObject>>>;

fn each_variant(
    db: &dyn Db,
    project: SourceFile,
    get: impl Fn(
        &dyn Db,
        kernels::KernelVariant<'_>,
    ) -> Result<Arc<kernels::KernelObject>, kernels::KernelBuildError>,
) -> Result<KernelMap, BuildError> {
    let program = program(db, project).clone()?;
    let kernel_dir = tiles::kernel_dir(db, project).clone();
    let target = graph(db, project)?.target;
    let mut ids: Vec<KernelId> = program.kernel_runs().iter().map(|r| r.kernel).collect();
    ids.sort_unstable();
    ids.dedup();
    let mut compiled = std::collections::BTreeMap::new();
    let mut errors = Vec::new();
    for id in ids {
        let variant = kernels::KernelVariant::new(db, id, kernel_dir.clone(), target);
        match get(db, variant) {
            Ok(object) => {
                compiled.insert(id.to_string(), object);
            }
            Err(error) => errors.push(error),
        }
    }
    if errors.is_empty() {
        Ok(Arc::new(compiled))
    } else {
        Err(BuildError::Kernel(error::KernelErrors(errors)))
    }
}

/// The emitter's view of compiled kernels: object and entry point.
pub(crate) fn kernel_codes(
    kernels: &std::collections::BTreeMap<String, Arc<kernels::KernelObject>>,
) -> std::collections::BTreeMap<String, crate::emit::tile::KernelCode<'_>> {
    kernels
        .iter()
        .filter_map(|(name, k)| {
            let entry = k.metadata.entries.first()?;
            Some((
                name.clone(),
                crate::emit::tile::KernelCode {
                    object: &k.object,
                    entry,
                },
            ))
        })
        .collect()
}

/// Every used tile's image, one query per tile ([`tiles::tile_image`]).
pub(crate) fn tile_images(
    db: &dyn Db,
    project: SourceFile,
) -> Result<Vec<Arc<crate::emit::tile::TileImage>>, BuildError> {
    let works = tiles::tile_works(db, project).clone()?;
    works
        .keys()
        .map(|&tile| tiles::tile_image(db, TileKey::new(db, project, tile)).clone())
        .collect()
}

#[cfg(test)]
mod tests;
