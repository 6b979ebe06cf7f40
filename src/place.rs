//! Placement: an address for every buffer and support block on every tile.
//!
//! Code and the supervisor's support data (exchange tables, kernel states,
//! profile buffer) go first in region 0, the only region code may run
//! from. Interleaved buffers go in region 1. Other buffers go in region 0
//! after the code and overflow into region 1. Buffers whose lifetimes do
//! not overlap share addresses; padded buffers and weights never share,
//! since their contents must survive from load time.

use crate::graph::Graph;
use crate::lower::{BufferId, BufferRole, OperandRef, Program, Step};
use crate::plan::cost::MemoryClass;
use crate::target::{AddressRange, Target};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

/// Alignment of every buffer: the widest load, 128 bits.
pub const BUFFER_ALIGN: u32 = 16;

/// A block of per-tile runtime data the emitter needs, sized before placement.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SupportBlock {
    pub kind: SupportKind,
    pub bytes: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum SupportKind {
    /// The supervisor's routines.
    Code,
    /// The kernel variants the tile runs, linked one after another.
    KernelCode,
    ExchangeTables,
    KernelStates,
    Profile,
}

impl fmt::Display for SupportKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SupportKind::Code => "code",
            SupportKind::KernelCode => "kernel code",
            SupportKind::ExchangeTables => "exchange tables",
            SupportKind::KernelStates => "kernel states",
            SupportKind::Profile => "profile",
        })
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TilePlacement {
    pub support: Vec<(SupportKind, u32, u32)>,
    pub buffers: Vec<(BufferId, u32)>,
    /// Highest address used in each region, for reports.
    pub region0_end: u32,
    pub region1_end: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Placement {
    pub tiles: BTreeMap<u32, TilePlacement>,
}

impl Placement {
    pub fn address(&self, tile: u32, buffer: BufferId) -> Option<u32> {
        self.tiles
            .get(&tile)?
            .buffers
            .iter()
            .find(|(id, _)| *id == buffer)
            .map(|&(_, address)| address)
    }

    /// Stable text dump (used by tests and `--emit placement`).
    pub fn dump(&self, program: &Program) -> String {
        let mut out = String::new();
        for (tile, placement) in &self.tiles {
            let _ = writeln!(
                out,
                "tile {tile}: region0 to {:#x}, region1 to {:#x}",
                placement.region0_end, placement.region1_end
            );
            for (kind, address, bytes) in &placement.support {
                let _ = writeln!(out, "  {address:#07x} {bytes:>7} {kind}");
            }
            for (id, address) in &placement.buffers {
                let buffer = program.buffer(*id);
                let _ = writeln!(
                    out,
                    "  {address:#07x} {:>7} buffer {} {:?}",
                    buffer.bytes(),
                    id.0,
                    buffer.role
                );
            }
        }
        out
    }
}

/// Why a tile's data does not fit.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "tile {tile} needs {needed} bytes but only {available} are available ({over} bytes over); largest users: {}; \
     try more tiles (`tiles` in [project])",
    largest.iter().map(|(what, bytes)| format!("{what} ({bytes} bytes)")).collect::<Vec<_>>().join(", ")
)]
pub struct PlacementError {
    pub tile: u32,
    pub needed: u64,
    pub available: u64,
    pub over: u64,
    pub largest: Vec<(String, u64)>,
}

/// Inclusive range of step positions during which a buffer must keep its
/// contents.
type Lifetime = (u32, u32);

