//! Memory pressure before placement: which tiles a program overfills, and
//! which operations' buffers fill them.
//!
//! This is the cheap test the pipeline runs on a lowered program before
//! placing it: for each tile, the most bytes alive at one step (plus a
//! reserve for code and runtime tables) against what the tile holds, and
//! the same for interleaved buffers against region 1. A tile over either
//! bound cannot be placed whatever the allocator does, so the pipeline
//! re-plans the operations that own most of it with a higher spread level
//! (`pipeline::fitted_program`). A tile within both bounds usually places
//! (first-fit tries two orders of its buffers, `place::tile`); when
//! fragmentation still defeats both, placement reports it.

use super::lifetimes::{lifetimes, Lifetime};
use crate::graph::{Graph, OpId};
use crate::lower::{BufferRole, OperandRef, Program, Step};
use crate::partition::MemoryClass;
use crate::target::Target;
use std::collections::BTreeMap;

/// A tile whose live buffers exceed what it can hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Overfull {
    pub tile: u32,
    pub needed: u64,
    pub available: u64,
    /// Bytes of the tile's buffers by the operation they serve, most first.
    pub by_op: Vec<(OpId, u64)>,
}

/// Every tile `program` overfills, with `reserve` bytes kept for code and
/// runtime tables, in tile order.
pub(crate) fn overfull_tiles(
    target: &Target,
    graph: &Graph,
    program: &Program,
    reserve: u64,
) -> Vec<Overfull> {
    let lifetimes = lifetimes(program);
    let users = buffer_users(graph, program);
    let mut by_tile: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for (i, buffer) in program.buffers.iter().enumerate() {
        by_tile.entry(buffer.tile).or_default().push(i);
    }
    let memory = &target.memory;
    let total = u64::from(memory.loadable.len()).saturating_sub(reserve);
    let region1 = u64::from(memory.loadable.end - memory.region1.start);
    let mut found = Vec::new();
    for (tile, ids) in by_tile {
        let live = |class: Option<MemoryClass>| {
            peak(ids.iter().filter_map(|&i| {
                let buffer = &program.buffers[i];
                (class.is_none() || class == Some(buffer.class))
                    .then(|| (lifetimes[i], u64::from(buffer.bytes())))
            }))
        };
        let (all, interleaved) = (live(None), live(Some(MemoryClass::Interleaved)));
        let (needed, available) = if all > total {
            (all + reserve, total + reserve)
        } else if interleaved > region1 {
            (interleaved, region1)
        } else {
            continue;
        };
        let mut bytes: BTreeMap<OpId, u64> = BTreeMap::new();
        for &i in &ids {
            if let Some(&op) = users.get(&i) {
                *bytes.entry(op).or_default() += u64::from(program.buffers[i].bytes());
            }
        }
        let mut by_op: Vec<(OpId, u64)> = bytes.into_iter().collect();
        by_op.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        found.push(Overfull {
            tile,
            needed,
            available,
            by_op,
        });
    }
    found
}

/// The most bytes alive at one step among `buffers` (lifetime, bytes).
fn peak(buffers: impl Iterator<Item = (Lifetime, u64)>) -> u64 {
    let mut events: Vec<(u32, i64)> = Vec::new();
    for ((first, last), bytes) in buffers {
        events.push((first, bytes as i64));
        events.push((last + 1, -(bytes as i64)));
    }
    events.sort_unstable();
    let (mut live, mut peak) = (0i64, 0i64);
    for (_, delta) in events {
        live += delta;
        peak = peak.max(live);
    }
    peak as u64
}

/// The operation each buffer serves: the one that gathers it or computes
/// into it, else the first kernel run that reads it (an input or weight).
fn buffer_users(graph: &Graph, program: &Program) -> BTreeMap<usize, OpId> {
    let mut users = BTreeMap::new();
    for (i, buffer) in program.buffers.iter().enumerate() {
        let op = match buffer.role {
            BufferRole::Operand { op, .. }
            | BufferRole::Partial { op, .. }
            | BufferRole::Intermediate { op } => Some(op),
            BufferRole::Activation { tensor } => graph
                .ops
                .iter()
                .position(|op| op.output == tensor)
                .map(|p| OpId(p as u32)),
            BufferRole::Input { .. } | BufferRole::Weight { .. } => None,
        };
        if let Some(op) = op {
            users.insert(i, op);
        }
    }
    fn walk(steps: &[Step], users: &mut BTreeMap<usize, OpId>) {
        for step in steps {
            match step {
                Step::Compute { op, runs } => {
                    for operand in runs.iter().flat_map(|r| &r.operands) {
                        let ids = match operand {
                            OperandRef::Buffer(id) => std::slice::from_ref(id),
                            OperandRef::PerIteration(ids) => ids.as_slice(),
                        };
                        for id in ids {
                            users.entry(id.0 as usize).or_insert(*op);
                        }
                    }
                }
                Step::Repeat { body, .. } => walk(body, users),
                Step::Exchange(_) => {}
            }
        }
    }
    walk(&program.steps, &mut users);
    users
}
