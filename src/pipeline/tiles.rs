//! Per-tile queries: what each tile does, its image and its weights.
//!
//! [`tile_works`] splits the program and the placement into one
//! [`TileWork`] per tile, with buffers renumbered in the order the tile
//! first uses them. [`tile_work`] hands each tile its part, and because two
//! [`TileWork`]s compare equal whenever the tile does the same thing at the
//! same addresses, the expensive per-tile queries after it
//! ([`tile_image`], [`tile_weights`]) re-run only for tiles whose work
//! really changed: an edit to one operation, or to one kernel, leaves the
//! other tiles' images alone.

use super::error::{EmitBug, TensorFileError};
use super::kernels::{kernel_code, KernelObject, KernelVariant};
use super::{graph, placement, program, program_steps, BuildError, TileKey};
use crate::db::{Db, SourceFile};
use crate::emit::steps::{ProgramSteps, TileStep};
use crate::emit::tile::{KernelCode, TileImage};
use crate::graph::Role;
use crate::lower::layout::Piece;
use crate::lower::view::View;
use crate::lower::{BufferId, BufferRole, KernelRun, OperandRef, Program};
use crate::package::{Segment, SegmentKind};
use crate::partition::KernelId;
use crate::place::{Placement, SupportKind, TilePlacement};
use crate::target::TargetId;
use camino::Utf8PathBuf;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A weight buffer the loader fills: which weight, how its slots map to
/// the weight's elements, and where it goes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct WeightFill {
    pub address: u32,
    pub tensor: u32,
    pub iteration: Option<u32>,
    pub element_bytes: u32,
    pub piece: Piece,
    pub view: View,
}

/// Everything one tile does, independent of buffer numbering elsewhere.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct TileWork {
    pub tile: u32,
    /// The tile's part in each compute step, operands in tile-local
    /// numbers.
    pub steps: Vec<TileStep>,
    /// The tile's placement restricted to what its steps use, with buffers
    /// in tile-local numbers.
    pub placement: TilePlacement,
    pub weights: Vec<WeightFill>,
    /// The machine the tile belongs to.
    pub target: TargetId,
}

impl TileWork {
    /// The kernels the tile runs, sorted.
    pub fn kernels(&self) -> Vec<KernelId> {
        let mut kernels: Vec<KernelId> = self
            .steps
            .iter()
            .flat_map(|s| s.runs.iter().map(|r| r.kernel))
            .collect();
        kernels.sort();
        kernels.dedup();
        kernels
    }

    /// A support block's address and size (zero when the tile has none).
    fn support_block(&self, kind: SupportKind) -> (u32, u32) {
        self.placement
            .support
            .iter()
            .find(|(k, _, _)| *k == kind)
            .map_or((0, 0), |&(_, address, bytes)| (address, bytes))
    }
}

/// The directory kernel sources are found in (a query of its own so that
/// per-tile queries do not depend on the whole project).
#[salsa::tracked(returns(ref))]
pub(crate) fn kernel_dir(db: &dyn Db, project: SourceFile) -> Utf8PathBuf {
    crate::project::project_graph(db, project)
        .kernel_dir
        .clone()
}

/// Every tile's work, split from the program and the placement.
#[salsa::tracked(returns(ref))]
pub(crate) fn tile_works(
    db: &dyn Db,
    project: SourceFile,
) -> Result<Arc<BTreeMap<u32, Arc<TileWork>>>, BuildError> {
    let program = program(db, project).clone()?;
    let steps = program_steps(db, project).clone()?;
    let placement = placement(db, project).clone()?;
    let target = super::graph(db, project)?.target;
    Ok(Arc::new(
        split(&program, &steps, &placement, target)
            .into_iter()
            .map(|(tile, work)| (tile, Arc::new(work)))
            .collect(),
    ))
}

/// One tile's work (`None` for a tile the program does not use).
#[salsa::tracked(returns(ref))]
pub(crate) fn tile_work(db: &dyn Db, project: SourceFile, tile: u32) -> Option<Arc<TileWork>> {
    tile_works(db, project).as_ref().ok()?.get(&tile).cloned()
}

/// Splits a placed program into per-tile work.
pub(crate) fn split(
    program: &Program,
    numbered: &ProgramSteps,
    placement: &Placement,
    target: TargetId,
) -> BTreeMap<u32, TileWork> {
    let mut works = BTreeMap::new();
    for tile in program.tiles() {
        let Some(placed) = placement.tiles.get(&tile) else {
            continue;
        };
        let mut local: BTreeMap<BufferId, BufferId> = BTreeMap::new();
        let steps = local_steps(numbered.tile(tile), |id| {
            let next = BufferId(local.len() as u32);
            *local.entry(id).or_insert(next)
        });
        let mut buffers: Vec<(BufferId, u32)> = placed
            .buffers
            .iter()
            .filter_map(|(id, address)| local.get(id).map(|l| (*l, *address)))
            .collect();
        buffers.sort_unstable();
        works.insert(
            tile,
            TileWork {
                tile,
                steps,
                placement: TilePlacement {
                    support: placed.support.clone(),
                    buffers,
                    region0_end: 0,
                    region1_end: 0,
                },
                weights: Vec::new(),
                target,
            },
        );
    }
    for binding in &program.host_writes {
        for (id, view) in &binding.pieces {
            let buffer = program.buffer(*id);
            let BufferRole::Weight { tensor, iteration } = buffer.role else {
                continue;
            };
            let (Some(work), Some(address)) = (
                works.get_mut(&buffer.tile),
                placement.address(buffer.tile, *id),
            ) else {
                continue;
            };
            work.weights.push(WeightFill {
                address,
                tensor: tensor.0,
                iteration,
                element_bytes: buffer.dtype.size_bytes() as u32,
                piece: buffer.piece.clone(),
                view: view.clone(),
            });
        }
    }
    for work in works.values_mut() {
        work.weights.sort_by_key(|w| w.address);
    }
    works
}

