//! The `.ipuexe` container: a fixed header, a table of named parts, then
//! the parts. The exact byte layout is in `book/src/package-format.md`.
//!
//! Every byte of a file is covered by a checksum: the header carries the
//! blake3 hash of the part table, the table carries each part's hash, and
//! the parts must follow the table back to back up to the end of the file.
//! So a truncated or bit-flipped file is always an error naming what is
//! wrong, and never decodes into something else.

use super::{
    Binding, Header, HostCall, Package, PackageError, ProfileLayout, Segment, SegmentKind,
    TileImage, FORMAT_VERSION,
};
use crate::fsutil::write_atomic;
use crate::graph::Graph;
use camino::Utf8Path;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The first eight bytes of every package. The high first byte and the
/// final newline catch transfers that mangle binary files as text.
pub(super) const MAGIC: [u8; 8] = *b"\x89IPUEXE\n";

/// Magic, version, part count, table hash.
pub(super) const HEADER_BYTES: usize = 8 + 4 + 4 + 32;

/// Name, offset, length, hash.
pub(super) const TABLE_ENTRY_BYTES: usize = 16 + 8 + 8 + 32;

/// A bound on the part count, so a corrupt count cannot ask for a huge table.
pub(super) const MAX_PARTS: usize = 64;

/// The parts of a version 3 package, in the order the writer puts them;
/// the `tensors` part ([`super::file_values`]) follows them when the
/// project reads tensor files.
pub(crate) const PART_NAMES: [&str; 8] = [
    "meta", "graph", "tiles", "segments", "exchange", "calls", "bindings", "profile",
];

/// What the `meta` part holds (the format version lives in the fixed header).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Meta {
    compiler_version: String,
    target: String,
}

/// One tile in the `tiles` part; segment payloads are in `segments`, in the
/// same order.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TileEntry {
    tile: u32,
    segments: Vec<SegmentEntry>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SegmentEntry {
    address: u32,
    /// Where the payload starts in the `segments` part: segments with equal
    /// payloads (replicated weights, the same code) share one copy.
    offset: u64,
    bytes: u32,
    memory_size: u32,
    kind: SegmentKind,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Calls {
    initialize: HostCall,
    run: HostCall,
}

/// Validates `package` and writes it to `path` atomically: a reader sees
/// the old file or the whole new one, never a half-written package.
pub fn write(path: &Utf8Path, package: &Package) -> Result<(), PackageError> {
    let bytes = encode(package)?;
    write_atomic(path, &bytes).map_err(|problem| PackageError::Write {
        path: path.to_string(),
        problem,
    })
}

/// Reads and fully validates the package at `path`: a regular file of at
/// most [`MAX_PACKAGE_FILE_BYTES`](super::limits::MAX_PACKAGE_FILE_BYTES).
pub fn read(path: &Utf8Path) -> Result<Package, PackageError> {
    tracing::info!(%path, "reading application package");
    let bytes = crate::fsutil::read_bytes(path, super::limits::MAX_PACKAGE_FILE_BYTES).map_err(
        |problem| PackageError::Read {
            path: path.to_string(),
            problem,
        },
    )?;
    let package = parse(&bytes)?;
    tracing::info!(
        tiles = package.tiles.len(),
        compiler = %package.header.compiler_version,
        "application package read"
    );
    Ok(package)
}

/// Validates `package` and encodes it as a `.ipuexe` file's bytes.
pub(crate) fn encode(package: &Package) -> Result<Vec<u8>, PackageError> {
    let exchange = Part::new(super::exchange_part::encode(&package.exchanges));
    Ok(encode_with_exchange(package, &exchange)?.to_vec())
}

/// One encoded part with its blake3 hash, shared rather than copied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    pub bytes: Arc<Vec<u8>>,
    pub hash: blake3::Hash,
}

impl Part {
    pub(crate) fn new(bytes: Vec<u8>) -> Part {
        Part {
            hash: blake3::hash(&bytes),
            bytes: Arc::new(bytes),
        }
    }
}

