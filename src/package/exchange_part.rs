//! The `exchange` part in binary: exchange programs hold many small
//! transfers (hundreds of thousands for a ViT encoder), which JSON made the
//! largest and slowest part of a package. Nearly every transfer reaches the
//! same tiles as the one before it, at addresses moved by one common
//! shift, so a transfer is written as what differs from its predecessor, in
//! variable-length integers. The layout is in `book/src/package-format.md`;
//! every count is checked against the bytes left, so a damaged part is an
//! error, never a huge allocation.
//!
//! The "same destinations as before" encoding lets a few bytes stand for a
//! long list, so decoding is also bounded by what the target can hold
//! ([`DecodeLimits`]): tiles must exist, no tile may receive more bytes in
//! one program than its memory, and the transfers and destinations of the
//! whole part are counted before they are materialised.

use super::{ExchangeProgram, PackageError, Transfer};
use crate::target::Target;

/// What decoding the part may produce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct DecodeLimits {
    /// Tiles of the target: every tile named must be below this.
    pub tiles: u32,
    /// Bytes one tile can receive in one exchange program: its memory
    /// (writes of one program never overlap).
    pub tile_bytes: u64,
    /// Transfers in all programs together.
    pub transfers: usize,
    /// Destinations in all programs together.
    pub destinations: usize,
}

impl DecodeLimits {
    /// The limits for a package of `target`.
    pub(super) fn of(target: &Target) -> DecodeLimits {
        DecodeLimits {
            tiles: target.tiles,
            tile_bytes: u64::from(target.memory.tile.len()),
            transfers: super::limits::MAX_TRANSFERS,
            destinations: super::limits::MAX_DESTINATIONS,
        }
    }
}

/// Tag bit: the transfer's destinations are the previous transfer's tiles,
/// in the same order, every address moved by one shift (written instead of
/// the list).
const SHIFTED_DESTINATIONS: u8 = 1;
/// Tag bit: the source tile is the previous transfer's (not written).
const SAME_SOURCE_TILE: u8 = 2;
/// Tag bit: the byte count is the previous transfer's (not written).
const SAME_BYTES: u8 = 4;
const KNOWN_TAGS: u8 = SHIFTED_DESTINATIONS | SAME_SOURCE_TILE | SAME_BYTES;

/// Encodes exchange programs.
pub(crate) fn encode(programs: &[ExchangeProgram]) -> Vec<u8> {
    let transfers: usize = programs.iter().map(|p| p.transfers.len()).sum();
    let mut out = Vec::with_capacity(16 + transfers * 6);
    out.extend_from_slice(&(programs.len() as u32).to_le_bytes());
    for program in programs {
        out.extend_from_slice(&(program.label.len() as u32).to_le_bytes());
        out.extend_from_slice(program.label.as_bytes());
        out.push(u8::from(program.paired));
        out.extend_from_slice(&program.horizon_cycles.to_le_bytes());
        out.extend_from_slice(&(program.transfers.len() as u32).to_le_bytes());
        let mut previous: Option<&Transfer> = None;
        for t in &program.transfers {
            encode_transfer(&mut out, previous, t);
            previous = Some(t);
        }
    }
    out
}

fn encode_transfer(out: &mut Vec<u8>, previous: Option<&Transfer>, t: &Transfer) {
    let shift = previous.and_then(|p| common_shift(p, t));
    let mut tag = 0;
    if shift.is_some() {
        tag |= SHIFTED_DESTINATIONS;
    }
    if previous.is_some_and(|p| p.source_tile == t.source_tile) {
        tag |= SAME_SOURCE_TILE;
    }
    if previous.is_some_and(|p| p.bytes == t.bytes) {
        tag |= SAME_BYTES;
    }
    out.push(tag);
    if tag & SAME_SOURCE_TILE == 0 {
        varint(out, u64::from(t.source_tile));
    }
    let base = previous.map_or(0, |p| p.source_address);
    varint(out, zigzag(i64::from(t.source_address) - i64::from(base)));
    if tag & SAME_BYTES == 0 {
        varint(out, u64::from(t.bytes));
    }
    match shift {
        Some(shift) => varint(out, zigzag(shift)),
        None => {
            varint(out, t.destinations.len() as u64);
            for &(tile, address) in &t.destinations {
                varint(out, u64::from(tile));
                varint(out, u64::from(address));
            }
        }
    }
}