/// A tile's steps with every operand renamed by `local`.
pub(crate) fn local_steps(
    steps: &[TileStep],
    mut local: impl FnMut(BufferId) -> BufferId,
) -> Vec<TileStep> {
    steps
        .iter()
        .map(|s| TileStep {
            step: s.step,
            runs: s
                .runs
                .iter()
                .map(|run| KernelRun {
                    operands: run
                        .operands
                        .iter()
                        .map(|o| match o {
                            OperandRef::Buffer(b) => OperandRef::Buffer(local(*b)),
                            OperandRef::PerIteration(bs) => {
                                OperandRef::PerIteration(bs.iter().map(|b| local(*b)).collect())
                            }
                        })
                        .collect(),
                    ..run.clone()
                })
                .collect(),
            repeat: s.repeat,
            advances_counter: s.advances_counter,
        })
        .collect()
}

/// One tile's image: supervisor routines, linked kernels, kernel states.
/// Depends only on the tile's work and the kernels it runs.
#[salsa::tracked(returns(ref))]
pub(crate) fn tile_image<'db>(
    db: &'db dyn Db,
    key: TileKey<'db>,
) -> Result<Arc<TileImage>, BuildError> {
    let (project, tile) = (key.project(db), key.tile(db));
    let work = tile_work(db, project, tile)
        .clone()
        .ok_or(BuildError::Emit(EmitBug::NoWork(tile)))?;
    let dir = kernel_dir(db, project).clone();
    let mut objects: BTreeMap<String, Arc<KernelObject>> = BTreeMap::new();
    for id in work.kernels() {
        let name = id.to_string();
        let variant = KernelVariant::new(db, id, dir.clone(), work.target);
        let object = kernel_code(db, variant).clone()?;
        objects.insert(name, object);
    }
    // Not persisted: emitting a tile takes tens to hundreds of
    // microseconds, less than writing its store entry or reading and
    // decoding it back (see the book's incremental chapter).
    let image = emit_image(&work, &objects)?;
    Ok(Arc::new(image))
}

fn emit_image(
    work: &TileWork,
    objects: &BTreeMap<String, Arc<KernelObject>>,
) -> Result<TileImage, BuildError> {
    let tile = work.tile;
    let codes: BTreeMap<String, KernelCode> = super::kernel_codes(objects);
    let placement = Placement {
        tiles: BTreeMap::from([(tile, work.placement.clone())]),
    };
    crate::emit::tile::tile_image(
        tile,
        &work.steps,
        &crate::emit::tile::TileInputs {
            target: work.target.spec(),
            placement: &placement,
            kernels: &codes,
            code_address: work.support_block(SupportKind::Code).0,
            code_bytes: work.support_block(SupportKind::Code).1,
            kernels_address: work.support_block(SupportKind::KernelCode).0,
            states_address: work.support_block(SupportKind::KernelStates).0,
        },
    )
    .map_err(BuildError::from)
}

/// What a weight's values are made of (a query of its own, so a weight's
/// bytes are regenerated only when its own declaration changes).
#[salsa::tracked(returns(ref))]
pub(crate) fn weight_spec(
    db: &dyn Db,
    project: SourceFile,
    tensor: u32,
) -> Option<(u64, crate::graph::Tensor)> {
    let graph = graph(db, project).ok()?;
    let t = graph.tensors.get(tensor as usize)?;
    (t.role == Role::Weight).then(|| (graph.seed, t.clone()))
}

/// A weight's row-major device bytes (one iteration of a per-iteration
/// weight): generated, or converted from its tensor file (then the query
/// depends on that file, so editing it re-runs only the weights it holds).
#[salsa::tracked(returns(ref))]
pub(crate) fn weight_bytes(
    db: &dyn Db,
    project: SourceFile,
    tensor: u32,
    iteration: Option<u32>,
) -> Option<Result<Arc<Vec<u8>>, crate::data::DataError>> {
    let (seed, tensor) = weight_spec(db, project, tensor).clone()?;
    if let Some(bytes) = crate::data::query::file_tensor_bytes(db, &tensor, iteration) {
        return Some(bytes);
    }
    Some(Ok(Arc::new(crate::reference::init::declared_tensor_bytes(
        seed, &tensor, iteration,
    ))))
}

/// A tile's preloaded weights as data segments.
#[salsa::tracked(returns(ref))]
pub(crate) fn tile_weights<'db>(
    db: &'db dyn Db,
    key: TileKey<'db>,
) -> Result<Arc<Vec<Segment>>, BuildError> {
    let (project, tile) = (key.project(db), key.tile(db));
    let Some(work) = tile_work(db, project, tile).clone() else {
        return Ok(Arc::default());
    };
    let mut segments = Vec::with_capacity(work.weights.len());
    for fill in &work.weights {
        let bytes = weight_bytes(db, project, fill.tensor, fill.iteration)
            .clone()
            .ok_or(BuildError::Emit(EmitBug::NotWeight(fill.tensor)))?
            .map_err(TensorFileError::Weight)?;
        let data =
            crate::emit::bindings::fill_buffer(&fill.piece, &fill.view, fill.element_bytes, &bytes);
        segments.push(Segment {
            address: fill.address,
            memory_size: data.len() as u32,
            kind: SegmentKind::Data,
            data,
        });
    }
    Ok(Arc::new(segments))
}
