//! Tile memory: one byte buffer covering the whole memory map, with the
//! range, alignment and interleaving rules checked on every access.
//!
//! The buffer is either owned (a test harness's tile) or borrowed (the
//! device's own tile memory, which the executor then runs over in place:
//! copying 624 KiB in and out for every tile of every compute step cost
//! more than the steps of most tiles).

use super::FaultCause;
use crate::target::Target;

/// One tile's memory over the bytes `B`: a `Vec<u8>` it owns or a
/// `&mut [u8]` it borrows.
#[derive(Clone)]
pub(crate) struct Memory<B = Vec<u8>> {
    bytes: B,
    base: u32,
    end: u32,
    interleaved_start: u32,
}

/// Memory borrowed for the execute loop.
pub(super) type MemoryView<'a> = Memory<&'a mut [u8]>;

impl Memory {}

impl<B: AsRef<[u8]> + AsMut<[u8]>> Memory<B> {
    /// Memory over `bytes`, whose index 0 is the target's memory base.
    /// `bytes` covers the whole tile (the device's and the owned buffer
    /// both do), so the map's end bounds every access.
    pub(super) fn over(target: &Target, bytes: B) -> Memory<B> {
        let map = target.memory;
        let end = map
            .tile
            .start
            .saturating_add(bytes.as_ref().len() as u32)
            .min(map.tile.end);
        Memory {
            bytes,
            base: map.tile.start,
            end,
            interleaved_start: map.region1.start,
        }
    }

    /// The same memory, borrowed.
    pub(super) fn view(&mut self) -> MemoryView<'_> {
        Memory {
            bytes: self.bytes.as_mut(),
            base: self.base,
            end: self.end,
            interleaved_start: self.interleaved_start,
        }
    }

    /// The first address of tile memory.
    pub(super) fn base(&self) -> u32 {
        self.base
    }

    /// All of tile memory; index 0 is address [`Memory::base`].
    pub(crate) fn bytes(&self) -> &[u8] {
        self.bytes.as_ref()
    }

    pub(super) fn bytes_mut(&mut self) -> &mut [u8] {
        self.bytes.as_mut()
    }

    /// The offset of `[addr, addr + len)`, or why it cannot be accessed.
    #[inline]
    fn span(&self, addr: u32, len: u32, align: u32) -> Result<usize, FaultCause> {
        if addr < self.base || u64::from(addr) + u64::from(len) > u64::from(self.end) {
            return Err(FaultCause::OutOfRange { addr, len });
        }
        if !addr.is_multiple_of(align) {
            return Err(FaultCause::Misaligned { addr, align });
        }
        Ok((addr - self.base) as usize)
    }

    /// Checks that a 128-bit or dual access lies in interleaved memory.
    #[inline]
    pub(super) fn check_interleaved(&self, addr: u32) -> Result<(), FaultCause> {
        if addr < self.interleaved_start {
            Err(FaultCause::NotInterleaved { addr })
        } else {
            Ok(())
        }
    }

    /// Reads `N` bytes at `addr`, naturally aligned (at most 8-byte
    /// alignment: 128-bit accesses need 8, see `book/src/isa.md`).
    #[inline]
    pub(crate) fn read<const N: usize>(&self, addr: u32) -> Result<[u8; N], FaultCause> {
        let at = self.span(addr, N as u32, N.min(8) as u32)?;
        let mut out = [0; N];
        out.copy_from_slice(&self.bytes.as_ref()[at..at + N]);
        Ok(out)
    }

    #[inline]
    pub(crate) fn write<const N: usize>(
        &mut self,
        addr: u32,
        value: [u8; N],
    ) -> Result<(), FaultCause> {
        let at = self.span(addr, N as u32, N.min(8) as u32)?;
        self.bytes.as_mut()[at..at + N].copy_from_slice(&value);
        Ok(())
    }

    /// Reads a word for instruction fetch (no fault kind of its own: the
    /// caller has already checked region 0 and alignment).
    pub(crate) fn fetch(&self, addr: u32) -> Option<u32> {
        let at = addr.checked_sub(self.base)? as usize;
        let b = self.bytes.as_ref().get(at..at + 4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}
