//! Tile memories, held sparsely: only tiles the package uses get a buffer
//! (624 KiB each on ipu21), so a 64-tile program needs 40 MB, not 900.

use super::{Fault, FaultCause};
use crate::package::Segment;
use crate::target::Target;
use std::ops::Range;

/// Every used tile's memory, indexed by tile id.
pub(crate) struct TileMemories {
    /// Address of `memory[0]` in every tile.
    base: u32,
    size: u32,
    slots: Vec<Option<Box<[u8]>>>,
}

impl TileMemories {
    /// Zeroed memories for `tiles` (ids must be below the target's count;
    /// others are ignored, since validation has already refused them).
    pub(super) fn new(target: &Target, tiles: impl IntoIterator<Item = u32>) -> TileMemories {
        let size = target.tile_memory_bytes();
        let mut slots: Vec<Option<Box<[u8]>>> = (0..target.tiles).map(|_| None).collect();
        for tile in tiles {
            if let Some(slot) = slots.get_mut(tile as usize) {
                *slot = Some(vec![0u8; size as usize].into_boxed_slice());
            }
        }
        TileMemories {
            base: target.memory.tile.start,
            size,
            slots,
        }
    }

    /// The memory of `tile`, when it has one.
    pub(crate) fn tile(&self, tile: u32) -> Option<&[u8]> {
        self.slots.get(tile as usize)?.as_deref()
    }

    /// Offsets of `[address, address + bytes)` in a tile's memory, when the
    /// range lies inside it.
    pub(super) fn span(&self, address: u32, bytes: u32) -> Option<Range<usize>> {
        let start = address.checked_sub(self.base)?;
        let end = start.checked_add(bytes)?;
        (end <= self.size).then_some(start as usize..end as usize)
    }

    /// The tile address of byte `offset` of a tile's memory (an offset
    /// [`TileMemories::span`] gave).
    pub(super) fn address(&self, offset: usize) -> u32 {
        self.base + offset as u32
    }

    /// Writes a segment: its data, then zeros up to its memory size.
    pub(super) fn load_segment(&mut self, tile: u32, segment: &Segment) -> Result<(), Fault> {
        let range = self.checked(tile, segment.address, segment.memory_size)?;
        let memory = self.tile_mut(tile)?;
        let (data, zeros) = memory[range].split_at_mut(segment.data.len());
        data.copy_from_slice(&segment.data);
        zeros.fill(0);
        Ok(())
    }

    pub(crate) fn read(&self, tile: u32, address: u32, bytes: u32) -> Result<&[u8], Fault> {
        let range = self.checked(tile, address, bytes)?;
        let memory = self
            .tile(tile)
            .ok_or_else(|| Fault::new(tile, FaultCause::TileNotLoaded))?;
        Ok(&memory[range])
    }

    pub(crate) fn write(&mut self, tile: u32, address: u32, bytes: &[u8]) -> Result<(), Fault> {
        let range = self.checked(tile, address, bytes.len() as u32)?;
        self.tile_mut(tile)?[range].copy_from_slice(bytes);
        Ok(())
    }

    fn checked(&self, tile: u32, address: u32, bytes: u32) -> Result<Range<usize>, Fault> {
        self.span(address, bytes)
            .ok_or_else(|| Fault::new(tile, FaultCause::OutOfRange { address, bytes }))
    }

    fn tile_mut(&mut self, tile: u32) -> Result<&mut [u8], Fault> {
        self.slots
            .get_mut(tile as usize)
            .and_then(|slot| slot.as_deref_mut())
            .ok_or_else(|| Fault::new(tile, FaultCause::TileNotLoaded))
    }

    /// Mutable memories of `tiles` (ascending, distinct), each with its
    /// tile id, for running tiles in parallel. A tile without memory is an
    /// error naming it.
    pub(super) fn many_mut(&mut self, tiles: &[u32]) -> Result<Vec<(u32, &mut [u8])>, u32> {
        let mut out = Vec::with_capacity(tiles.len());
        let mut wanted = tiles.iter().copied().peekable();
        for (id, slot) in self.slots.iter_mut().enumerate() {
            let Some(&next) = wanted.peek() else { break };
            if next as usize != id {
                continue;
            }
            wanted.next();
            match slot.as_deref_mut() {
                Some(memory) => out.push((next, memory)),
                None => return Err(next),
            }
        }
        match wanted.next() {
            Some(missing) => Err(missing),
            None => Ok(out),
        }
    }
}