/// Computes every buffer's lifetime from the step sequence.
fn lifetimes(program: &Program) -> Vec<Lifetime> {
    #[derive(Clone, Copy)]
    struct Touches {
        first: u32,
        last: u32,
    }
    let mut touches: Vec<Option<Touches>> = vec![None; program.buffers.len()];
    let mut first_is_read: Vec<Vec<(u32, u32, bool)>> = vec![Vec::new(); program.buffers.len()];
    let mut repeats: Vec<(u32, u32)> = Vec::new();
    let mut position = 1u32;

    fn touch(
        touches: &mut [Option<Touches>],
        log: &mut [Vec<(u32, u32, bool)>],
        id: BufferId,
        at: u32,
        write: bool,
    ) {
        let t = touches[id.0 as usize].get_or_insert(Touches {
            first: at,
            last: at,
        });
        t.first = t.first.min(at);
        t.last = t.last.max(at);
        log[id.0 as usize].push((at, at, write));
    }

    fn walk(
        program: &Program,
        steps: &[Step],
        position: &mut u32,
        touches: &mut [Option<Touches>],
        log: &mut [Vec<(u32, u32, bool)>],
        repeats: &mut Vec<(u32, u32)>,
    ) {
        for step in steps {
            match step {
                Step::Compute { runs, .. } => {
                    for run in runs {
                        let last = run.operands.len() - 1;
                        for (i, operand) in run.operands.iter().enumerate() {
                            let ids: Vec<BufferId> = match operand {
                                OperandRef::Buffer(id) => vec![*id],
                                OperandRef::PerIteration(ids) => ids.clone(),
                            };
                            for id in ids {
                                touch(touches, log, id, *position, i == last);
                            }
                        }
                    }
                    *position += 1;
                }
                Step::Exchange(phase) => {
                    for transfer in &program.phase(*phase).transfers {
                        touch(touches, log, transfer.source, *position, false);
                        for &(id, _) in &transfer.destinations {
                            touch(touches, log, id, *position, true);
                        }
                    }
                    *position += 1;
                }
                Step::Repeat { body, .. } => {
                    let start = *position;
                    walk(program, body, position, touches, log, repeats);
                    repeats.push((start, *position - 1));
                }
            }
        }
    }
    walk(
        program,
        &program.steps,
        &mut position,
        &mut touches,
        &mut first_is_read,
        &mut repeats,
    );
    let end = position;

    program
        .buffers
        .iter()
        .enumerate()
        .map(|(i, buffer)| {
            let whole = (0, end);
            if matches!(buffer.role, BufferRole::Weight { .. }) || buffer.piece.has_padding() {
                return whole;
            }
            let Some(t) = touches[i] else { return whole };
            let (mut first, mut last) = (t.first, t.last);
            if matches!(buffer.role, BufferRole::Input { .. }) {
                first = 0;
            }
            if program
                .host_reads
                .iter()
                .any(|b| b.pieces.iter().any(|(id, _)| id.0 as usize == i))
            {
                last = end;
            }
            // A value that flows around a loop's back edge, or into or out
            // of the loop, lives for the whole loop.
            for &(start, stop) in &repeats {
                let inside: Vec<_> = first_is_read[i]
                    .iter()
                    .filter(|(at, _, _)| (start..=stop).contains(at))
                    .collect();
                if inside.is_empty() {
                    continue;
                }
                let outside = first_is_read[i].len() > inside.len() || first < start || last > stop;
                let read_first = inside
                    .iter()
                    .min_by_key(|(at, _, write)| (*at, *write))
                    .is_some_and(|(_, _, write)| !write);
                if outside || read_first {
                    first = first.min(start);
                    last = last.max(stop);
                }
            }
            (first, last)
        })
        .collect()
}

/// Places every tile of `program`; `support(tile)` gives the support blocks
/// each tile needs, which go first in region 0.
pub fn placement(
    target: &Target,
    graph: &Graph,
    program: &Program,
    support: &dyn Fn(u32) -> Vec<SupportBlock>,
) -> Result<Placement, PlacementError> {
    let lifetimes = lifetimes(program);
    let mut by_tile: BTreeMap<u32, Vec<BufferId>> = BTreeMap::new();
    for (i, buffer) in program.buffers.iter().enumerate() {
        by_tile
            .entry(buffer.tile)
            .or_default()
            .push(BufferId(i as u32));
    }
    let memory = &target.memory;
    let mut placement = Placement::default();
    for (tile, mut ids) in by_tile {
        let mut tile_placement = TilePlacement::default();
        let mut cursor = memory.region0.start;
        for block in support(tile) {
            tile_placement
                .support
                .push((block.kind, cursor, block.bytes));
            cursor = align(cursor + block.bytes, BUFFER_ALIGN);
        }
        let region0 = AddressRange::new(cursor, memory.region0.end);
        let region1 = AddressRange::new(memory.region1.start, memory.loadable.end);
        let support_bytes = u64::from(cursor - memory.region0.start);
        if cursor > memory.region0.end {
            let available = u64::from(memory.region0.len());
            return Err(shortfall(
                graph,
                program,
                tile,
                &tile_placement,
                &ids,
                support_bytes,
                available,
            ));
        }
        // Largest first, so big buffers find room before the small ones
        // fragment the space; ties broken by id for determinism.
        ids.sort_by_key(|id| (std::cmp::Reverse(program.buffer(*id).bytes()), *id));
        let mut placed: Vec<(u32, u32, Lifetime)> = Vec::new();
        for &id in &ids {
            let buffer = program.buffer(id);
            let life = lifetimes[id.0 as usize];
            let ranges: &[AddressRange] = match buffer.class {
                MemoryClass::Interleaved => &[region1],
                MemoryClass::Standard => &[region0, region1],
            };
            let Some(address) = ranges
                .iter()
                .find_map(|range| first_fit(range, buffer.bytes(), life, &placed))
            else {
                // Interleaved buffers are bounded by region 1 alone; the
                // others by the whole loadable memory.
                let (needed, available) = match buffer.class {
                    MemoryClass::Interleaved => {
                        let interleaved: Vec<BufferId> = ids
                            .iter()
                            .copied()
                            .filter(|i| program.buffer(*i).class == MemoryClass::Interleaved)
                            .collect();
                        (
                            peak_live_bytes(program, &interleaved, &lifetimes),
                            u64::from(region1.len()),
                        )
                    }
                    MemoryClass::Standard => (
                        support_bytes + peak_live_bytes(program, &ids, &lifetimes),
                        u64::from(memory.loadable.len()),
                    ),
                };
                // When the live bytes would fit, first-fit left the free space
                // in pieces too small for this buffer; report that honestly
                // as the bytes of the buffer that did not find a place.
                let needed = if needed > available {
                    needed
                } else {
                    available + u64::from(buffer.bytes())
                        - largest_free_range(ranges, life, &placed)
                };
                return Err(shortfall(
                    graph,
                    program,
                    tile,
                    &tile_placement,
                    &ids,
                    needed,
                    available,
                ));
            };
            placed.push((address, buffer.bytes(), life));
            tile_placement.buffers.push((id, address));
            let end = address + buffer.bytes();
            if memory.region0.contains(address) {
                tile_placement.region0_end = tile_placement.region0_end.max(end);
            } else {
                tile_placement.region1_end = tile_placement.region1_end.max(end);
            }
        }
        tile_placement.region0_end = tile_placement.region0_end.max(cursor);
        tile_placement.buffers.sort_by_key(|(id, _)| *id);
        placement.tiles.insert(tile, tile_placement);
    }
    Ok(placement)
}

