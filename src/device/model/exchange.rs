//! The exchange engine: an exchange program as copies between tile
//! memories, and what it costs in cycles.
//!
//! Semantics: every transfer of a phase reads its source before any
//! transfer writes, so the result never depends on transfer order; a
//! broadcast is one read and many writes. Every address is checked first,
//! and two transfers writing the same byte are a fault, so a phase either
//! happens completely or not at all.
//!
//! Cost: the model of [`crate::schedule`], so the device measures what the
//! compiler estimated. A tile sends and receives 4 bytes a cycle; each
//! transfer costs its sender one issue cycle; a copy within a tile runs at
//! the local copy rate. With paired exchange, the tiles of a pair
//! (`physical ^ 2`) share 8 bytes a cycle. The horizon is the busiest tile's
//! (or pair's) cycles.

use super::memory::TileMemories;
use super::{Fault, FaultCause};
use crate::package::ExchangeProgram;
use crate::schedule::{pair_loads, tile_loads};
use crate::target::Target;
use rayon::prelude::*;
use std::ops::Range;

/// What an exchange phase costs, without its sync.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct ExchangeCost {
    /// Cycles from the phase's start to the last delivered byte.
    pub horizon: u64,
    /// `(tile, busy cycles)` for every tile that sends or receives,
    /// ascending by tile.
    pub tiles: Vec<(u32, u64)>,
    /// `(bytes received, bytes sent)` by each tile of `tiles`, in the same
    /// order, over the exchange (a tile's copies to itself are neither; a
    /// broadcast is sent once).
    pub bytes: Vec<(u64, u64)>,
}

/// The cycles `program` takes on `target`, by the compiler's own exchange
/// cost ([`crate::schedule::TileLoad`]).
pub(super) fn exchange_cost(target: &Target, program: &ExchangeProgram) -> ExchangeCost {
    let loads = tile_loads(program.transfers.iter().map(|transfer| {
        let destinations = transfer.destinations.iter().map(|&(tile, _)| tile);
        (
            transfer.source_tile,
            u64::from(transfer.bytes),
            destinations,
        )
    }));
    let copy_rate = u64::from(target.exchange.memcpy_bytes_per_cycle);
    let tiles: Vec<(u32, u64)> = if program.paired {
        let pairs = pair_loads(&loads);
        let rate = u64::from(target.exchange.paired_bytes_per_cycle);
        loads
            .keys()
            .map(|&tile| (tile, pairs[&(tile & !2)].cycles(rate, copy_rate)))
            .collect()
    } else {
        let rate = u64::from(target.exchange.bytes_per_cycle);
        loads
            .iter()
            .map(|(&tile, load)| (tile, load.cycles(rate, copy_rate)))
            .collect()
    };
    ExchangeCost {
        horizon: tiles.iter().map(|&(_, c)| c).max().unwrap_or(0),
        tiles,
        bytes: loads.values().map(|l| (l.received, l.sent)).collect(),
    }
}

/// Performs `program`'s copies, or nothing and a fault (without its step,
/// which the caller knows).
#[cfg(test)]
pub(super) fn execute(memories: &mut TileMemories, program: &ExchangeProgram) -> Result<(), Fault> {
    let prepared = prepare(memories, program)?;
    run(memories, &prepared)
}

/// An exchange program checked against the tile memories, with its writes
/// grouped by receiving tile: what depends on the program alone, worked
/// out once and reused every time the program runs (a repeat's body runs
/// its exchanges once per iteration).
pub(super) struct Prepared {
    /// Each transfer's source: tile and byte range, in program order; the
    /// bytes are staged one after another in this order.
    sources: Vec<(u32, Range<usize>)>,
    /// Every write as (tile, byte range, offset of its bytes in the
    /// staging buffer), ascending by tile and then by address.
    writes: Vec<(u32, Range<usize>, usize)>,
    /// The receiving tiles, ascending, with the end of each one's writes.
    groups: Vec<(u32, usize)>,
    staged_bytes: usize,
}

/// Checks every address of `program` and that no two writes overlap, and
/// orders its writes; the fault is the first transfer's, in program order,
/// that names a tile not loaded or a range outside memory.
pub(super) fn prepare(
    memories: &TileMemories,
    program: &ExchangeProgram,
) -> Result<Prepared, Fault> {
    let mut sources = Vec::with_capacity(program.transfers.len());
    let mut writes = Vec::new();
    let mut staged_bytes = 0;
    for transfer in &program.transfers {
        let (tile, address, bytes) = (
            transfer.source_tile,
            transfer.source_address,
            transfer.bytes,
        );
        if memories.tile(tile).is_none() {
            return Err(Fault::new(tile, FaultCause::TileNotLoaded));
        }
        let range = memories.span(address, bytes).ok_or_else(|| {
            Fault::new(tile, FaultCause::ExchangeFromBadAddress { address, bytes })
        })?;
        let at = staged_bytes;
        staged_bytes += range.len();
        sources.push((tile, range));
        for &(tile, address) in &transfer.destinations {
            if memories.tile(tile).is_none() {
                return Err(Fault::new(tile, FaultCause::TileNotLoaded));
            }
            let range = memories.span(address, bytes).ok_or_else(|| {
                Fault::new(tile, FaultCause::ExchangeToBadAddress { address, bytes })
            })?;
            writes.push((tile, range, at));
        }
    }
    writes.sort_unstable_by_key(|(tile, range, _)| (*tile, range.start));
    for pair in writes.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if a.0 == b.0 && b.1.start < a.1.end {
            let address = memories.address(b.1.start);
            return Err(Fault::new(b.0, FaultCause::ExchangeOverlap { address }));
        }
    }
    let mut groups: Vec<(u32, usize)> = Vec::new();
    for (end, (tile, _, _)) in writes.iter().enumerate() {
        match groups.last_mut() {
            Some(last) if last.0 == *tile => last.1 = end + 1,
            _ => groups.push((*tile, end + 1)),
        }
    }
    Ok(Prepared {
        sources,
        writes,
        groups,
        staged_bytes,
    })
}

/// Runs a prepared program: all reads, then all writes.
pub(super) fn run(memories: &mut TileMemories, prepared: &Prepared) -> Result<(), Fault> {
    let mut staged = Vec::with_capacity(prepared.staged_bytes);
    for (tile, range) in &prepared.sources {
        let memory = memories
            .tile(*tile)
            .ok_or_else(|| Fault::new(*tile, FaultCause::TileNotLoaded))?;
        staged.extend_from_slice(&memory[range.clone()]);
    }
    // No two writes overlap (checked when prepared), so tiles receive in
    // parallel and the result is the same as one write after another.
    let ids: Vec<u32> = prepared.groups.iter().map(|&(tile, _)| tile).collect();
    let targets = memories
        .many_mut(&ids)
        .map_err(|tile| Fault::new(tile, FaultCause::TileNotLoaded))?;
    let starts = std::iter::once(0).chain(prepared.groups.iter().map(|&(_, end)| end));
    let groups: Vec<_> = targets
        .into_iter()
        .zip(starts.zip(&prepared.groups))
        .map(|((_, memory), (start, &(_, end)))| (memory, &prepared.writes[start..end]))
        .collect();
    groups.into_par_iter().for_each(|(memory, writes)| {
        for (_, range, at) in writes {
            memory[range.clone()].copy_from_slice(&staged[*at..*at + range.len()]);
        }
    });
    Ok(())
}
