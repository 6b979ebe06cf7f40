//! Exchange scheduling: for one exchange phase, the horizon (cycles from
//! the phase's start to its last delivered byte) with ordinary 32-bit
//! exchange and with paired 64-bit exchange, and the choice of the shorter.
//!
//! The model, from the target's rates: a tile sends and receives 4 bytes a
//! cycle; tiles whose physical ids differ in bit 1 may pair and move 8 bytes
//! a cycle between them, shared, which helps only when one tile of a pair
//! carries more than its partner. Each transfer costs its sender one cycle
//! to issue (a pair issues serially); a copy within a tile runs at the local
//! copy rate and does not use the exchange.

use crate::lower::{ExchangePhase, Program, Transfer};
use crate::target::Target;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct ExchangeSchedule {
    /// Tiles that send anything.
    pub senders: u32,
    pub ordinary_horizon: u64,
    pub paired_horizon: u64,
    pub use_paired: bool,
}

impl ExchangeSchedule {
    pub(crate) fn horizon(&self) -> u64 {
        if self.use_paired {
            self.paired_horizon
        } else {
            self.ordinary_horizon
        }
    }
}

/// One tile's (or pair's) traffic in an exchange phase. This is the one
/// home of the exchange cost: the model device times its exchange programs
/// with it too (`device::model::exchange`), so it measures what the
/// compiler estimated.
#[derive(Default, Clone, Copy, Debug)]
pub(crate) struct TileLoad {
    pub sent: u64,
    pub received: u64,
    /// Transfers sent: each costs its sender one issue cycle.
    pub issues: u64,
    /// Bytes copied within the tile.
    pub local: u64,
}

impl TileLoad {
    /// Cycles of this load when the tile moves `rate` bytes a cycle each
    /// way and copies locally at `copy_rate`.
    pub(crate) fn cycles(&self, rate: u64, copy_rate: u64) -> u64 {
        (self.sent.div_ceil(rate) + self.issues).max(self.received.div_ceil(rate))
            + self.local.div_ceil(copy_rate)
    }
}

/// Every tile's load from transfers given as `(source tile, bytes,
/// destination tiles)`. One send reaches every destination in the same
/// cycle; a destination on the source tile is a local copy.
pub(crate) fn tile_loads<D: IntoIterator<Item = u32>>(
    transfers: impl IntoIterator<Item = (u32, u64, D)>,
) -> BTreeMap<u32, TileLoad> {
    // Indexed by tile while summing (a phase has many transfers and few
    // tiles); tiles never touched stay out of the map.
    let mut loads: Vec<Option<TileLoad>> = Vec::new();
    fn load_of(loads: &mut Vec<Option<TileLoad>>, tile: u32) -> &mut TileLoad {
        let index = tile as usize;
        if loads.len() <= index {
            loads.resize(index + 1, None);
        }
        loads[index].get_or_insert_with(TileLoad::default)
    }
    for (source, bytes, destinations) in transfers {
        let mut remote = false;
        for tile in destinations {
            let load = load_of(&mut loads, tile);
            if tile == source {
                load.local += bytes;
            } else {
                load.received += bytes;
                remote = true;
            }
        }
        if remote {
            let load = load_of(&mut loads, source);
            load.sent += bytes;
            load.issues += 1;
        }
    }
    loads
        .into_iter()
        .enumerate()
        .filter_map(|(tile, load)| Some((tile as u32, load?)))
        .collect()
}

/// The loads of the pairs of tiles paired exchange joins (physical ids
/// differing in bit 1), by the pair's lower id: traffic and issues add up,
/// local copies run on each tile at once.
pub(crate) fn pair_loads(loads: &BTreeMap<u32, TileLoad>) -> BTreeMap<u32, TileLoad> {
    let mut pairs: BTreeMap<u32, TileLoad> = BTreeMap::new();
    for (&tile, load) in loads {
        let pair = pairs.entry(tile & !2).or_default();
        pair.sent += load.sent;
        pair.received += load.received;
        pair.issues += load.issues;
        pair.local = pair.local.max(load.local);
    }
    pairs
}

/// Schedules one phase of `program`.
pub(crate) fn exchange_schedule(
    target: &Target,
    program: &Program,
    phase: &ExchangePhase,
) -> ExchangeSchedule {
    transfers_schedule(target, program, &phase.transfers)
}