/// Why a placement is wrong: always a compiler bug, never a user error.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("placement verifier (a compiler bug): {0}")]
pub struct PlacementBug(pub String);

/// Checks a placement against the program: every buffer has an address on
/// its tile, inside loadable memory and its class's region, support blocks
/// stay in region 0 below every buffer placed there, and no two buffers
/// that are alive at the same time overlap.
pub fn verify(
    target: &Target,
    program: &Program,
    placement: &Placement,
) -> Result<(), PlacementBug> {
    let memory = &target.memory;
    let lifetimes = lifetimes(program);
    for (i, buffer) in program.buffers.iter().enumerate() {
        let id = BufferId(i as u32);
        let Some(address) = placement.address(buffer.tile, id) else {
            return Err(PlacementBug(format!(
                "buffer {i} on tile {} has no address",
                buffer.tile
            )));
        };
        if !memory.loadable.contains_span(address, buffer.bytes()) {
            return Err(PlacementBug(format!(
                "buffer {i} at {address:#x} leaves loadable memory"
            )));
        }
        if buffer.class == MemoryClass::Interleaved && !memory.region1.contains(address) {
            return Err(PlacementBug(format!(
                "interleaved buffer {i} at {address:#x} is outside region 1"
            )));
        }
        if address % BUFFER_ALIGN != 0 {
            return Err(PlacementBug(format!(
                "buffer {i} at {address:#x} is misaligned"
            )));
        }
    }
    for (tile, tile_placement) in &placement.tiles {
        for &(kind, address, bytes) in &tile_placement.support {
            if !memory.region0.contains_span(address, bytes) {
                return Err(PlacementBug(format!(
                    "{kind} on tile {tile} is outside region 0"
                )));
            }
        }
        let support_end = tile_placement
            .support
            .iter()
            .map(|&(_, a, b)| a + b)
            .max()
            .unwrap_or(memory.region0.start);
        let mut spans: Vec<(u32, u32, Lifetime, BufferId)> = tile_placement
            .buffers
            .iter()
            .map(|&(id, address)| {
                let bytes = program.buffer(id).bytes();
                (address, address + bytes, lifetimes[id.0 as usize], id)
            })
            .collect();
        spans.sort_unstable();
        for (index, a) in spans.iter().enumerate() {
            if a.0 < support_end && a.1 > a.0 {
                return Err(PlacementBug(format!(
                    "buffer {} on tile {tile} overlaps the support blocks",
                    a.3 .0
                )));
            }
            for b in spans[index + 1..].iter().take_while(|b| b.0 < a.1) {
                if overlaps(a.2, b.2) && a.1 > a.0 && b.1 > b.0 {
                    return Err(PlacementBug(format!(
                        "buffers {} and {} on tile {tile} overlap while both are alive",
                        a.3 .0, b.3 .0
                    )));
                }
            }
        }
    }
    Ok(())
}