/// The one shift that moves every destination address of `previous` to the
/// corresponding one of `t`, when both reach the same tiles in order.
fn common_shift(previous: &Transfer, t: &Transfer) -> Option<i64> {
    if previous.destinations.len() != t.destinations.len() {
        return None;
    }
    let mut shift = None;
    for (&(pt, pa), &(tile, address)) in previous.destinations.iter().zip(&t.destinations) {
        let this = i64::from(address) - i64::from(pa);
        if pt != tile || shift.is_some_and(|s| s != this) {
            return None;
        }
        shift = Some(this);
    }
    shift
}

fn zigzag(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

fn unzigzag(value: u64) -> i64 {
    ((value >> 1) as i64) ^ -((value & 1) as i64)
}

/// LEB128: seven bits per byte, low first, high bit set on all but the last.
fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Decodes what [`encode`] wrote; any truncation, bad flag, bad tag, bad
/// label, out-of-range value, trailing byte or anything past `limits` is an
/// error naming the part.
pub(super) fn decode(
    bytes: &[u8],
    limits: &DecodeLimits,
) -> Result<Vec<ExchangeProgram>, PackageError> {
    let mut reader = Reader { bytes, at: 0 };
    let count = reader.count(4 + 1 + 8 + 4)?;
    let mut programs = Vec::with_capacity(count);
    let mut budget = Budget {
        limits,
        transfers: 0,
        destinations: 0,
        received: vec![0; limits.tiles.min(1 << 16) as usize],
        touched: Vec::new(),
        program: 0,
    };
    for index in 0..count {
        budget.start_program(index);
        let length = reader.count(1)?;
        let label = std::str::from_utf8(reader.take(length)?)
            .map_err(|_| invalid("a label is not UTF-8"))?
            .to_string();
        let paired = match reader.take(1)?[0] {
            0 => false,
            1 => true,
            other => return Err(invalid(format!("paired flag {other} is not 0 or 1"))),
        };
        let horizon_cycles = reader.u64()?;
        // A transfer takes at least a tag and a source address.
        let transfers = reader.count(2)?;
        budget.transfers(transfers)?;
        let mut list: Vec<Transfer> = Vec::with_capacity(transfers);
        for _ in 0..transfers {
            let transfer = decode_transfer(&mut reader, list.last(), &mut budget)?;
            list.push(transfer);
        }
        programs.push(ExchangeProgram {
            label,
            transfers: list,
            paired,
            horizon_cycles,
        });
    }
    if reader.at != bytes.len() {
        return Err(invalid(format!(
            "{} bytes follow the last program",
            bytes.len() - reader.at
        )));
    }
    Ok(programs)
}

/// What the part decoded so far adds up to, against its limits.
struct Budget<'a> {
    limits: &'a DecodeLimits,
    transfers: usize,
    destinations: usize,
    /// Bytes each tile receives in the current program, and which tiles
    /// received any (so only those are cleared for the next program).
    received: Vec<u64>,
    touched: Vec<u32>,
    program: usize,
}

impl Budget<'_> {
    fn start_program(&mut self, index: usize) {
        for tile in self.touched.drain(..) {
            self.received[tile as usize] = 0;
        }
        self.program = index;
    }

    fn transfers(&mut self, count: usize) -> Result<(), PackageError> {
        self.transfers = self.transfers.saturating_add(count);
        if self.transfers > self.limits.transfers {
            return Err(invalid(format!(
                "more than {} transfers in all",
                self.limits.transfers
            )));
        }
        Ok(())
    }

    fn tile(&self, tile: u32) -> Result<(), PackageError> {
        if tile >= self.limits.tiles || tile as usize >= self.received.len() {
            return Err(invalid(format!(
                "exchange program {} names tile {tile}, beyond the target's {}",
                self.program, self.limits.tiles
            )));
        }
        Ok(())
    }

    /// Counts `count` destinations before they are materialised.
    fn destinations(&mut self, count: usize) -> Result<(), PackageError> {
        self.destinations = self.destinations.saturating_add(count);
        if self.destinations > self.limits.destinations {
            return Err(invalid(format!(
                "more than {} transfer destinations in all",
                self.limits.destinations
            )));
        }
        Ok(())
    }

    /// `tile` receives `bytes` more in the current program.
    fn receive(&mut self, tile: u32, bytes: u32) -> Result<(), PackageError> {
        self.tile(tile)?;
        let slot = &mut self.received[tile as usize];
        if *slot == 0 {
            self.touched.push(tile);
        }
        *slot += u64::from(bytes);
        if *slot > self.limits.tile_bytes {
            return Err(invalid(format!(
                "exchange program {} sends tile {tile} more than its {} bytes of memory",
                self.program, self.limits.tile_bytes
            )));
        }
        Ok(())
    }
}

