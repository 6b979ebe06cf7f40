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
//! (first-fit tries two orders of its buffers, `place::tile`);
//! [`unplaced_tiles`] finds the ones where fragmentation still defeats
//! both, by placing them, and the pipeline re-plans those the same way.

use super::lifetimes::{lifetimes, Lifetime};
use super::{SupportBlock, SupportKind};
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
    /// Whether the bound exceeded is region 1's, which only interleaved
    /// buffers must keep to (else it is the whole loadable memory's).
    pub region1_bound: bool,
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
    let region1 = memory.region1_loadable_bytes();
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
        let (needed, available, region1_bound) = if all > total {
            (all + reserve, total + reserve, false)
        } else if interleaved > region1 {
            (interleaved, region1, true)
        } else {
            continue;
        };
        found.push(Overfull {
            tile,
            needed,
            available,
            region1_bound,
            by_op: by_op(program, &users, ids.iter().copied()),
        });
    }
    found
}

/// Every tile whose buffers do not place as [`super::place_tile`] places
/// them, with `reserve` bytes of code in region 0, in tile order. The
/// byte counts of [`overfull_tiles`] bound what any allocator could do;
/// first fit can still fail within them, when standard buffers overflow
/// into region 1 beside the interleaved ones or free space is left in
/// pieces. `needed` and `available` are the placement's own figures.
pub(crate) fn unplaced_tiles(
    target: &Target,
    graph: &Graph,
    program: &Program,
    reserve: u64,
) -> Vec<Overfull> {
    let support = [SupportBlock {
        kind: SupportKind::Code,
        bytes: u32::try_from(reserve).unwrap_or(u32::MAX),
    }];
    let region1 = target.memory.region1_loadable_bytes();
    let requests = super::tile_requests(graph, program);
    let mut users = None;
    let mut found = Vec::new();
    for (tile, (request, ids)) in requests {
        let Err(error) = super::place_tile(target, tile, &request, &support) else {
            continue;
        };
        let users = users.get_or_insert_with(|| buffer_users(graph, program));
        found.push(Overfull {
            tile,
            needed: error.needed.max(error.available + 1),
            available: error.available,
            region1_bound: error.available == region1,
            by_op: by_op(program, users, ids.iter().map(|id| id.0 as usize)),
        });
    }
    found
}

/// Bytes of `ids`' buffers by the operation they serve, most first.
fn by_op(
    program: &Program,
    users: &BTreeMap<usize, OpId>,
    ids: impl Iterator<Item = usize>,
) -> Vec<(OpId, u64)> {
    let mut bytes: BTreeMap<OpId, u64> = BTreeMap::new();
    for i in ids {
        if let Some(&op) = users.get(&i) {
            *bytes.entry(op).or_default() += u64::from(program.buffers[i].bytes());
        }
    }
    let mut by_op: Vec<(OpId, u64)> = bytes.into_iter().collect();
    by_op.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    by_op
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{DType, OpKind, Role};
    use crate::lower::tests::{lowered, Builder};
    use crate::target::{AddressRange, IPU21};

    /// A product, two GELUs and an add on one tile whose two regions are
    /// cut down to `region0` and `region1` bytes, back to back.
    fn cramped(region0: u32, region1: u32) -> (Target, Graph, Program) {
        let (rows, width) = (8, 32);
        let mut b = Builder::new(1);
        let x = b.tensor("x", &[rows, width], DType::F16, Role::Input);
        let w = b.tensor("w", &[width, width], DType::F16, Role::Weight);
        let matmul = OpKind::Matmul {
            transpose_rhs: false,
            epilogue: Vec::new(),
        };
        let y = b.op(matmul, &[x, w], &[rows, width], DType::F16);
        let g = b.op(OpKind::Gelu, &[y], &[rows, width], DType::F16);
        let z = b.op(OpKind::Add, &[g, y], &[rows, width], DType::F16);
        let o = b.op(OpKind::Gelu, &[z], &[rows, width], DType::F16);
        b.graph.outputs = vec![o];
        let program = lowered(&b.graph);
        let mut target = IPU21;
        let start = target.memory.region0.start;
        let (middle, end) = (start + region0, start + region0 + region1);
        target.memory.region0 = AddressRange::new(start, middle);
        target.memory.region1 = AddressRange::new(middle, end);
        target.memory.loadable = AddressRange::new(start, end);
        target.memory.tile = AddressRange::new(start, end);
        (target, b.graph, program)
    }

    /// The live bytes fit both bounds, but first fit, in either order,
    /// leaves one buffer no room: the byte count passes the tile, placing
    /// it does not, and the tile is reported with the operations that
    /// fill it.
    #[test]
    fn bytes_that_fit_can_still_fail_to_place() {
        let reserve = 1024;
        let (target, graph, program) = cramped(1280, 3328);
        assert!(overfull_tiles(&target, &graph, &program, reserve).is_empty());
        let unplaced = unplaced_tiles(&target, &graph, &program, reserve);
        assert_eq!(unplaced.len(), 1, "{unplaced:?}");
        let tile = &unplaced[0];
        assert!(tile.needed > tile.available, "{tile:?}");
        assert!(!tile.by_op.is_empty(), "{tile:?}");
        // With room to spare, the same program places.
        let (roomy, graph, program) = cramped(4096, 8192);
        assert!(unplaced_tiles(&roomy, &graph, &program, reserve).is_empty());
    }
}