fn align(value: u32, alignment: u32) -> u32 {
    value.div_ceil(alignment) * alignment
}

fn overlaps(a: Lifetime, b: Lifetime) -> bool {
    a.0 <= b.1 && b.0 <= a.1
}

/// The lowest aligned address in `range` where `bytes` fit without
/// overlapping a placed buffer that is alive at the same time.
fn first_fit(
    range: &AddressRange,
    bytes: u32,
    life: Lifetime,
    placed: &[(u32, u32, Lifetime)],
) -> Option<u32> {
    let mut conflicts: Vec<(u32, u32)> = placed
        .iter()
        .filter(|(_, _, other)| overlaps(life, *other))
        .map(|&(address, size, _)| (address, address + size))
        .collect();
    conflicts.sort_unstable();
    let mut candidate = align(range.start, BUFFER_ALIGN);
    for (start, end) in conflicts {
        if candidate + bytes <= start {
            break;
        }
        if end > candidate {
            candidate = align(end, BUFFER_ALIGN);
        }
    }
    (u64::from(candidate) + u64::from(bytes) <= u64::from(range.end)).then_some(candidate)
}

/// The most bytes of `ids` alive at one step: what a tile needs at least.
/// The largest free range, in any of `ranges`, for a buffer alive during
/// `life`.
fn largest_free_range(
    ranges: &[AddressRange],
    life: Lifetime,
    placed: &[(u32, u32, Lifetime)],
) -> u64 {
    let mut best = 0u64;
    for range in ranges {
        let mut busy: Vec<(u32, u32)> = placed
            .iter()
            .filter(|(_, _, other)| overlaps(life, *other))
            .map(|(address, bytes, _)| (*address, address + bytes))
            .filter(|(start, end)| *end > range.start && *start < range.end)
            .collect();
        busy.sort_unstable();
        let mut cursor = range.start;
        for (start, end) in busy {
            best = best.max(u64::from(start.saturating_sub(cursor)));
            cursor = cursor.max(align(end, BUFFER_ALIGN));
        }
        best = best.max(u64::from(range.end.saturating_sub(cursor)));
    }
    best
}

fn peak_live_bytes(program: &Program, ids: &[BufferId], lifetimes: &[Lifetime]) -> u64 {
    let mut events: Vec<(u32, i64)> = Vec::new();
    for id in ids {
        let (first, last) = lifetimes[id.0 as usize];
        let bytes = i64::from(program.buffer(*id).bytes());
        events.push((first, bytes));
        events.push((last + 1, -bytes));
    }
    events.sort_unstable();
    let (mut live, mut peak) = (0i64, 0i64);
    for (_, delta) in events {
        live += delta;
        peak = peak.max(live);
    }
    peak as u64
}

fn shortfall(
    graph: &Graph,
    program: &Program,
    tile: u32,
    placed: &TilePlacement,
    ids: &[BufferId],
    needed: u64,
    available: u64,
) -> PlacementError {
    let mut users: Vec<(String, u64)> = placed
        .support
        .iter()
        .map(|(kind, _, bytes)| (kind.to_string(), u64::from(*bytes)))
        .chain(ids.iter().map(|id| {
            let buffer = program.buffer(*id);
            (describe(graph, &buffer.role), u64::from(buffer.bytes()))
        }))
        .collect();
    users.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    users.truncate(3);
    PlacementError {
        tile,
        needed,
        available,
        over: needed.saturating_sub(available),
        largest: users,
    }
}

