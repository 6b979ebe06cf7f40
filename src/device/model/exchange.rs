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
pub(super) fn execute(memories: &mut TileMemories, program: &ExchangeProgram) -> Result<(), Fault> {
    // Check every address before touching memory.
    let mut sources = Vec::with_capacity(program.transfers.len());
    let mut writes = Vec::new();
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
        sources.push(range);
        for &(tile, address) in &transfer.destinations {
            if memories.tile(tile).is_none() {
                return Err(Fault::new(tile, FaultCause::TileNotLoaded));
            }
            let range = memories.span(address, bytes).ok_or_else(|| {
                Fault::new(tile, FaultCause::ExchangeToBadAddress { address, bytes })
            })?;
            writes.push((tile, range, address));
        }
    }
    let mut order: Vec<usize> = (0..writes.len()).collect();
    order.sort_unstable_by_key(|&i| (writes[i].0, writes[i].1.start));
    for pair in order.windows(2) {
        let (a, b) = (&writes[pair[0]], &writes[pair[1]]);
        if a.0 == b.0 && b.1.start < a.1.end {
            return Err(Fault::new(
                b.0,
                FaultCause::ExchangeOverlap { address: b.2 },
            ));
        }
    }

    // All reads, then all writes.
    let total: usize = sources.iter().map(|r| r.len()).sum();
    let mut staged = Vec::with_capacity(total);
    let mut staged_at = Vec::with_capacity(program.transfers.len());
    for (transfer, range) in program.transfers.iter().zip(&sources) {
        let memory = memories
            .tile(transfer.source_tile)
            .ok_or_else(|| Fault::new(transfer.source_tile, FaultCause::TileNotLoaded))?;
        staged_at.push(staged.len());
        staged.extend_from_slice(&memory[range.clone()]);
    }
    // Which staged bytes each write takes, in `writes`' order.
    let data: Vec<usize> = program
        .transfers
        .iter()
        .zip(&staged_at)
        .flat_map(|(transfer, &at)| transfer.destinations.iter().map(move |_| at))
        .collect();
    // The writes, grouped by receiving tile (`order` sorts them so): no two
    // overlap (checked above), so tiles receive in parallel and the result
    // is the same as one write after another.
    let mut ids: Vec<u32> = order.iter().map(|&i| writes[i].0).collect();
    ids.dedup();
    let targets = memories
        .many_mut(&ids)
        .map_err(|tile| Fault::new(tile, FaultCause::TileNotLoaded))?;
    let mut groups = Vec::with_capacity(ids.len());
    let mut rest = order.as_slice();
    for (tile, memory) in targets {
        let count = rest.iter().take_while(|&&i| writes[i].0 == tile).count();
        let (group, tail) = rest.split_at(count);
        groups.push((memory, group));
        rest = tail;
    }
    groups.into_par_iter().for_each(|(memory, group)| {
        for &i in group {
            let range = writes[i].1.clone();
            let at = data[i];
            memory[range.clone()].copy_from_slice(&staged[at..at + range.len()]);
        }
    });
    Ok(())
}
