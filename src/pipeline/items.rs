//! What a build recomputed, by phase and item: for `--explain`, the
//! incrementality tests and the benchmark.
//!
//! Salsa reports every query it executes (its `WillExecute` events, which
//! the database records). The expensive queries among them are named here
//! by phase and item ("emit", "image of tile 3") from their keys, which is
//! why each is keyed by one salsa struct ([`Signature`], [`KernelVariant`],
//! [`TileKey`], [`PhaseKey`], the project's [`SourceFile`]) whose fields can
//! be read back after the build. An executed persisted query may still
//! have reused a stored result (a store or kernel cache hit); it reports
//! that through [`Persistence::reused`](crate::db::Persistence::reused)
//! under the same name, so what was recomputed is what executed minus
//! those hits.

use super::kernels::KernelVariant;
use super::{PhaseKey, Signature, TileKey};
use crate::db::{Database, Db, SourceFile};
use salsa::plumbing::FromId;
use salsa::DatabaseKeyIndex;

/// A phase and an item of it, as `--explain` names them.
pub(crate) type Item = (&'static str, String);

/// Forgets what ran so far, before a build whose work is to be named.
/// What ran in an earlier revision cannot be named: its keys may have been
/// collected since (interned values not read in a revision are reusable).
pub(crate) fn forget(db: &Database) {
    db.executed_queries().take();
    db.reused_items().take();
}

/// What the expensive queries recomputed since [`forget`] or the last
/// call, in the order they started: the executed ones minus the results
/// they reused. Call it in the revision they ran in (before any input
/// changes).
pub(crate) fn recomputed(db: &Database) -> Vec<Item> {
    let executed = db.executed_queries().take();
    let reused = db.reused_items().take();
    let items = executed_minus_reused(db, executed, reused);
    // Naming the items reads results the build memoized; anything that
    // executes while doing so is not part of the build.
    db.executed_queries().take();
    items
}

/// The expensive queries among `executed`, named, without one execution
/// per item in `reused`.
pub(crate) fn executed_minus_reused(
    db: &dyn Db,
    executed: Vec<DatabaseKeyIndex>,
    reused: Vec<Item>,
) -> Vec<Item> {
    // A full-chip build reuses thousands of items: count them by name.
    let mut hits: std::collections::HashMap<Item, usize> = std::collections::HashMap::new();
    for hit in reused {
        *hits.entry(hit).or_default() += 1;
    }
    let mut items = Vec::new();
    for key in executed {
        let Some(item) = item(db, key) else {
            continue;
        };
        match hits.get_mut(&item) {
            Some(count) if *count > 0 => *count -= 1,
            _ => items.push(item),
        }
    }
    items
}

/// The phase and item an executed query computes, if it is one of the
/// expensive queries `--explain` lists.
fn item(db: &dyn Db, key: DatabaseKeyIndex) -> Option<Item> {
    let id = key.key_index();
    // Query ingredients are named for their functions, which are unique
    // among the crate's queries; each key below is the struct the query
    // named takes, so reading it back from its id is sound.
    let name = db.ingredient_debug_name(key.ingredient_index());
    let tile = || TileKey::from_id(id).tile(db);
    let project_name = || {
        let project = SourceFile::from_id(id);
        super::graph(db, project)
            .ok()
            .map(|graph| graph.name.clone())
    };
    Some(match &*name {
        "operator_plans" => (
            "plan",
            format!("plans of {}", Signature::from_id(id).value(db)),
        ),
        "fitted_program" => ("lower", format!("program of {}", project_name()?)),
        "phase_schedule" => {
            let key = PhaseKey::from_id(id);
            let program = super::program(db, key.project(db)).as_ref().ok()?;
            let index = key.phase(db);
            let phase = program.phases.get(index as usize)?;
            ("schedule", format!("phase {index} ({})", phase.label()))
        }
        "kernel_object" => (
            "kernels",
            format!("kernel {}", KernelVariant::from_id(id).id(db)),
        ),
        "tile_placement" => ("place", format!("placement of tile {}", tile())),
        "tile_image" => ("emit", format!("image of tile {}", tile())),
        "tile_weights" => ("weights", format!("weights of tile {}", tile())),
        "package" => ("package", format!("package {}", project_name()?)),
        "exchange_programs" => ("package", "exchange programs".to_string()),
        "package_bytes" => ("package", "encoded package".to_string()),
        _ => return None,
    })
}
