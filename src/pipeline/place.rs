//! Placement as per-tile queries.
//!
//! [`place_requests`] splits the program into one request per tile, in
//! tile-local terms ([`crate::place::TileRequest`] plus the tile's steps
//! with local buffer numbers). [`place_request`] hands each tile its own,
//! and since equal requests compare equal across edits, [`tile_placement`]
//! (sizing the tile's code, then first-fit) re-runs only for tiles whose
//! buffers, lifetimes or steps changed. [`placement`] puts the tiles back
//! together under the program's buffer ids and verifies the result.

use super::error::LowerBug;
use super::kernels::{kernel_footprint, KernelObject, KernelVariant};
use super::tiles::{kernel_dir, local_steps};
use super::{graph, program, program_steps, project_kernel_footprints, BuildError, TileKey};
use crate::db::{Db, SourceFile};
use crate::emit::steps::TileStep;
use crate::lower::BufferId;
use crate::place::{Placement, SupportBlock, SupportKind, TilePlacement, TileRequest};
use crate::target::TargetId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What placing one tile depends on.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct PlaceRequest {
    pub target: TargetId,
    pub buffers: TileRequest,
    /// The tile's steps, operands numbered as in `buffers` (their sizes
    /// the supervisor's code and the kernel states).
    pub steps: Vec<TileStep>,
}

/// Every tile's request, and the program's id of each tile-local buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PlaceRequests {
    pub tiles: BTreeMap<u32, Arc<PlaceRequest>>,
    pub globals: BTreeMap<u32, Arc<Vec<BufferId>>>,
}

/// Splits the program into per-tile placement requests.
#[salsa::tracked(returns(ref))]
pub(crate) fn place_requests(
    db: &dyn Db,
    project: SourceFile,
) -> Result<Arc<PlaceRequests>, BuildError> {
    let graph = super::program_graph(db, project).clone()?;
    let program = program(db, project).clone()?;
    let numbered = program_steps(db, project).clone()?;
    let mut requests = PlaceRequests {
        tiles: BTreeMap::new(),
        globals: BTreeMap::new(),
    };
    for (tile, (buffers, globals)) in crate::place::tile_requests(&graph, &program) {
        let local: BTreeMap<BufferId, BufferId> = globals
            .iter()
            .enumerate()
            .map(|(i, id)| (*id, BufferId(i as u32)))
            .collect();
        // Every operand is a buffer on the run's tile, so it has a number.
        let mut steps = local_steps(numbered.tile(tile), |id| {
            local.get(&id).copied().unwrap_or(id)
        });
        // Parameter values are kernel state data, written at emission; the
        // sizes placement needs depend on their names only, so an edit of
        // a value (an FP8 scale) re-places nothing.
        for run in steps.iter_mut().flat_map(|s| &mut s.runs) {
            for (_, value) in &mut run.params {
                *value = 0;
            }
        }
        requests.tiles.insert(
            tile,
            Arc::new(PlaceRequest {
                target: graph.target,
                buffers,
                steps,
            }),
        );
        requests.globals.insert(tile, Arc::new(globals));
    }
    Ok(Arc::new(requests))
}

/// One tile's request (`None` for a tile with no buffers).
#[salsa::tracked(returns(ref))]
pub(crate) fn place_request(
    db: &dyn Db,
    project: SourceFile,
    tile: u32,
) -> Option<Arc<PlaceRequest>> {
    place_requests(db, project)
        .as_ref()
        .ok()?
        .tiles
        .get(&tile)
        .cloned()
}

/// One tile's placement, in the request's local buffer numbers: its code
/// sized from the kernels' footprints (which do not change when a kernel's
/// instructions change at the same size), then first-fit.
#[salsa::tracked(returns(ref))]
pub(crate) fn tile_placement<'db>(
    db: &'db dyn Db,
    key: TileKey<'db>,
) -> Result<Arc<TilePlacement>, BuildError> {
    let (project, tile) = (key.project(db), key.tile(db));
    let request = place_request(db, project, tile)
        .clone()
        .ok_or(BuildError::Lower(LowerBug::NoBuffers(tile)))?;
    let dir = kernel_dir(db, project).clone();
    let mut footprints: BTreeMap<String, Arc<KernelObject>> = BTreeMap::new();
    for id in request.steps.iter().flat_map(|s| &s.runs).map(|r| r.kernel) {
        let name = id.to_string();
        if footprints.contains_key(&name) {
            continue;
        }
        let variant = KernelVariant::new(db, id, dir.clone(), request.target);
        let footprint = kernel_footprint(db, variant).clone()?;
        footprints.insert(name, footprint);
    }
    let codes = super::kernel_codes(&footprints);
    let sizes = crate::emit::tile::support_sizes(tile, &request.steps, &codes)?;
    let support: Vec<SupportBlock> = [
        (SupportKind::Code, sizes.supervisor),
        (SupportKind::KernelCode, sizes.kernels),
        (SupportKind::KernelStates, sizes.states),
    ]
    .into_iter()
    .map(|(kind, bytes)| SupportBlock { kind, bytes })
    .collect();
    let target = request.target.spec();
    let placed = crate::place::place_tile(target, tile, &request.buffers, &support)?;
    Ok(Arc::new(placed))
}

/// Every tile's placement under the program's buffer ids, verified.
#[salsa::tracked(returns(ref))]
pub(crate) fn placement(db: &dyn Db, project: SourceFile) -> Result<Arc<Placement>, BuildError> {
    // Every kernel's errors at once, before any tile stops at its first.
    project_kernel_footprints(db, project).clone()?;
    let requests = place_requests(db, project).clone()?;
    let mut placed = Placement::default();
    for (&tile, globals) in &requests.globals {
        let local = tile_placement(db, TileKey::new(db, project, tile))
            .clone()
            .map_err(|error| with_attempts(db, project, error))?;
        placed.tiles.insert(tile, local.globalized(globals));
    }
    let target = super::graph(db, project)?.target.spec();
    let program = program(db, project).clone()?;
    crate::place::verify(target, &program, &placed).map_err(LowerBug::from)?;
    Ok(Arc::new(placed))
}

/// A tile that does not fit says what re-planning already tried.
fn with_attempts(db: &dyn Db, project: SourceFile, error: BuildError) -> BuildError {
    let (BuildError::Placement(mut error), Ok(fitted)) =
        (error.clone(), super::fitted_program(db, project))
    else {
        return error;
    };
    let graph = graph(db, project);
    let name = |i: usize| {
        graph
            .as_ref()
            .map_or(format!("operation {i}"), |g| format!("`{}`", g.ops[i].name))
    };
    let spread: Vec<String> = (fitted.spreads.iter().enumerate())
        .filter(|(_, &level)| level > 0)
        .map(|(i, level)| format!("{} (level {level})", name(i)))
        .collect();
    if !spread.is_empty() {
        error.tried.push(format!(
            "{} rounds of re-planning spread {}",
            fitted.attempts.len(),
            spread.join(", ")
        ));
    }
    error.tried.extend(fitted.unresolved.clone());
    BuildError::Placement(error)
}
