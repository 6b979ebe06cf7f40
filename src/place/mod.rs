//! Placement: an address for every buffer and support block on every tile.
//!
//! Code and the supervisor's support data (exchange tables, kernel states,
//! profile buffer) go first in region 0, the only region code may run
//! from. Interleaved buffers go in region 1. Other buffers go in region 0
//! after the code and overflow into region 1. Buffers whose lifetimes do
//! not overlap share addresses; padded buffers and weights never share,
//! since their contents must survive from load time.
//!
//! Each tile is placed on its own from a request in tile-local terms
//! (`tile.rs`), so the pipeline can place tiles as separate queries;
//! `lifetimes.rs` derives when each buffer is alive.

use crate::graph::Graph;
use crate::lower::{BufferId, BufferRole, Program};
use crate::partition::MemoryClass;
use crate::target::Target;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

mod lifetimes;
pub(crate) mod pressure;
mod tile;

pub(crate) use lifetimes::lifetimes;
use lifetimes::{overlaps, Lifetime};
pub(crate) use tile::{place_tile, tile_requests, TileRequest};

/// Alignment of every buffer: the widest load, 128 bits.
pub(crate) const BUFFER_ALIGN: u32 = 16;

/// A block of per-tile runtime data the emitter needs, sized before placement.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct SupportBlock {
    pub kind: SupportKind,
    pub bytes: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub(crate) enum SupportKind {
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
pub(crate) struct TilePlacement {
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
    pub(crate) fn address(&self, tile: u32, buffer: BufferId) -> Option<u32> {
        self.tiles
            .get(&tile)?
            .buffers
            .iter()
            .find(|(id, _)| *id == buffer)
            .map(|&(_, address)| address)
    }

    /// Stable text dump (used by tests and `--emit placement`).
    pub(crate) fn dump(&self, program: &Program) -> String {
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

/// One of the largest users of a tile that does not fit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryUser {
    /// What it is: a buffer as [`describe`] names it, or a support block
    /// (`code`, `exchange tables`, ...).
    pub what: String,
    /// The bytes it takes on the tile.
    pub bytes: u64,
    /// The bytes of its values: fewer than `bytes` where its layout pads
    /// (a GEMM operand's K and channels to whole AMP blocks, rows to whole
    /// vectors).
    pub data_bytes: u64,
}

impl std::fmt::Display for MemoryUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.data_bytes < self.bytes {
            true => write!(
                f,
                "{} ({} bytes, of which {} are its values and the rest its layout's padding)",
                self.what, self.bytes, self.data_bytes
            ),
            false => write!(f, "{} ({} bytes)", self.what, self.bytes),
        }
    }
}

/// Why a tile's data does not fit.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[error("{}", self.render())]
pub struct PlacementError {
    pub tile: u32,
    pub needed: u64,
    pub available: u64,
    pub over: u64,
    pub largest: Vec<MemoryUser>,
    /// What the compiler tried before giving up: the operations it
    /// re-planned to spread further, one line per round.
    pub tried: Vec<String>,
}

impl PlacementError {
    fn render(&self) -> String {
        let largest: Vec<String> = self.largest.iter().map(MemoryUser::to_string).collect();
        let mut text = format!(
            "tile {} needs {} bytes but only {} are available ({} bytes over); largest users: {}",
            self.tile,
            self.needed,
            self.available,
            self.over,
            largest.join(", ")
        );
        if !self.tried.is_empty() {
            text.push_str("; already tried: ");
            text.push_str(&self.tried.join("; "));
        }
        text.push_str("; try more tiles (`tiles` in [project])");
        text
    }
}

#[cfg(test)]
/// Places every tile of `program`; `support(tile)` gives the support blocks
/// each tile needs, which go first in region 0. Each tile is placed on its
/// own ([`place_tile`]) from its [`TileRequest`].
pub(crate) fn placement(
    target: &Target,
    graph: &Graph,
    program: &Program,
    support: &dyn Fn(u32) -> Vec<SupportBlock>,
) -> Result<Placement, PlacementError> {
    let mut placement = Placement::default();
    for (tile, (request, globals)) in tile_requests(graph, program) {
        let local = place_tile(target, tile, &request, &support(tile))?;
        placement.tiles.insert(tile, local.globalized(&globals));
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

pub(crate) fn describe(graph: &Graph, role: &BufferRole) -> String {
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
        BufferRole::Partial { op, slice } => {
            format!("partials of `{}` over K slice {slice}", graph.op(*op).name)
        }
        BufferRole::Intermediate { op } => {
            format!("intermediate of fused `{}`", graph.op(*op).name)
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
                epilogue: Vec::new(),
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
    fn largest_users_say_how_many_of_their_bytes_are_padding() {
        // A width that is not a multiple of 16: the GEMM pads its weight's
        // K and channels, its input's K and its result's channels to
        // multiples of 16.
        let b = chain(1, 256, 1000);
        let program = lowered(&b.graph);
        let error = placement(&IPU21, &b.graph, &program, &code).unwrap_err();
        expect!["tile 0 needs 3064320 bytes but only 424880 are available (2639440 bytes over); largest users: weight `w` (2032128 bytes, of which 2000000 are its values and the rest its layout's padding), activation `matmul0` (516096 bytes, of which 512000 are its values and the rest its layout's padding), input `x` (516096 bytes, of which 512000 are its values and the rest its layout's padding); try more tiles (`tiles` in [project])"].assert_eq(&error.to_string());
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