/// The horizon of `transfers` scheduled as a phase of their own: what one
/// part of a merged phase would take alone.
pub(crate) fn transfers_horizon(target: &Target, program: &Program, transfers: &[Transfer]) -> u64 {
    transfers_schedule(target, program, transfers).horizon()
}

fn transfers_schedule(
    target: &Target,
    program: &Program,
    transfers: &[Transfer],
) -> ExchangeSchedule {
    let loads = tile_loads(transfers.iter().map(|transfer| {
        let destinations = transfer
            .destinations
            .iter()
            .map(|&(destination, _)| program.buffer(destination).tile);
        (
            program.buffer(transfer.source).tile,
            u64::from(transfer.bytes),
            destinations,
        )
    }));
    let rate = u64::from(target.exchange.bytes_per_cycle);
    let paired_rate = u64::from(target.exchange.paired_bytes_per_cycle);
    let copy_rate = u64::from(target.exchange.memcpy_bytes_per_cycle);
    let horizon = |loads: &BTreeMap<u32, TileLoad>, rate: u64| {
        loads
            .values()
            .map(|l| l.cycles(rate, copy_rate))
            .max()
            .unwrap_or(0)
    };
    let ordinary_horizon = horizon(&loads, rate);
    let paired_horizon = horizon(&pair_loads(&loads), paired_rate);

    let senders = loads.values().filter(|l| l.issues > 0).count() as u32;
    ExchangeSchedule {
        senders,
        ordinary_horizon,
        paired_horizon,
        use_paired: paired_horizon < ordinary_horizon,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::DType;
    use crate::lower::layout::Piece;
    use crate::lower::{Buffer, BufferId, BufferRole};
    use crate::partition::MemoryClass;
    use crate::target::IPU21;

    fn program(tiles: &[u32]) -> Program {
        let buffers = tiles
            .iter()
            .map(|&tile| Buffer {
                tile,
                dtype: DType::F16,
                piece: Piece::row_major(vec![0], vec![4096]),
                coordinates: vec![4096],
                class: MemoryClass::Standard,
                role: BufferRole::Activation {
                    tensor: crate::graph::TensorId(0),
                },
            })
            .collect();
        Program {
            buffers,
            ..Program::default()
        }
    }

    fn transfer(source: u32, bytes: u32, destinations: &[u32]) -> Transfer {
        Transfer {
            source: BufferId(source),
            source_offset: 0,
            bytes,
            destinations: destinations.iter().map(|&d| (BufferId(d), 0)).collect(),
        }
    }

    #[test]
    fn balanced_phases_prefer_ordinary_exchange() {
        // Tiles 0..4 each send 1 KiB to the next tile.
        let program = program(&[0, 1, 2, 3]);
        let phase = ExchangePhase {
            purpose: "test".into(),
            merged: Vec::new(),
            transfers: (0..4).map(|t| transfer(t, 1024, &[(t + 1) % 4])).collect(),
        };
        let schedule = exchange_schedule(&IPU21, &program, &phase);
        assert_eq!(schedule.ordinary_horizon, 256 + 1);
        assert_eq!(schedule.paired_horizon, 256 + 2);
        assert!(!schedule.use_paired);
    }

    #[test]
    fn a_lopsided_pair_shares_its_partners_bandwidth() {
        // Tile 0 sends 4 KiB to tile 1; its partner, tile 2, is idle.
        let program = program(&[0, 1, 2, 5]);
        let phase = ExchangePhase {
            purpose: "test".into(),
            merged: Vec::new(),
            transfers: vec![transfer(0, 4096, &[3])],
        };
        let schedule = exchange_schedule(&IPU21, &program, &phase);
        assert_eq!(schedule.ordinary_horizon, 1024 + 1);
        assert_eq!(schedule.paired_horizon, 512 + 1);
        assert!(schedule.use_paired);
    }

    #[test]
    fn broadcasts_cost_the_sender_once_and_local_copies_use_memcpy() {
        let program = program(&[0, 1, 2, 3]);
        let phase = ExchangePhase {
            purpose: "test".into(),
            merged: Vec::new(),
            transfers: vec![transfer(0, 400, &[1, 2, 3]), transfer(1, 800, &[1])],
        };
        let schedule = exchange_schedule(&IPU21, &program, &phase);
        // Tile 1 receives 400 bytes (100 cycles) and copies 800 locally (100).
        assert_eq!(schedule.ordinary_horizon, 200);
        assert_eq!(schedule.senders, 1);
    }
}
