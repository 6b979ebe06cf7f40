//! Placing one tile: what it asks for ([`TileRequest`]) and the first-fit
//! allocation of its support blocks and buffers ([`place_tile`]).
//!
//! A request is written in tile-local terms: buffers are numbered by their
//! order among the tile's own buffers, and lifetimes are ranks among the
//! tile's own lifetime bounds (overlap depends only on their order). So an
//! edit elsewhere in the program, which renumbers buffers and shifts step
//! positions, leaves an untouched tile's request equal, and the pipeline
//! does not place that tile again.

use super::lifetimes::{lifetimes, overlaps, Lifetime};
use super::{describe, MemoryUser, PlacementError, SupportBlock, TilePlacement, BUFFER_ALIGN};
use crate::graph::Graph;
use crate::lower::{BufferId, Program};
use crate::partition::MemoryClass;
use crate::target::{AddressRange, Target};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One buffer a tile needs room for.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct BufferRequest {
    pub bytes: u32,
    /// The bytes of its values, `bytes` without its layout's padding.
    pub data_bytes: u32,
    pub class: MemoryClass,
    /// Ranks among the tile's lifetime bounds (see the module docs).
    pub life: Lifetime,
    /// What the buffer holds, for the error when the tile does not fit.
    pub what: String,
}

/// Everything placing one tile needs besides its support blocks.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct TileRequest {
    /// Local buffer `i` is `buffers[i]`.
    pub buffers: Vec<BufferRequest>,
}

/// Every tile's request, with the program's id of each local buffer.
pub(crate) fn tile_requests(
    graph: &Graph,
    program: &Program,
) -> BTreeMap<u32, (TileRequest, Vec<BufferId>)> {
    let lifetimes = lifetimes(program);
    let mut by_tile: BTreeMap<u32, Vec<BufferId>> = BTreeMap::new();
    for (i, buffer) in program.buffers.iter().enumerate() {
        by_tile
            .entry(buffer.tile)
            .or_default()
            .push(BufferId(i as u32));
    }
    by_tile
        .into_iter()
        .map(|(tile, ids)| {
            let mut bounds: Vec<u32> = ids
                .iter()
                .flat_map(|id| {
                    let (first, last) = lifetimes[id.0 as usize];
                    [first, last]
                })
                .collect();
            bounds.sort_unstable();
            bounds.dedup();
            let rank = |at: u32| bounds.partition_point(|&b| b < at) as u32;
            let buffers = ids
                .iter()
                .map(|id| {
                    let buffer = program.buffer(*id);
                    let (first, last) = lifetimes[id.0 as usize];
                    BufferRequest {
                        bytes: buffer.bytes(),
                        data_bytes: buffer.data_bytes(),
                        class: buffer.class,
                        life: (rank(first), rank(last)),
                        what: describe(graph, &buffer.role),
                    }
                })
                .collect();
            (tile, (TileRequest { buffers }, ids))
        })
        .collect()
}

impl TilePlacement {
    /// This placement with local buffer `i` renamed `globals[i]`.
    pub(crate) fn globalized(&self, globals: &[BufferId]) -> TilePlacement {
        let mut buffers: Vec<(BufferId, u32)> = self
            .buffers
            .iter()
            .map(|&(local, address)| (globals[local.0 as usize], address))
            .collect();
        buffers.sort_unstable();
        TilePlacement {
            buffers,
            ..self.clone()
        }
    }
}

