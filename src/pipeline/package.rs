//! The package as queries: assembled from the per-tile images and weights,
//! then encoded as the bytes of a `.ipuexe` file.
//!
//! [`package`] re-runs when any tile's image or weights, the program or the
//! placement change, but the per-tile queries under it re-run only for the
//! tiles that changed. [`package_bytes`] is what the driver writes; when an
//! edit leaves the bytes equal, nothing after it runs and the file on disk
//! is left alone.

use super::tiles::{tile_image, tile_weights, tile_works};
use super::{graph, op_signatures, operator_plans, phase_schedule, placement, program};
use super::{BuildError, Signature};
use crate::db::{Db, SourceFile};
use crate::graph::OpId;
use crate::package::file::{Encoded, Part};
use crate::package::{ExchangeProgram, Package};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The planner's estimate of one run: every operation's selected plan,
/// times its repeat count.
pub fn estimated_cycles(db: &dyn Db, project: SourceFile) -> Result<u64, BuildError> {
    let graph = graph(db, project)?;
    Ok(op_signatures(db, project)
        .iter()
        .enumerate()
        .map(|(i, signature)| {
            let plans = operator_plans(db, Signature::new(db, signature.clone()));
            let times = graph
                .repeat_of(OpId(i as u32))
                .map_or(1, |r| u64::from(r.count));
            plans.selected().estimate.total_cycles() * times
        })
        .sum())
}

/// The whole package of a project.
#[salsa::tracked(returns(ref))]
pub fn package(db: &dyn Db, project: SourceFile) -> Result<Arc<Package>, BuildError> {
    let graph = graph(db, project)?;
    let program = program(db, project).clone()?;
    let placement = placement(db, project).clone()?;
    let works = tile_works(db, project).clone()?;
    let mut images = Vec::with_capacity(works.len());
    let mut weights = BTreeMap::new();
    for &tile in works.keys() {
        images.push(tile_image(db, project, tile).clone()?);
        weights.insert(tile, tile_weights(db, project, tile).clone()?);
    }
    let reference_graph = super::validated_graph(db, project)?;
    let package = crate::emit::package::package(&crate::emit::package::PackageInputs {
        graph: &graph,
        reference_graph: &reference_graph,
        program: &program,
        placement: &placement,
        images: &images,
        weights: &weights,
        exchanges: exchange_programs(db, project).clone()?,
        estimated_cycles: estimated_cycles(db, project)?,
    })
    .map_err(BuildError::Emit)?;
    db.record_execution("package", format!("package {}", graph.name));
    Ok(Arc::new(package))
}

/// The exchange programs at tile addresses (re-run only when the program,
/// the placement or a schedule changes, not when a kernel does).
#[salsa::tracked(returns(ref))]
pub fn exchange_programs(
    db: &dyn Db,
    project: SourceFile,
) -> Result<Arc<Vec<ExchangeProgram>>, BuildError> {
    let program = program(db, project).clone()?;
    let placement = placement(db, project).clone()?;
    let schedules: Vec<_> = (0..program.phases.len() as u32)
        .filter_map(|p| phase_schedule(db, project, p).as_ref().copied())
        .collect();
    let programs = crate::emit::package::exchange_programs(&program, &placement, &schedules)
        .map_err(BuildError::Emit)?;
    db.record_execution("package", "exchange programs".to_string());
    Ok(Arc::new(programs))
}

/// The package's `exchange` part, encoded and hashed.
#[salsa::tracked(returns(ref))]
pub fn exchange_part(db: &dyn Db, project: SourceFile) -> Result<Part, BuildError> {
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
            crate::package::PackageError::RunTooLong { .. } => BuildError::RunTooLong(format!(
                "the program is more than a run may execute: {e}; use fewer repeat iterations"
            )),
            other => BuildError::Emit(other.to_string()),
        })?;
    db.record_execution("package", "encoded package".to_string());
    Ok(Arc::new(bytes))
}