/// An encoded package kept as its header and part table followed by the
/// parts, so parts that did not change are shared with earlier encodings
/// and the file is written without gathering everything into one buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Encoded {
    /// The fixed header and the part table.
    pub head: Vec<u8>,
    pub parts: Vec<Part>,
}

impl Encoded {
    /// The file's length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.head.len() + self.parts.iter().map(|p| p.bytes.len()).sum::<usize>()
    }

    /// The file's bytes in one buffer.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len());
        for chunk in self.chunks() {
            out.extend_from_slice(chunk);
        }
        out
    }

    /// The blake3 hash of the whole file.
    pub(crate) fn file_hash(&self) -> blake3::Hash {
        let mut hasher = blake3::Hasher::new();
        for chunk in self.chunks() {
            hasher.update(chunk);
        }
        hasher.finalize()
    }

    /// The file's bytes, in order.
    pub(super) fn chunks(&self) -> impl Iterator<Item = &[u8]> {
        std::iter::once(self.head.as_slice()).chain(self.parts.iter().map(|p| p.bytes.as_slice()))
    }

    /// Writes the file atomically (see [`write_atomic`]).
    pub fn write(&self, path: &Utf8Path) -> Result<(), PackageError> {
        let chunks: Vec<&[u8]> = self.chunks().collect();
        crate::fsutil::write_atomic_chunks(path, &chunks).map_err(|problem| PackageError::Write {
            path: path.to_string(),
            problem,
        })
    }
}

/// [`encode`] with the `exchange` part already encoded (by
/// [`super::exchange_part::encode`] of the package's exchange programs) and
/// hashed, so a caller that keeps it across builds does neither again.
pub(crate) fn encode_with_exchange(
    package: &Package,
    exchange: &Part,
) -> Result<Encoded, PackageError> {
    // Validation and encoding read the package independently: run them on
    // both cores, and drop the bytes if validation fails.
    let (valid, encoded) = rayon::join(|| package.validate(), || encode_parts(package, exchange));
    valid?;
    encoded
}

fn encode_parts(package: &Package, exchange: &Part) -> Result<Encoded, PackageError> {
    fn json<T: Serialize>(part: &'static str, value: &T) -> Result<Vec<u8>, PackageError> {
        serde_json::to_vec(value).map_err(|error| PackageError::Decode {
            part,
            message: format!("cannot be encoded: {error}"),
        })
    }
    let meta = Meta {
        compiler_version: package.header.compiler_version.clone(),
        target: package.header.target.clone(),
    };
    let (segments, offsets) = distinct_payloads(package);
    let mut offsets = offsets.into_iter();
    let tiles: Vec<TileEntry> = package
        .tiles
        .iter()
        .map(|image| TileEntry {
            tile: image.tile,
            segments: image
                .segments
                .iter()
                .zip(offsets.by_ref())
                .map(|(s, offset)| SegmentEntry {
                    address: s.address,
                    offset,
                    bytes: s.bytes(),
                    memory_size: s.memory_size,
                    kind: s.kind,
                })
                .collect(),
        })
        .collect();
    let calls = Calls {
        initialize: package.initialize.clone(),
        run: package.run.clone(),
    };
    let fresh: Vec<(usize, Vec<u8>)> = vec![
        (0, json("meta", &meta)?),
        (1, json("graph", &package.graph)?),
        (2, json("tiles", &tiles)?),
        (3, segments),
        (5, json("calls", &calls)?),
        (6, json("bindings", &package.bindings)?),
        (7, json("profile", &package.profile)?),
    ];
    let mut parts: Vec<Option<Part>> = vec![None; PART_NAMES.len()];
    {
        use rayon::prelude::*;
        let hashed: Vec<(usize, Part)> = fresh
            .into_par_iter()
            .map(|(index, bytes)| (index, Part::new(bytes)))
            .collect();
        for (index, part) in hashed {
            parts[index] = Some(part);
        }
    }
    parts[4] = Some(exchange.clone());
    let mut parts: Vec<Part> = parts.into_iter().flatten().collect();
    let mut names: Vec<&str> = PART_NAMES.to_vec();
    if !package.file_values.is_empty() {
        parts.push(Part::new(super::file_values::encode(&package.file_values)?));
        names.push(super::file_values::PART);
    }
    let named: Vec<(&str, &Part)> = names.into_iter().zip(&parts).collect();
    let head = head(FORMAT_VERSION, &named);
    Ok(Encoded { head, parts })
}