fn describe(graph: &Graph, role: &BufferRole) -> String {
    match role {
        BufferRole::Input { tensor } => format!("input `{}`", graph.tensor(*tensor).name),
        BufferRole::Weight {
            tensor,
            iteration: None,
        } => format!("weight `{}`", graph.tensor(*tensor).name),
        BufferRole::Weight {
            tensor,
            iteration: Some(i),
        } => format!("weight `{}` of iteration {i}", graph.tensor(*tensor).name),
        BufferRole::Activation { tensor } => format!("activation `{}`", graph.tensor(*tensor).name),
        BufferRole::Operand { op, operand } => {
            format!("operand {operand} of `{}`", graph.op(*op).name)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{DType, OpKind, Role};
    use crate::lower::tests::{lowered, Builder};
    use crate::target::IPU21;
    use expect_test::expect;

    fn code(_tile: u32) -> Vec<SupportBlock> {
        vec![
            SupportBlock {
                kind: SupportKind::Code,
                bytes: 1000,
            },
            SupportBlock {
                kind: SupportKind::ExchangeTables,
                bytes: 24,
            },
        ]
    }

    fn chain(tiles: u32, rows: usize, width: usize) -> Builder {
        let mut b = Builder::new(tiles);
        let x = b.tensor("x", &[rows, width], DType::F16, Role::Input);
        let w = b.tensor("w", &[width, width], DType::F16, Role::Weight);
        let y = b.op(
            OpKind::Matmul {
                transpose_rhs: false,
            },
            &[x, w],
            &[rows, width],
            DType::F16,
        );
        let g = b.op(OpKind::Gelu, &[y], &[rows, width], DType::F16);
        let z = b.op(OpKind::Gelu, &[g], &[rows, width], DType::F16);
        let o = b.op(OpKind::Gelu, &[z], &[rows, width], DType::F16);
        b.graph.outputs = vec![o];
        b
    }

    #[test]
    fn dead_buffers_share_addresses() {
        let b = chain(1, 8, 32);
        let program = lowered(&b.graph);
        let placed = placement(&IPU21, &b.graph, &program, &code).expect("fits");
        expect![[r#"
            tile 0: region0 to 0x4c810, region1 to 0x80c00
              0x4c000    1000 code
              0x4c3f0      24 exchange tables
              0x80800     512 buffer 0 Input { tensor: TensorId(0) }
              0x80000    2048 buffer 1 Weight { tensor: TensorId(1), iteration: None }
              0x80a00     512 buffer 2 Activation { tensor: TensorId(2) }
              0x4c410     512 buffer 3 Operand { op: OpId(1), operand: 0 }
              0x4c610     512 buffer 4 Activation { tensor: TensorId(3) }
              0x4c410     512 buffer 5 Activation { tensor: TensorId(4) }
              0x4c610     512 buffer 6 Activation { tensor: TensorId(5) }
        "#]]
        .assert_eq(&placed.dump(&program));
    }

    #[test]
    fn a_tile_that_cannot_fit_names_the_shortfall_and_the_largest_users() {
        let b = chain(1, 256, 1024);
        let program = lowered(&b.graph);
        let error = placement(&IPU21, &b.graph, &program, &code).unwrap_err();
        assert_eq!(error.tile, 0);
        assert!(error.over > 0);
        expect!["tile 0 needs 3145728 bytes but only 424880 are available (2720848 bytes over); largest users: weight `w` (2097152 bytes), activation `gelu1` (524288 bytes), activation `gelu2` (524288 bytes); try more tiles (`tiles` in [project])"].assert_eq(&error.to_string());
    }

    #[test]
    fn the_verifier_accepts_placements_and_catches_overlapping_live_buffers() {
        let b = chain(1, 8, 32);
        let program = lowered(&b.graph);
        let mut placed = placement(&IPU21, &b.graph, &program, &code).expect("fits");
        verify(&IPU21, &program, &placed).expect("a correct placement");
        // Buffers 0 (the input) and 2 (the first activation) are alive together.
        let tile = placed.tiles.get_mut(&0).expect("tile 0");
        let input = tile.buffers[0].1;
        tile.buffers[2].1 = input;
        let bug = verify(&IPU21, &program, &placed).unwrap_err();
        assert!(
            bug.to_string().contains("overlap while both are alive"),
            "{bug}"
        );
    }

    #[test]
    fn the_verifier_catches_code_outside_region_0_and_buffers_over_support() {
        let b = chain(1, 8, 32);
        let program = lowered(&b.graph);
        let placed = placement(&IPU21, &b.graph, &program, &code).expect("fits");

        let mut moved = placed.clone();
        let tile = moved.tiles.get_mut(&0).expect("tile 0");
        tile.support[0].1 = IPU21.memory.region1.start;
        let bug = verify(&IPU21, &program, &moved).unwrap_err();
        assert!(bug.to_string().contains("outside region 0"), "{bug}");

        let mut overlapping = placed.clone();
        let tile = overlapping.tiles.get_mut(&0).expect("tile 0");
        let standard = tile
            .buffers
            .iter()
            .position(|(id, _)| program.buffer(*id).class == MemoryClass::Standard)
            .expect("a standard buffer");
        tile.buffers[standard].1 = tile.support[0].1;
        let bug = verify(&IPU21, &program, &overlapping).unwrap_err();
        assert!(
            bug.to_string().contains("overlaps the support blocks"),
            "{bug}"
        );
    }
}