/// Places one tile: `support` first in region 0, then the buffers, largest
/// first (or, when that fragments, in the order they come alive), each at
/// the lowest address where it overlaps no buffer alive at the same time.
/// Interleaved buffers go in region 1; the others in region 0 after the
/// support blocks, overflowing into region 1. Buffers are numbered as in
/// `request`.
pub(crate) fn place_tile(
    target: &Target,
    tile: u32,
    request: &TileRequest,
    support: &[SupportBlock],
) -> Result<TilePlacement, PlacementError> {
    let memory = &target.memory;
    let mut tile_placement = TilePlacement::default();
    let mut cursor = memory.region0.start;
    for block in support {
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
            tile,
            &tile_placement,
            request,
            support_bytes,
            available,
        ));
    }
    // Largest first, so big buffers find room before the small ones
    // fragment the space; ties broken by number for determinism. When
    // that leaves some buffer no room although the live bytes fit, the
    // buffers go again in the order they come alive (largest first among
    // those born at one step), which packs lifetimes that follow each
    // other into the same addresses; the first order's error stands if
    // neither fits.
    let (largest, born) = (largest_first(request), in_birth_order(request));
    let regions = (region0, region1, support_bytes);
    let at = (tile, &tile_placement);
    let placed = match first_fit_in_order(target, at, request, regions, &largest) {
        Ok(placed) => placed,
        Err(error) => first_fit_in_order(target, at, request, regions, &born).map_err(|_| error)?,
    };
    for (i, address, end) in placed {
        tile_placement.buffers.push((BufferId(i as u32), address));
        if memory.region0.contains(address) {
            tile_placement.region0_end = tile_placement.region0_end.max(end);
        } else {
            tile_placement.region1_end = tile_placement.region1_end.max(end);
        }
    }
    tile_placement.region0_end = tile_placement.region0_end.max(cursor);
    tile_placement.buffers.sort_by_key(|(id, _)| *id);
    Ok(tile_placement)
}

/// `request`'s buffers, largest first, ties by number.
fn largest_first(request: &TileRequest) -> Vec<usize> {
    let mut order: Vec<usize> = (0..request.buffers.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(request.buffers[i].bytes), i));
    order
}

/// `request`'s buffers in the order they come alive, largest first among
/// those born at one step, ties by number.
fn in_birth_order(request: &TileRequest) -> Vec<usize> {
    let mut order: Vec<usize> = (0..request.buffers.len()).collect();
    order.sort_by_key(|&i| {
        let buffer = &request.buffers[i];
        (buffer.life.0, std::cmp::Reverse(buffer.bytes), i)
    });
    order
}

/// First-fit addresses for `request`'s buffers taken in `order`: each
/// buffer's number, address and end, or the shortfall of the first that
/// finds no room. Interleaved buffers go in region 1; the others in region
/// 0 after the support blocks (`support_bytes` of them, placed in
/// `support`), overflowing into region 1.
fn first_fit_in_order(
    target: &Target,
    (tile, support): (u32, &TilePlacement),
    request: &TileRequest,
    (region0, region1, support_bytes): (AddressRange, AddressRange, u64),
    order: &[usize],
) -> Result<Vec<(usize, u32, u32)>, PlacementError> {
    let memory = &target.memory;
    let all: Vec<usize> = (0..request.buffers.len()).collect();
    let mut placed: Vec<(u32, u32, Lifetime)> = Vec::new();
    let mut found = Vec::with_capacity(order.len());
    for &i in order {
        let buffer = &request.buffers[i];
        let ranges: &[AddressRange] = match buffer.class {
            MemoryClass::Interleaved => &[region1],
            MemoryClass::Standard => &[region0, region1],
        };
        let Some(address) = ranges
            .iter()
            .find_map(|range| first_fit(range, buffer.bytes, buffer.life, &placed))
        else {
            // Interleaved buffers are bounded by region 1 alone; the
            // others by the whole loadable memory.
            let (needed, available) = match buffer.class {
                MemoryClass::Interleaved => {
                    let interleaved: Vec<usize> = all
                        .iter()
                        .copied()
                        .filter(|&j| request.buffers[j].class == MemoryClass::Interleaved)
                        .collect();
                    (
                        peak_live_bytes(request, &interleaved),
                        u64::from(region1.len()),
                    )
                }
                MemoryClass::Standard => (
                    support_bytes + peak_live_bytes(request, &all),
                    u64::from(memory.loadable.len()),
                ),
            };
            // When the live bytes would fit, first-fit left the free space
            // in pieces too small for this buffer; report that honestly
            // as the bytes of the buffer that did not find a place.
            let needed = if needed > available {
                needed
            } else {
                available + u64::from(buffer.bytes)
                    - largest_free_range(ranges, buffer.life, &placed)
            };
            return Err(shortfall(tile, support, request, needed, available));
        };
        placed.push((address, buffer.bytes, buffer.life));
        found.push((i, address, address + buffer.bytes));
    }
    Ok(found)
}

