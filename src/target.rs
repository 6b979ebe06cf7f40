//! The `ipu21` target as data.
//!
//! Every fact the cost model, the placer and the simulator need about the
//! machine lives here, once. The numbers and their sources are in
//! `../shared/design/target-ipu21.md`; where a value is derived it says so.

use serde::{Deserialize, Serialize};

/// A half-open byte range `[start, end)` of tile memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AddressRange {
    pub start: u32,
    pub end: u32,
}

impl AddressRange {
    pub(crate) const fn new(start: u32, end: u32) -> Self {
        Self { start, end }
    }

    pub(crate) const fn len(&self) -> u32 {
        self.end - self.start
    }

    pub(crate) const fn contains(&self, addr: u32) -> bool {
        addr >= self.start && addr < self.end
    }

    /// True when `[addr, addr + len)` lies entirely inside the range.
    pub(crate) const fn contains_span(&self, addr: u32, len: u32) -> bool {
        addr >= self.start && (addr as u64 + len as u64) <= self.end as u64
    }
}

/// Tile memory map of one tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryMap {
    /// All of tile memory.
    pub tile: AddressRange,
    /// Region 0: non-interleaved, the only region code may execute from.
    pub region0: AddressRange,
    /// Region 1: interleaved (factor 2); 128-bit loads only here.
    pub region1: AddressRange,
    /// The part the loader can write (the last bytes of memory are reserved).
    pub loadable: AddressRange,
    /// Memory element size; instruction fetch and data access contend per element.
    pub element_bytes: u32,
    /// Address width in bits.
    pub address_bits: u32,
}

impl MemoryMap {
    /// Bytes of region 1 the loader can write: what a tile's interleaved
    /// buffers must fit in.
    pub(crate) const fn region1_loadable_bytes(&self) -> u64 {
        (self.loadable.end - self.region1.start) as u64
    }
}

/// Multiply-accumulates per tile per cycle for each AMP input format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Throughput {
    pub amp_f16_macs_per_cycle: u32,
    pub amp_f8_macs_per_cycle: u32,
    pub amp_f32_macs_per_cycle: u32,
    pub vector_f16_lanes: u32,
    pub vector_f32_lanes: u32,
}

/// Exchange, sync and launch costs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExchangeCosts {
    /// Bytes per cycle one tile sends or receives over ordinary exchange.
    pub bytes_per_cycle: u32,
    /// Bytes per cycle a pair of tiles (`physical ^ 2`) moves with paired 64-bit exchange.
    pub paired_bytes_per_cycle: u32,
    /// Cycles of one global (chip-wide) sync.
    pub global_sync_cycles: u32,
    /// Cycles of an on-tile-group local sync.
    pub local_sync_cycles: u32,
    /// Local memory copy bandwidth, bytes per cycle.
    pub memcpy_bytes_per_cycle: u32,
    /// Ordinary load bandwidth, bytes per cycle.
    pub load_bytes_per_cycle: u32,
    /// Interleaved-memory load bandwidth, bytes per cycle.
    pub interleaved_load_bytes_per_cycle: u32,
    /// Supervisor cycles to launch one worker.
    pub worker_launch_cycles: u32,
    /// Cycles of a six-worker call with rendezvous.
    pub six_worker_call_cycles: u32,
}

/// A complete target description.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    pub name: &'static str,
    pub tiles: u32,
    pub clock_hz: u64,
    pub worker_contexts: u32,
    /// Cycles between two issues of one context (the barrel rule).
    pub barrel_slots: u32,
    pub memory: MemoryMap,
    pub throughput: Throughput,
    pub exchange: ExchangeCosts,
    /// Host link bandwidth in bytes per second (PCIe Gen4 x16).
    pub host_link_bytes_per_second: u64,
    /// Largest `rpt` count.
    pub max_repeat_count: u32,
}

/// The IPU21 (Mk2 with FP8, as in the C600 card).
pub const IPU21: Target = Target {
    name: "ipu21",
    tiles: 1472,
    clock_hz: 1_500_000_000,
    worker_contexts: 6,
    barrel_slots: 6,
    memory: MemoryMap {
        tile: AddressRange::new(0x4C000, 0xE8000),
        region0: AddressRange::new(0x4C000, 0x80000),
        region1: AddressRange::new(0x80000, 0xE8000),
        loadable: AddressRange::new(0x4C000, 0xE7BB0),
        element_bytes: 0x4000,
        address_bits: 21,
    },
    throughput: Throughput {
        amp_f16_macs_per_cycle: 64,
        amp_f8_macs_per_cycle: 128,
        amp_f32_macs_per_cycle: 16,
        vector_f16_lanes: 4,
        vector_f32_lanes: 2,
    },
    exchange: ExchangeCosts {
        bytes_per_cycle: 4,
        paired_bytes_per_cycle: 8,
        global_sync_cycles: 600,
        local_sync_cycles: 120,
        memcpy_bytes_per_cycle: 8,
        load_bytes_per_cycle: 8,
        interleaved_load_bytes_per_cycle: 16,
        worker_launch_cycles: 11,
        six_worker_call_cycles: 288,
    },
    host_link_bytes_per_second: 64_000_000_000,
    max_repeat_count: 0xFFFF,
};

/// Which machine a project builds for: resolved once from the project's
/// `target = "..."` by validation and carried by the graph, the
/// signatures, placement requests and kernel variants, so no phase assumes
/// a machine. It serialises as the name a project gives.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub enum TargetId {
    #[default]
    #[serde(rename = "ipu21")]
    Ipu21,
}

impl TargetId {
    /// Every target this ipub knows, for messages that list them.
    pub(crate) const ALL: [TargetId; 1] = [TargetId::Ipu21];

    /// The target a project names, if this ipub knows it.
    pub(crate) fn from_name(name: &str) -> Option<TargetId> {
        TargetId::ALL.into_iter().find(|id| id.name() == name)
    }

    /// The machine's facts.
    pub(crate) fn spec(self) -> &'static Target {
        match self {
            TargetId::Ipu21 => &IPU21,
        }
    }

    /// The name a project uses for it.
    pub(crate) fn name(self) -> &'static str {
        self.spec().name
    }
}

impl std::fmt::Display for TargetId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Looks a target up by the name a project or package gives.
pub(crate) fn target_by_name(name: &str) -> Option<&'static Target> {
    TargetId::from_name(name).map(TargetId::spec)
}

impl Target {
    /// Bytes of memory per tile.
    pub(crate) const fn tile_memory_bytes(&self) -> u32 {
        self.memory.tile.len()
    }

    #[cfg(test)]
    /// The tile whose physical id differs in bit 1: the partner for paired exchange.
    pub(crate) const fn paired_tile(&self, physical: u32) -> u32 {
        physical ^ 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_map_matches_the_published_facts() {
        let m = IPU21.memory;
        assert_eq!(m.tile.len(), 624 * 1024);
        assert_eq!(m.region0.end, m.region1.start);
        assert_eq!(m.tile.end - m.loadable.end, 0x450);
        assert_eq!(m.loadable.end, 949_168);
        assert!(m.tile.end <= 1 << m.address_bits);
        assert_eq!(m.region0.len() % m.element_bytes, 0);
    }

    #[test]
    fn paired_tiles_differ_in_bit_one() {
        assert_eq!(IPU21.paired_tile(0), 2);
        assert_eq!(IPU21.paired_tile(7), 5);
    }
}