fn decode_transfer(
    reader: &mut Reader<'_>,
    previous: Option<&Transfer>,
    budget: &mut Budget<'_>,
) -> Result<Transfer, PackageError> {
    let at = reader.at;
    let tag = reader.take(1)?[0];
    if tag & !KNOWN_TAGS != 0 {
        return Err(invalid(format!(
            "unknown transfer tag {tag:#04x} at byte {at}"
        )));
    }
    let previous = match previous {
        Some(previous) => Some(previous),
        None if tag != 0 => {
            return Err(invalid(format!(
                "the first transfer of a program at byte {at} refers to a previous one"
            )))
        }
        None => None,
    };
    let source_tile = match previous {
        Some(p) if tag & SAME_SOURCE_TILE != 0 => p.source_tile,
        _ => reader.u32_varint()?,
    };
    budget.tile(source_tile)?;
    let base = previous.map_or(0, |p| p.source_address);
    let source_address = shifted(base, unzigzag(reader.varint()?))?;
    let bytes = match previous {
        Some(p) if tag & SAME_BYTES != 0 => p.bytes,
        _ => reader.u32_varint()?,
    };
    let destinations = match previous {
        Some(p) if tag & SHIFTED_DESTINATIONS != 0 => {
            let shift = unzigzag(reader.varint()?);
            budget.destinations(p.destinations.len())?;
            p.destinations
                .iter()
                .map(|&(tile, address)| {
                    budget.receive(tile, bytes)?;
                    Ok((tile, shifted(address, shift)?))
                })
                .collect::<Result<Vec<_>, PackageError>>()?
        }
        _ => {
            // A destination takes at least two bytes.
            let count = reader.varint_count(2)?;
            budget.destinations(count)?;
            let mut to = Vec::with_capacity(count);
            for _ in 0..count {
                let tile = reader.u32_varint()?;
                budget.receive(tile, bytes)?;
                to.push((tile, reader.u32_varint()?));
            }
            to
        }
    };
    Ok(Transfer {
        source_tile,
        source_address,
        bytes,
        destinations,
    })
}

fn shifted(address: u32, shift: i64) -> Result<u32, PackageError> {
    u32::try_from(i64::from(address) + shift).map_err(|_| {
        invalid(format!(
            "address {address} moved by {shift} is out of range"
        ))
    })
}