/// The `segments` part: each distinct payload once, in order of first use,
/// and where each segment's payload starts in it (segments in `tiles`
/// order). Candidates are found by length and a sample of their bytes and
/// confirmed by comparing every byte, which is cheaper than hashing them
/// all: most bytes are replicated weights, each compared once.
fn distinct_payloads(package: &Package) -> (Vec<u8>, Vec<u64>) {
    use std::collections::HashMap;
    // (length, sample hash) -> (offset, bytes) of each payload laid out.
    type Laid<'a> = Vec<(u64, &'a [u8])>;
    let mut seen: HashMap<(usize, u64), Laid> = HashMap::new();
    let mut payloads = Vec::new();
    let mut offsets = Vec::new();
    for segment in package.tiles.iter().flat_map(|t| &t.segments) {
        let data = segment.data.as_slice();
        if data.is_empty() {
            offsets.push(0);
            continue;
        }
        let same = seen.entry((data.len(), sample_hash(data))).or_default();
        let offset = match same.iter().find(|(_, earlier)| *earlier == data) {
            Some(&(offset, _)) => offset,
            None => {
                let offset = payloads.len() as u64;
                payloads.extend_from_slice(data);
                same.push((offset, data));
                offset
            }
        };
        offsets.push(offset);
    }
    (payloads, offsets)
}

/// A hash of up to 16 evenly spaced 16-byte windows of `data`.
fn sample_hash(data: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let step = (data.len() / 16).max(1);
    for start in (0..data.len()).step_by(step).take(16) {
        data[start..data.len().min(start + 16)].hash(&mut hasher);
    }
    hasher.finish()
}

/// The fixed header and the part table of hashed parts laid out back to
/// back after them.
fn head(version: u32, parts: &[(&str, &Part)]) -> Vec<u8> {
    let table_bytes = parts.len() * TABLE_ENTRY_BYTES;
    let mut table = Vec::with_capacity(table_bytes);
    let mut offset = (HEADER_BYTES + table_bytes) as u64;
    for (name, part) in parts {
        let mut field = [0u8; 16];
        let name = &name.as_bytes()[..name.len().min(16)];
        field[..name.len()].copy_from_slice(name);
        table.extend_from_slice(&field);
        table.extend_from_slice(&offset.to_le_bytes());
        table.extend_from_slice(&(part.bytes.len() as u64).to_le_bytes());
        table.extend_from_slice(part.hash.as_bytes());
        offset += part.bytes.len() as u64;
    }
    let mut out = Vec::with_capacity(HEADER_BYTES + table_bytes);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&(parts.len() as u32).to_le_bytes());
    out.extend_from_slice(blake3::hash(&table).as_bytes());
    out.extend_from_slice(&table);
    out
}

/// Lays out the fixed header, the part table and the parts, with every
/// checksum. Does not look inside the parts: tests and the fuzzer build
/// files whose checksums are right around parts that are not.
pub fn assemble(version: u32, parts: &[(&str, &[u8])]) -> Vec<u8> {
    let hashed: Vec<(&str, Part)> = parts
        .iter()
        .map(|(name, bytes)| (*name, Part::new(bytes.to_vec())))
        .collect();
    let named: Vec<(&str, &Part)> = hashed.iter().map(|(n, p)| (*n, p)).collect();
    let encoded = Encoded {
        head: head(version, &named),
        parts: hashed.into_iter().map(|(_, p)| p).collect(),
    };
    encoded.to_vec()
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut field = [0u8; 4];
    field.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(field)
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut field = [0u8; 8];
    field.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(field)
}

