//! Tile memory: one byte vector covering the whole memory map, with the
//! range, alignment and interleaving rules checked on every access.

use super::FaultCause;
use crate::target::Target;

/// One tile's memory.
#[derive(Clone)]
pub struct Memory {
    bytes: Vec<u8>,
    base: u32,
    end: u32,
    interleaved_start: u32,
}

impl Memory {
    pub fn new(target: &Target) -> Memory {
        let map = target.memory;
        Memory {
            bytes: vec![0; map.tile.len() as usize],
            base: map.tile.start,
            end: map.tile.end,
            interleaved_start: map.region1.start,
        }
    }

    /// The first address of tile memory.
    pub fn base(&self) -> u32 {
        self.base
    }

    /// All of tile memory; index 0 is address [`Memory::base`].
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }

    /// The bytes `[addr, addr + len)`, or why they cannot be accessed.
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
    pub fn check_interleaved(&self, addr: u32) -> Result<(), FaultCause> {
        if addr < self.interleaved_start {
            Err(FaultCause::NotInterleaved { addr })
        } else {
            Ok(())
        }
    }

    /// Reads `N` bytes at `addr`, naturally aligned (at most 8-byte
    /// alignment: 128-bit accesses need 8, see `book/src/isa.md`).
    #[inline]
    pub fn read<const N: usize>(&self, addr: u32) -> Result<[u8; N], FaultCause> {
        let at = self.span(addr, N as u32, N.min(8) as u32)?;
        let mut out = [0; N];
        out.copy_from_slice(&self.bytes[at..at + N]);
        Ok(out)
    }

    #[inline]
    pub fn write<const N: usize>(&mut self, addr: u32, value: [u8; N]) -> Result<(), FaultCause> {
        let at = self.span(addr, N as u32, N.min(8) as u32)?;
        self.bytes[at..at + N].copy_from_slice(&value);
        Ok(())
    }

    /// Reads a word for instruction fetch (no fault kind of its own: the
    /// caller has already checked region 0 and alignment).
    pub fn fetch(&self, addr: u32) -> Option<u32> {
        let at = addr.checked_sub(self.base)? as usize;
        let b = self.bytes.get(at..at + 4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}