fn invalid(message: impl Into<String>) -> PackageError {
    PackageError::Decode {
        part: "exchange",
        message: message.into(),
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], PackageError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len())
            .ok_or_else(|| invalid(format!("truncated at byte {}", self.at)))?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    fn u32(&mut self) -> Result<u32, PackageError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, PackageError> {
        let b = self.take(8)?;
        let mut array = [0u8; 8];
        array.copy_from_slice(b);
        Ok(u64::from_le_bytes(array))
    }

    /// A LEB128 integer of at most ten bytes that fits in 64 bits.
    fn varint(&mut self) -> Result<u64, PackageError> {
        let start = self.at;
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.take(1)?[0];
            let bits = u64::from(byte & 0x7f);
            if shift == 63 && bits > 1 {
                break;
            }
            value |= bits << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(invalid(format!(
            "an integer at byte {start} does not fit in 64 bits"
        )))
    }

    fn u32_varint(&mut self) -> Result<u32, PackageError> {
        let start = self.at;
        let value = self.varint()?;
        u32::try_from(value)
            .map_err(|_| invalid(format!("{value} at byte {start} does not fit in 32 bits")))
    }

    /// A count of items at least `item_bytes` long each, bounded by the
    /// bytes left so a corrupt count cannot ask for a huge allocation.
    fn count(&mut self, item_bytes: usize) -> Result<usize, PackageError> {
        let start = self.at;
        let count = self.u32()? as usize;
        self.bounded(count, item_bytes, start)
    }

    /// [`Reader::count`] written as a varint.
    fn varint_count(&mut self, item_bytes: usize) -> Result<usize, PackageError> {
        let start = self.at;
        let count = usize::try_from(self.varint()?).unwrap_or(usize::MAX);
        self.bounded(count, item_bytes, start)
    }

    fn bounded(
        &self,
        count: usize,
        item_bytes: usize,
        start: usize,
    ) -> Result<usize, PackageError> {
        let left = self.bytes.len() - self.at;
        if count.saturating_mul(item_bytes) > left {
            return Err(invalid(format!(
                "a count of {count} at byte {start} does not fit in the {left} bytes left"
            )));
        }
        Ok(count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Limits that only the format's own edge cases reach: tests of the
    /// encoding use the largest values it can hold.
    const FORMAT_ONLY: DecodeLimits = DecodeLimits {
        tiles: 1472,
        tile_bytes: u64::MAX,
        transfers: usize::MAX,
        destinations: usize::MAX,
    };

    fn transfer(tile: u32, address: u32, bytes: u32, to: &[(u32, u32)]) -> Transfer {
        Transfer {
            source_tile: tile,
            source_address: address,
            bytes,
            destinations: to.to_vec(),
        }
    }

    fn sample() -> Vec<ExchangeProgram> {
        vec![
            ExchangeProgram {
                label: "op qkv".into(),
                transfers: vec![
                    transfer(3, 0x50000, 256, &[(1, 0x60000), (2, 0x60010)]),
                    // Same tiles, addresses moved back by 0x100; same bytes.
                    transfer(3, 0x4ff00, 256, &[(1, 0x5ff00), (2, 0x5ff10)]),
                    // Same tiles, different shifts: the list is written.
                    transfer(4, 0x50000, 1, &[(1, 0x60000), (2, 0x60020)]),
                    // Other tiles.
                    transfer(4, 0x50001, 1, &[(2, 0x60000)]),
                    transfer(1471, u32::MAX, u32::MAX, &[(0, 0), (1471, u32::MAX)]),
                    transfer(1471, 0, u32::MAX, &[(0, u32::MAX), (1471, 0)]),
                ],
                paired: true,
                horizon_cycles: 399,
            },
            ExchangeProgram {
                label: String::new(),
                transfers: Vec::new(),
                paired: false,
                horizon_cycles: 0,
            },
        ]
    }

    #[test]
    fn round_trips() {
        let programs = sample();
        assert_eq!(
            decode(&encode(&programs), &FORMAT_ONLY).expect("decodes"),
            programs
        );
    }

    #[test]
    fn every_truncation_and_a_trailing_byte_are_errors() {
        let bytes = encode(&sample());
        for length in 0..bytes.len() {
            assert!(
                decode(&bytes[..length], &FORMAT_ONLY).is_err(),
                "length {length}"
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        expect_test::expect!["part `exchange` cannot be decoded: 1 bytes follow the last program"]
            .assert_eq(&decode(&longer, &FORMAT_ONLY).unwrap_err().to_string());
    }

    #[test]
    fn a_huge_count_is_refused_without_allocating() {
        let mut bytes = encode(&sample());
        bytes[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode(&bytes, &FORMAT_ONLY).is_err());
    }

    #[test]
    fn a_repeated_pattern_takes_a_few_bytes_per_transfer() {
        let transfers: Vec<Transfer> = (0..1000)
            .map(|i| transfer(7, 0x50000 + 2 * i, 1, &[(1, 0x60000 + i), (9, 0x70000 + i)]))
            .collect();
        let programs = vec![ExchangeProgram {
            label: "gather".into(),
            transfers,
            paired: false,
            horizon_cycles: 12,
        }];
        let bytes = encode(&programs);
        assert!(bytes.len() < 4 * 1000, "{} bytes", bytes.len());
        assert_eq!(decode(&bytes, &FORMAT_ONLY).expect("decodes"), programs);
    }

    #[test]
    fn bad_tags_shifts_and_integers_are_errors() {
        let one = |t: Transfer| {
            encode(&[ExchangeProgram {
                label: String::new(),
                transfers: vec![t.clone(), t],
                paired: false,
                horizon_cycles: 0,
            }])
        };
        let base = one(transfer(1, 5, 1, &[(2, 3)]));
        // Header: count, label length, paired, horizon, transfer count.
        let first = 4 + 4 + 1 + 8 + 4;
        let second = base.len() - 3;
        let error = |bytes: &[u8]| decode(bytes, &FORMAT_ONLY).unwrap_err().to_string();

        let mut unknown = base.clone();
        unknown[second] = 0x80;
        expect_test::expect![
            "part `exchange` cannot be decoded: unknown transfer tag 0x80 at byte 28"
        ]
        .assert_eq(&error(&unknown));

        let mut first_refers = base.clone();
        first_refers[first] = SAME_BYTES;
        expect_test::expect!["part `exchange` cannot be decoded: the first transfer of a program at byte 21 refers to a previous one"]
            .assert_eq(&error(&first_refers));

        // The second transfer moves the destination address 3 by -4.
        let mut below_zero = base.clone();
        let at = base.len() - 1;
        below_zero[at] = zigzag(-4) as u8;
        expect_test::expect![
            "part `exchange` cannot be decoded: address 3 moved by -4 is out of range"
        ]
        .assert_eq(&error(&below_zero));

        // Eleven continuation bytes for the first source address.
        let mut long = base[..first + 2].to_vec();
        long.extend_from_slice(&[0xff; 11]);
        assert!(
            error(&long).contains("does not fit in 64 bits"),
            "{}",
            error(&long)
        );
    }

    /// One transfer to many tiles, reused by many transfers after it (each
    /// two bytes): the decoded destinations are counted before they exist.
    fn amplified(destinations: u32, reuses: u32, bytes: u32) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&1u32.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.push(0);
        out.extend_from_slice(&0u64.to_le_bytes());
        out.extend_from_slice(&(1 + reuses).to_le_bytes());
        out.push(0);
        varint(&mut out, 0);
        varint(&mut out, 0x50000);
        varint(&mut out, u64::from(bytes));
        varint(&mut out, u64::from(destinations));
        for d in 0..destinations {
            varint(&mut out, u64::from(d % 1472));
            varint(&mut out, 0x60000 + u64::from(d / 1472) * u64::from(bytes));
        }
        for _ in 0..reuses {
            out.push(SHIFTED_DESTINATIONS | SAME_SOURCE_TILE | SAME_BYTES);
            varint(&mut out, 0);
            varint(&mut out, zigzag(i64::from(bytes) * 68));
        }
        out
    }

    #[test]
    fn decoding_is_bounded_by_what_the_target_holds() {
        let limits = DecodeLimits::of(&crate::target::IPU21);
        let error = |bytes: &[u8]| decode(bytes, &limits).unwrap_err().to_string();
        // 100,000 destinations reused 120,000 times would be twelve
        // billion; each tile would receive far more than its memory.
        let bomb = amplified(100_000, 120_000, 4);
        assert!(bomb.len() < 2_000_000);
        expect_test::expect![
            "part `exchange` cannot be decoded: more than 134217728 transfer destinations in all"
        ]
        .assert_eq(&error(&bomb));
        // Within each tile's memory, the total is still bounded.
        let tight = DecodeLimits {
            destinations: 1000,
            ..limits
        };
        expect_test::expect![
            "part `exchange` cannot be decoded: more than 1000 transfer destinations in all"
        ]
        .assert_eq(
            &decode(&amplified(500, 2, 4), &tight)
                .unwrap_err()
                .to_string(),
        );
        expect_test::expect!["part `exchange` cannot be decoded: exchange program 0 names tile 1472, beyond the target's 1472"]
            .assert_eq(&error(&encode(&[ExchangeProgram {
                label: String::new(),
                transfers: vec![transfer(1, 0x50000, 4, &[(1472, 0x60000)])],
                paired: false,
                horizon_cycles: 0,
            }])));
        assert!(decode(&amplified(1472, 10, 4), &limits).is_ok());
    }
}