/// Parses and fully validates a package from a file's bytes.
pub fn parse(bytes: &[u8]) -> Result<Package, PackageError> {
    let file_length = bytes.len() as u64;
    // The magic and version come first so that an old or foreign file gets
    // the most useful message even if the rest is unreadable to us.
    if bytes.len() < 12 {
        if bytes.len() < MAGIC.len() || bytes[..MAGIC.len()] != MAGIC {
            return Err(PackageError::BadMagic);
        }
        return Err(PackageError::TooShort {
            length: file_length,
            needed: HEADER_BYTES as u64,
        });
    }
    if bytes[..MAGIC.len()] != MAGIC {
        return Err(PackageError::BadMagic);
    }
    let version = u32_at(bytes, 8);
    if version > FORMAT_VERSION {
        return Err(PackageError::NewerVersion { version });
    }
    if version < FORMAT_VERSION {
        return Err(PackageError::OlderVersion { version });
    }
    if bytes.len() < HEADER_BYTES {
        return Err(PackageError::TooShort {
            length: file_length,
            needed: HEADER_BYTES as u64,
        });
    }
    let count = u32_at(bytes, 12) as usize;
    if count > MAX_PARTS {
        return Err(PackageError::BadTable {
            message: format!("it claims {count} parts (at most {MAX_PARTS} are allowed)"),
        });
    }
    let table_end = HEADER_BYTES + count * TABLE_ENTRY_BYTES;
    if bytes.len() < table_end {
        return Err(PackageError::TooShort {
            length: file_length,
            needed: table_end as u64,
        });
    }
    let table = &bytes[HEADER_BYTES..table_end];
    if blake3::hash(table).as_bytes()[..] != bytes[16..48] {
        return Err(PackageError::CorruptTable);
    }

    let mut parts: Vec<(String, &[u8])> = Vec::with_capacity(count);
    let mut expected_offset = table_end as u64;
    for entry in table.chunks_exact(TABLE_ENTRY_BYTES) {
        let name_field = &entry[..16];
        let name_length = name_field.iter().position(|&b| b == 0).unwrap_or(16);
        let name = std::str::from_utf8(&name_field[..name_length])
            .ok()
            .filter(|n| !n.is_empty() && name_field[name_length..].iter().all(|&b| b == 0))
            .ok_or_else(|| PackageError::BadTable {
                message: "a part name is not NUL-padded text".into(),
            })?
            .to_string();
        let offset = u64_at(entry, 16);
        let length = u64_at(entry, 24);
        let end = offset.saturating_add(length);
        if end > file_length {
            return Err(PackageError::PartOutOfBounds {
                part: name,
                offset,
                end,
                file_length,
            });
        }
        if offset != expected_offset {
            return Err(PackageError::BadTable {
                message: format!(
                    "part `{name}` starts at byte {offset}, not right after the previous part at {expected_offset}"
                ),
            });
        }
        expected_offset = end;
        let payload = &bytes[offset as usize..end as usize];
        if blake3::hash(payload).as_bytes()[..] != entry[32..64] {
            return Err(PackageError::ChecksumMismatch { part: name });
        }
        if parts.iter().any(|(n, _)| *n == name) {
            return Err(PackageError::BadTable {
                message: format!("part `{name}` appears twice"),
            });
        }
        parts.push((name, payload));
    }
    if expected_offset != file_length {
        return Err(PackageError::BadTable {
            message: format!(
                "the parts end at byte {expected_offset} but the file has {file_length} bytes"
            ),
        });
    }
    if let Some((name, _)) = parts
        .iter()
        .find(|(n, _)| !PART_NAMES.contains(&n.as_str()) && n != super::file_values::PART)
    {
        return Err(PackageError::BadTable {
            message: format!("unknown part `{name}` for format version {FORMAT_VERSION}"),
        });
    }
    let part = |name: &'static str| {
        parts
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, payload)| *payload)
            .ok_or(PackageError::MissingPart { part: name })
    };
    fn json<T: serde::de::DeserializeOwned>(
        part: &'static str,
        payload: &[u8],
    ) -> Result<T, PackageError> {
        serde_json::from_slice(payload).map_err(|error| PackageError::Decode {
            part,
            message: error.to_string(),
        })
    }

    let meta: Meta = json("meta", part("meta")?)?;
    let Some(target) = crate::target::target_by_name(&meta.target) else {
        return Err(PackageError::WrongTarget {
            target: meta.target,
        });
    };
    let graph: Graph = json("graph", part("graph")?)?;
    let tile_entries: Vec<TileEntry> = json("tiles", part("tiles")?)?;
    let tiles = segments(target, tile_entries, part("segments")?)?;
    let exchanges = super::exchange_part::decode(
        part("exchange")?,
        &super::exchange_part::DecodeLimits::of(target),
    )?;
    let calls: Calls = json("calls", part("calls")?)?;
    let bindings: Vec<Binding> = json("bindings", part("bindings")?)?;
    let profile: ProfileLayout = json("profile", part("profile")?)?;
    let file_values = match part(super::file_values::PART) {
        Ok(bytes) => super::file_values::decode(bytes)?,
        Err(_) => Vec::new(),
    };

    let package = Package {
        header: Header {
            format_version: version,
            compiler_version: meta.compiler_version,
            target: meta.target,
        },
        tiles,
        exchanges: std::sync::Arc::new(exchanges),
        initialize: calls.initialize,
        run: calls.run,
        bindings,
        profile,
        graph,
        file_values,
    };
    package.validate()?;
    Ok(package)
}

