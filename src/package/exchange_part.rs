//! The `exchange` part in binary: exchange programs hold many small
//! transfers (hundreds of thousands for a ViT encoder), which JSON made the
//! largest and slowest part of a package. The layout is in
//! `book/src/package-format.md`; every count is checked against the bytes
//! left, so a damaged part is an error, never a huge allocation.

use super::{ExchangeProgram, PackageError, Transfer};

/// Encodes exchange programs (little-endian).
pub fn encode(programs: &[ExchangeProgram]) -> Vec<u8> {
    let transfers: usize = programs.iter().map(|p| p.transfers.len()).sum();
    let mut out = Vec::with_capacity(16 + transfers * 24);
    out.extend_from_slice(&(programs.len() as u32).to_le_bytes());
    for program in programs {
        out.extend_from_slice(&(program.label.len() as u32).to_le_bytes());
        out.extend_from_slice(program.label.as_bytes());
        out.push(u8::from(program.paired));
        out.extend_from_slice(&program.horizon_cycles.to_le_bytes());
        out.extend_from_slice(&(program.transfers.len() as u32).to_le_bytes());
        for t in &program.transfers {
            for value in [
                t.source_tile,
                t.source_address,
                t.bytes,
                t.destinations.len() as u32,
            ] {
                out.extend_from_slice(&value.to_le_bytes());
            }
            for &(tile, address) in &t.destinations {
                out.extend_from_slice(&tile.to_le_bytes());
                out.extend_from_slice(&address.to_le_bytes());
            }
        }
    }
    out
}

/// Decodes what [`encode`] wrote; any truncation, bad flag, bad label or
/// trailing byte is an error naming the part.
pub fn decode(bytes: &[u8]) -> Result<Vec<ExchangeProgram>, PackageError> {
    let mut reader = Reader { bytes, at: 0 };
    let count = reader.count(4 + 1 + 8 + 4)?;
    let mut programs = Vec::with_capacity(count);
    for _ in 0..count {
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
        let transfers = reader.count(16)?;
        let mut list = Vec::with_capacity(transfers);
        for _ in 0..transfers {
            let source_tile = reader.u32()?;
            let source_address = reader.u32()?;
            let bytes = reader.u32()?;
            let destinations = reader.count(8)?;
            let mut to = Vec::with_capacity(destinations);
            for _ in 0..destinations {
                to.push((reader.u32()?, reader.u32()?));
            }
            list.push(Transfer {
                source_tile,
                source_address,
                bytes,
                destinations: to,
            });
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

    /// A count of items at least `item_bytes` long each, bounded by the
    /// bytes left so a corrupt count cannot ask for a huge allocation.
    fn count(&mut self, item_bytes: usize) -> Result<usize, PackageError> {
        let count = self.u32()? as usize;
        let left = self.bytes.len() - self.at;
        if count.saturating_mul(item_bytes) > left {
            return Err(invalid(format!(
                "a count of {count} at byte {} does not fit in the {left} bytes left",
                self.at - 4
            )));
        }
        Ok(count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<ExchangeProgram> {
        vec![
            ExchangeProgram {
                label: "op qkv".into(),
                transfers: vec![Transfer {
                    source_tile: 3,
                    source_address: 0x50000,
                    bytes: 256,
                    destinations: vec![(1, 0x60000), (2, 0x60010)],
                }],
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
        assert_eq!(decode(&encode(&programs)).expect("decodes"), programs);
    }

    #[test]
    fn every_truncation_and_a_trailing_byte_are_errors() {
        let bytes = encode(&sample());
        for length in 0..bytes.len() {
            assert!(decode(&bytes[..length]).is_err(), "length {length}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        expect_test::expect!["part `exchange` cannot be decoded: 1 bytes follow the last program"]
            .assert_eq(&decode(&longer).unwrap_err().to_string());
    }

    #[test]
    fn a_huge_count_is_refused_without_allocating() {
        let mut bytes = encode(&sample());
        bytes[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode(&bytes).is_err());
    }
}