pub(super) fn align(value: u32, alignment: u32) -> u32 {
    value.div_ceil(alignment) * alignment
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

/// The most bytes of the buffers `which` alive at one step: what a tile
/// needs at least.
fn peak_live_bytes(request: &TileRequest, which: &[usize]) -> u64 {
    let mut events: Vec<(u32, i64)> = Vec::new();
    for &i in which {
        let buffer = &request.buffers[i];
        let (first, last) = buffer.life;
        let bytes = i64::from(buffer.bytes);
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
    tile: u32,
    placed: &TilePlacement,
    request: &TileRequest,
    needed: u64,
    available: u64,
) -> PlacementError {
    let mut users: Vec<MemoryUser> = placed
        .support
        .iter()
        .map(|(kind, _, bytes)| MemoryUser {
            what: kind.to_string(),
            bytes: u64::from(*bytes),
            data_bytes: u64::from(*bytes),
        })
        .chain(request.buffers.iter().map(|b| MemoryUser {
            what: b.what.clone(),
            bytes: u64::from(b.bytes),
            data_bytes: u64::from(b.data_bytes),
        }))
        .collect();
    users.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.what.cmp(&b.what)));
    users.truncate(3);
    PlacementError {
        tile,
        needed,
        available,
        over: needed.saturating_sub(available),
        largest: users,
        tried: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::IPU21;

    /// Interleaved buffers (size in units of 4 KiB, lifetime ranks) whose
    /// live bytes peak at exactly 96 units, in a region 1 of 96 units.
    fn fragmenting() -> (Target, TileRequest) {
        const UNIT: u32 = 4096;
        let mut target = IPU21;
        let start = target.memory.region1.start;
        target.memory.loadable = AddressRange::new(target.memory.loadable.start, start + 96 * UNIT);
        let buffers = [
            (32, (0, 1)),
            (32, (1, 4)),
            (48, (2, 4)),
            (48, (0, 0)),
            (16, (3, 4)),
        ]
        .into_iter()
        .enumerate()
        .map(|(i, (units, life))| BufferRequest {
            bytes: units * UNIT,
            data_bytes: units * UNIT,
            class: MemoryClass::Interleaved,
            life,
            what: format!("buffer {i}"),
        })
        .collect();
        (target, TileRequest { buffers })
    }

    #[test]
    fn buffers_largest_first_fragment_then_go_in_the_order_they_come_alive() {
        let (target, request) = fragmenting();
        let all: Vec<usize> = (0..request.buffers.len()).collect();
        assert_eq!(peak_live_bytes(&request, &all), 96 * 4096);
        let region0 = target.memory.region0;
        let region1 = AddressRange::new(target.memory.region1.start, target.memory.loadable.end);
        let support = TilePlacement::default();
        // Largest first leaves no room for one of them...
        let largest = largest_first(&request);
        let regions = (region0, region1, 0);
        assert!(first_fit_in_order(&target, (0, &support), &request, regions, &largest).is_err());
        // ...so the tile is placed in the order they come alive.
        let placed = place_tile(&target, 0, &request, &[]).expect("the live bytes fit");
        for (i, &(id, address)) in placed.buffers.iter().enumerate() {
            let buffer = &request.buffers[id.0 as usize];
            assert!(address + buffer.bytes <= target.memory.loadable.end);
            for &(other_id, other) in &placed.buffers[i + 1..] {
                let other_buffer = &request.buffers[other_id.0 as usize];
                let apart =
                    address + buffer.bytes <= other || other + other_buffer.bytes <= address;
                assert!(apart || !overlaps(buffer.life, other_buffer.life));
            }
        }
    }
}