/// Cuts the `segments` part into each segment's payload. Payloads are laid
/// out in order of first use: a segment either starts right where the
/// payloads so far end, or lies wholly inside them (a shared copy), and
/// together they use the whole part.
///
/// Sharing means a few bytes of the part can stand for many copies, so
/// every tile's layout is checked against the target first (tiles exist,
/// segments lie in loadable memory without overlapping): no tile gets more
/// payload than its memory holds before anything is copied.
fn segments(
    target: &crate::target::Target,
    entries: Vec<TileEntry>,
    payloads: &[u8],
) -> Result<Vec<TileImage>, PackageError> {
    let mut previous = None;
    for entry in &entries {
        super::validate::tile_layout(
            target,
            entry.tile,
            previous,
            entry
                .segments
                .iter()
                .map(|s| super::validate::SegmentShape {
                    address: s.address,
                    bytes: u64::from(s.bytes),
                    memory_size: s.memory_size,
                    kind: s.kind,
                }),
        )?;
        previous = Some(entry.tile);
    }
    let mut end = 0u64;
    let mut tiles = Vec::with_capacity(entries.len());
    for entry in entries {
        let mut segments = Vec::with_capacity(entry.segments.len());
        for s in entry.segments {
            let stop = s.offset.saturating_add(u64::from(s.bytes));
            let problem = if stop > payloads.len() as u64 {
                Some(format!(
                    "needs bytes {}..{stop} of the part's {}",
                    s.offset,
                    payloads.len()
                ))
            } else if s.offset != end && stop > end {
                Some(format!(
                    "starts at byte {}, neither inside the {end} bytes laid out before it nor right after them",
                    s.offset
                ))
            } else {
                None
            };
            if let Some(problem) = problem {
                return Err(PackageError::invalid(
                    "segments",
                    format!("tile {} segment at {:#x} {problem}", entry.tile, s.address),
                ));
            }
            end = end.max(stop);
            segments.push(Segment {
                address: s.address,
                memory_size: s.memory_size,
                kind: s.kind,
                data: payloads[s.offset as usize..stop as usize].to_vec(),
            });
        }
        tiles.push(TileImage {
            tile: entry.tile,
            segments,
        });
    }
    if end != payloads.len() as u64 {
        return Err(PackageError::invalid(
            "segments",
            format!(
                "the tiles use {end} bytes of segment data but the part has {}",
                payloads.len()
            ),
        ));
    }
    Ok(tiles)
}
