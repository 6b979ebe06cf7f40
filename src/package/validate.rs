//! The package's semantic checks: everything a device relies on without
//! re-checking, so that a corrupt or hand-made package is an error here and
//! never a panic later.

use super::limits::{
    MAX_BINDING_BLOCKS, MAX_DESTINATIONS, MAX_EXECUTED_STEPS, MAX_EXECUTED_TILE_RECORDS,
    MAX_REPEAT_DEPTH, MAX_TRANSFERS,
};
use super::{
    Binding, Call, ExchangeProgram, Package, PackageError, Piece, SegmentKind, Step, TileImage,
    FORMAT_VERSION,
};
use crate::target::{target_by_name, Target};
use std::collections::BTreeMap;

pub(super) fn package(package: &Package) -> Result<(), PackageError> {
    let header = &package.header;
    if header.format_version != FORMAT_VERSION {
        return Err(if header.format_version > FORMAT_VERSION {
            PackageError::NewerVersion {
                version: header.format_version,
            }
        } else {
            PackageError::OlderVersion {
                version: header.format_version,
            }
        });
    }
    let target = target_by_name(&header.target).ok_or_else(|| PackageError::WrongTarget {
        target: header.target.clone(),
    })?;
    if header.compiler_version.is_empty() {
        return Err(PackageError::invalid(
            "meta",
            "the compiler version is empty",
        ));
    }
    if package.graph.target.name() != header.target {
        return Err(PackageError::invalid(
            "graph",
            format!(
                "the graph targets `{}` but the package targets `{}`",
                package.graph.target, header.target
            ),
        ));
    }
    // First, since everything below reads tensors' shapes.
    super::graph_check::check(&package.graph)?;
    super::file_values::check(package)?;
    tiles(target, &package.tiles)?;
    // Exchange programs name a million destinations in a large package: look
    // tiles up in a table rather than searching the images each time.
    let mut in_package = vec![false; target.tiles as usize];
    for image in &package.tiles {
        if let Some(slot) = in_package.get_mut(image.tile as usize) {
            *slot = true;
        }
    }
    let used = |tile: u32| in_package.get(tile as usize).copied().unwrap_or(false);

    for (index, program) in package.exchanges.iter().enumerate() {
        for (t, transfer) in program.transfers.iter().enumerate() {
            let at = || format!("exchange program {index} ({}), transfer {t}", program.label);
            if transfer.bytes == 0 {
                return Err(PackageError::invalid(
                    "exchange",
                    format!("{}: moves no bytes", at()),
                ));
            }
            if transfer.destinations.is_empty() {
                return Err(PackageError::invalid(
                    "exchange",
                    format!("{}: has no destination", at()),
                ));
            }
            let tiles = std::iter::once(transfer.source_tile)
                .chain(transfer.destinations.iter().map(|&(tile, _)| tile));
            for tile in tiles {
                if !used(tile) {
                    return Err(PackageError::invalid(
                        "exchange",
                        format!("{}: tile {tile} is not one of the package's tiles", at()),
                    ));
                }
            }
        }
    }

    exchange_size(package, (MAX_TRANSFERS, MAX_DESTINATIONS))?;

    // Blocks are what host streams copy one by one: bound them before
    // anything walks them.
    let blocks = package
        .bindings
        .iter()
        .flat_map(|b| &b.pieces)
        .fold(0u64, |sum, p| sum.saturating_add(u64::from(p.count)));
    if blocks > MAX_BINDING_BLOCKS {
        return Err(PackageError::invalid(
            "bindings",
            format!("the bindings have {blocks} blocks (at most {MAX_BINDING_BLOCKS} are allowed)"),
        ));
    }
    // Only what the host reads back must be whole: an input read through a
    // slice is written only where the device reads it.
    let mut read_back = vec![false; package.bindings.len()];
    for call in Call::ALL {
        for step in package.call(call).preorder() {
            if let Step::HostRead { binding } = step {
                if let Some(flag) = read_back.get_mut(*binding as usize) {
                    *flag = true;
                }
            }
        }
    }
    for (index, binding) in package.bindings.iter().enumerate() {
        self::binding(package, target, index, binding, read_back[index])?;
    }

    // Tiles an exchange step records in the profile: every tile its
    // program touches.
    let exchange_tiles: Vec<u64> = package.exchanges.iter().map(touched_tiles).collect();
    for call in Call::ALL {
        steps(package, call, &package.call(call).steps, 0)?;
        executed(package, call, &exchange_tiles)?;
    }
    checked_outputs(package)?;
    profile(package)
}

/// Every output the check compares must be read back by the `run` call: a
/// check over nothing would pass whatever the device computed.
fn checked_outputs(package: &Package) -> Result<(), PackageError> {
    for &id in &package.graph.check.outputs {
        let read_back = package.run.steps.iter().any(|step| {
            matches!(step, Step::HostRead { binding }
                if package.bindings.get(*binding as usize).is_some_and(|b| b.tensor == id && b.iteration.is_none()))
        });
        if !read_back {
            let name = package
                .graph
                .tensors
                .get(id.0 as usize)
                .map_or_else(|| format!("tensor {}", id.0), |t| format!("`{}`", t.name));
            return Err(PackageError::invalid(
                "calls",
                format!("the check compares {name}, which the run call never reads back"),
            ));
        }
    }
    Ok(())
}

/// What one host call executes, a repeat's body once per iteration, must
/// stay within what a run may record: without this a small package could
/// loop for ever in steps of no cycles, or fill memory with its profile.
fn executed(package: &Package, call: Call, exchange_tiles: &[u64]) -> Result<(), PackageError> {
    fn walk(steps: &[Step], exchange_tiles: &[u64]) -> (u64, u64) {
        steps.iter().fold((0u64, 0u64), |(count, records), step| {
            let (c, r) = match step {
                Step::Compute { tiles, .. } => (1, tiles.len() as u64),
                Step::Exchange { program } => (
                    2,
                    exchange_tiles.get(*program as usize).copied().unwrap_or(0),
                ),
                Step::Repeat { count: n, body } => {
                    let (c, r) = walk(body, exchange_tiles);
                    (
                        c.saturating_mul(u64::from(*n)),
                        r.saturating_mul(u64::from(*n)),
                    )
                }
                Step::HostWrite { .. } | Step::HostRead { .. } => (1, 0),
            };
            (count.saturating_add(c), records.saturating_add(r))
        })
    }
    let (steps, records) = walk(&package.call(call).steps, exchange_tiles);
    let fail = |message: String| {
        Err(PackageError::RunTooLong {
            call: call.name(),
            message,
        })
    };
    if steps > MAX_EXECUTED_STEPS {
        return fail(format!(
            "executes {steps} steps (repeats unrolled), more than the {MAX_EXECUTED_STEPS} a run may record"
        ));
    }
    if records > MAX_EXECUTED_TILE_RECORDS {
        return fail(format!(
            "records {records} tile activities (repeats unrolled), more than the {MAX_EXECUTED_TILE_RECORDS} a run may record"
        ));
    }
    Ok(())
}

/// The exchange programs together must stay within what a reader decodes
/// (`exchange_part::decode` counts the same totals against
/// `(MAX_TRANSFERS, MAX_DESTINATIONS)`, which `limits` are outside tests),
/// so that a build never writes a package its own reader refuses.
pub(super) fn exchange_size(
    package: &Package,
    (max_transfers, max_destinations): (usize, usize),
) -> Result<(), PackageError> {
    let transfers: usize = package.exchanges.iter().map(|p| p.transfers.len()).sum();
    let destinations: usize = package
        .exchanges
        .iter()
        .flat_map(|p| &p.transfers)
        .map(|t| t.destinations.len())
        .sum();
    let message = if transfers > max_transfers {
        format!("{transfers} transfers, more than the {max_transfers} a package may hold")
    } else if destinations > max_destinations {
        format!(
            "{destinations} transfer destinations, more than the {max_destinations} a package may hold"
        )
    } else {
        return Ok(());
    };
    Err(PackageError::ExchangeTooLarge { message })
}

/// Distinct tiles an exchange program reads or writes (its tiles are the
/// package's, so below the target's count).
fn touched_tiles(program: &ExchangeProgram) -> u64 {
    let mut seen: Vec<bool> = Vec::new();
    let mut count = 0;
    for t in &program.transfers {
        for tile in std::iter::once(t.source_tile).chain(t.destinations.iter().map(|d| d.0)) {
            let tile = tile as usize;
            if tile >= seen.len() {
                seen.resize(tile + 1, false);
            }
            if !seen[tile] {
                seen[tile] = true;
                count += 1;
            }
        }
    }
    count
}

fn tiles(target: &Target, tiles: &[TileImage]) -> Result<(), PackageError> {
    let mut previous = None;
    for image in tiles {
        tile_layout(
            target,
            image.tile,
            previous,
            image.segments.iter().map(|s| SegmentShape {
                address: s.address,
                bytes: s.data.len() as u64,
                memory_size: s.memory_size,
                kind: s.kind,
            }),
        )?;
        previous = Some(image.tile);
    }
    Ok(())
}

/// A segment as its tile entry declares it, before its payload is read.
pub(super) struct SegmentShape {
    pub address: u32,
    pub bytes: u64,
    pub memory_size: u32,
    pub kind: SegmentKind,
}

impl SegmentShape {
    fn end(&self) -> u64 {
        u64::from(self.address) + u64::from(self.memory_size)
    }
}

/// Checks one tile's id (after `previous`, below the target's count) and
/// its segments' layout: in loadable memory, in order, not overlapping, so
/// that their payloads together are at most the tile's memory. The reader
/// runs this before it copies any payload.
pub(super) fn tile_layout(
    target: &Target,
    tile: u32,
    previous: Option<u32>,
    segments: impl Iterator<Item = SegmentShape>,
) -> Result<(), PackageError> {
    let memory = target.memory;
    if tile >= target.tiles {
        return Err(PackageError::invalid(
            "tiles",
            format!(
                "tile {tile} does not exist ({} has {} tiles)",
                target.name, target.tiles
            ),
        ));
    }
    if previous.is_some_and(|p| p >= tile) {
        return Err(PackageError::invalid(
            "tiles",
            format!("tile {tile} is listed out of order or twice"),
        ));
    }
    {
        let mut end_of_previous = 0u64;
        for segment in segments {
            let at = format!(
                "tile {tile} {} segment at {:#x}",
                segment.kind.name(),
                segment.address
            );
            if segment.bytes > u64::from(segment.memory_size) {
                return Err(PackageError::invalid(
                    "tiles",
                    format!(
                        "{at}: {} bytes of data exceed its memory size of {}",
                        segment.bytes, segment.memory_size
                    ),
                ));
            }
            if segment.memory_size == 0 {
                return Err(PackageError::invalid("tiles", format!("{at}: is empty")));
            }
            if segment.kind == SegmentKind::Zero && segment.bytes != 0 {
                return Err(PackageError::invalid(
                    "tiles",
                    format!("{at}: a zero segment carries data"),
                ));
            }
            if !memory
                .loadable
                .contains_span(segment.address, segment.memory_size)
            {
                return Err(PackageError::invalid(
                    "tiles",
                    format!(
                        "{at}: {:#x}..{:#x} is outside loadable memory {:#x}..{:#x}",
                        segment.address,
                        segment.end(),
                        memory.loadable.start,
                        memory.loadable.end
                    ),
                ));
            }
            if segment.kind == SegmentKind::Code {
                if !memory
                    .region0
                    .contains_span(segment.address, segment.memory_size)
                {
                    return Err(PackageError::invalid(
                        "tiles",
                        format!(
                            "{at}: code must lie in region 0 (below {:#x}) but ends at {:#x}",
                            memory.region0.end,
                            segment.end()
                        ),
                    ));
                }
                if segment.address % 4 != 0 {
                    return Err(PackageError::invalid(
                        "tiles",
                        format!("{at}: code must be 4-byte aligned"),
                    ));
                }
            }
            if u64::from(segment.address) < end_of_previous {
                return Err(PackageError::invalid(
                    "tiles",
                    format!("{at}: overlaps the previous segment or is out of order"),
                ));
            }
            end_of_previous = segment.end();
        }
    }
    Ok(())
}

fn binding(
    package: &Package,
    target: &Target,
    index: usize,
    binding: &Binding,
    read_back: bool,
) -> Result<(), PackageError> {
    let fail = |message: String| {
        Err(PackageError::invalid(
            "bindings",
            format!("binding {index}: {message}"),
        ))
    };
    let Some(tensor) = package.graph.tensors.get(binding.tensor.0 as usize) else {
        return fail(format!("tensor {} is not in the graph", binding.tensor.0));
    };
    if tensor.dtype != binding.dtype || tensor.element_count() as u64 != binding.element_count {
        return fail(format!(
            "is {} x {} but tensor `{}` is {} x {}",
            binding.dtype,
            binding.element_count,
            tensor.name,
            tensor.dtype,
            tensor.element_count()
        ));
    }
    let total = binding.byte_len();
    let loadable = target.memory.loadable;
    for (p, piece) in binding.pieces.iter().enumerate() {
        if piece.bytes == 0 || piece.count == 0 {
            return fail(format!("piece {p} is empty"));
        }
        if package.tile(piece.tile).is_none() {
            return fail(format!(
                "piece {p} is on tile {}, which is not one of the package's tiles",
                piece.tile
            ));
        }
        let last = u64::from(piece.count - 1);
        if piece.count > 1 && piece.address_stride < piece.bytes {
            return fail(format!(
                "piece {p} has blocks of {} bytes every {} bytes: they overlap in tile memory",
                piece.bytes, piece.address_stride
            ));
        }
        // Widened arithmetic: hostile strides and counts cannot wrap.
        let address_end = u64::from(piece.address)
            + last * u64::from(piece.address_stride)
            + u64::from(piece.bytes);
        if piece.address < loadable.start || address_end > u64::from(loadable.end) {
            return fail(format!(
                "piece {p} at {:#x} ({} x {} bytes) on tile {} is outside loadable memory",
                piece.address, piece.count, piece.bytes, piece.tile
            ));
        }
        let logical_end = u128::from(piece.logical_offset)
            + u128::from(last) * u128::from(piece.logical_stride)
            + u128::from(piece.bytes);
        if logical_end > u128::from(total) {
            return fail(format!(
                "piece {p} covers bytes from {} beyond the tensor's {total}",
                piece.logical_offset
            ));
        }
    }
    if let Some(byte) = read_back
        .then(|| first_uncovered(&binding.pieces, total))
        .flatten()
    {
        return fail(format!(
            "no piece holds byte {byte} of tensor `{}` ({total} bytes)",
            tensor.name
        ));
    }
    Ok(())
}

/// The first byte of `0..total` no block of `pieces` holds, if any.
///
/// A sweep over the runs, never over their blocks one by one when it can
/// be avoided: a run whose blocks touch or overlap is one interval, and a
/// gapped run is a stream of blocks in ascending order that jumps past
/// every block already covered. The runs must be validated (every block
/// inside the tensor), so nothing here overflows; memory is one heap entry
/// per run.
pub(crate) fn first_uncovered(pieces: &[Piece], total: u64) -> Option<u64> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    /// A run as blocks `start + i * stride .. + bytes` for `i` in `0..count`.
    #[derive(Clone, Copy)]
    struct Stream {
        start: u64,
        stride: u64,
        bytes: u64,
        count: u64,
    }
    let streams: Vec<Stream> = pieces
        .iter()
        .map(|p| {
            let (bytes, stride, count) = (u64::from(p.bytes), p.logical_stride, u64::from(p.count));
            if count == 1 || stride == 0 || stride <= bytes {
                // Blocks that touch or overlap (or repeat) form one interval.
                let span = stride * (count - 1) + bytes;
                Stream {
                    start: p.logical_offset,
                    stride: 0,
                    bytes: span,
                    count: 1,
                }
            } else {
                Stream {
                    start: p.logical_offset,
                    stride,
                    bytes,
                    count,
                }
            }
        })
        .collect();
    // (next block's start, stream, next block's index)
    let mut heap: BinaryHeap<Reverse<(u64, usize, u64)>> = streams
        .iter()
        .enumerate()
        .map(|(s, stream)| Reverse((stream.start, s, 0)))
        .collect();
    let mut covered = 0u64;
    while covered < total {
        let Some(Reverse((start, s, index))) = heap.pop() else {
            return Some(covered);
        };
        if start > covered {
            return Some(covered);
        }
        let stream = streams[s];
        covered = covered.max(start + stream.bytes);
        // The first later block that ends beyond what is covered now.
        let mut next = index + 1;
        if stream.stride > 0 {
            let needed = (covered + 1).saturating_sub(stream.start + stream.bytes);
            next = next.max(needed.div_ceil(stream.stride));
        }
        if next < stream.count {
            heap.push(Reverse((stream.start + next * stream.stride, s, next)));
        }
    }
    None
}

fn steps(package: &Package, call: Call, steps: &[Step], depth: usize) -> Result<(), PackageError> {
    let fail = |message: String| {
        Err(PackageError::invalid(
            "calls",
            format!("call `{}`: {message}", call.name()),
        ))
    };
    if depth > MAX_REPEAT_DEPTH {
        return fail(format!("repeats nest deeper than {MAX_REPEAT_DEPTH}"));
    }
    for step in steps {
        match step {
            Step::Compute { label, tiles, .. } => {
                if tiles.is_empty() {
                    return fail(format!("compute `{label}` runs on no tile"));
                }
                let mut seen = Vec::with_capacity(tiles.len());
                for &(tile, entry) in tiles {
                    let Some(image) = package.tile(tile) else {
                        return fail(format!(
                            "compute `{label}` runs on tile {tile}, which is not one of the package's tiles"
                        ));
                    };
                    let in_code = image.segments.iter().any(|s| {
                        s.kind == SegmentKind::Code
                            && entry >= s.address
                            && u64::from(entry) < u64::from(s.address) + u64::from(s.bytes())
                    });
                    if !in_code || entry % 4 != 0 {
                        return fail(format!(
                            "compute `{label}` enters tile {tile} at {entry:#x}, which is not an aligned address in its code"
                        ));
                    }
                    seen.push(tile);
                }
                seen.sort_unstable();
                if seen.windows(2).any(|w| w[0] == w[1]) {
                    return fail(format!("compute `{label}` lists a tile twice"));
                }
            }
            Step::Exchange { program } => {
                if *program as usize >= package.exchanges.len() {
                    return fail(format!(
                        "exchange program {program} does not exist ({} programs)",
                        package.exchanges.len()
                    ));
                }
            }
            Step::Repeat { count, body } => {
                if *count == 0 {
                    return fail("a repeat runs zero times".into());
                }
                if body.is_empty() {
                    // Nothing to run, but a loop of four billion turns.
                    return fail("a repeat has no steps".into());
                }
                self::steps(package, call, body, depth + 1)?;
            }
            Step::HostWrite { binding } | Step::HostRead { binding } => {
                if *binding as usize >= package.bindings.len() {
                    return fail(format!(
                        "binding {binding} does not exist ({} bindings)",
                        package.bindings.len()
                    ));
                }
            }
        }
    }
    Ok(())
}

fn profile(package: &Package) -> Result<(), PackageError> {
    let layout = &package.profile;
    let preorders: BTreeMap<Call, Vec<&Step>> = Call::ALL
        .into_iter()
        .map(|call| (call, package.call(call).preorder()))
        .collect();
    for entry in &layout.steps {
        let fail = |message: String| {
            Err(PackageError::invalid(
                "profile",
                format!(
                    "call `{}` step {}: {message}",
                    entry.call.name(),
                    entry.step
                ),
            ))
        };
        let Some(Step::Compute { tiles, .. }) = preorders[&entry.call].get(entry.step as usize)
        else {
            return fail("is not a compute step".into());
        };
        for &(tile, kernel) in &entry.tiles {
            if !tiles.iter().any(|&(t, _)| t == tile) {
                return fail(format!("tile {tile} does not take part in the step"));
            }
            if kernel as usize >= layout.kernels.len() {
                return fail(format!("kernel {kernel} is not in the kernel list"));
            }
        }
    }
    report_fields(package, &preorders)
}

/// The fields only reports read: estimates, exchange operations and
/// placements must name steps and tiles that exist.
fn report_fields(
    package: &Package,
    preorders: &BTreeMap<Call, Vec<&Step>>,
) -> Result<(), PackageError> {
    let layout = &package.profile;
    let fail = |message: String| Err(PackageError::invalid("profile", message));
    for entry in &layout.estimates {
        let Some(Step::Compute { tiles, .. }) = preorders[&entry.call].get(entry.step as usize)
        else {
            return fail(format!(
                "estimates of call `{}` step {}: not a compute step",
                entry.call.name(),
                entry.step
            ));
        };
        if let Some((tile, _)) = entry
            .tiles
            .iter()
            .find(|(tile, _)| !tiles.iter().any(|(t, _)| t == tile))
        {
            return fail(format!(
                "estimates of call `{}` step {}: tile {tile} does not take part in the step",
                entry.call.name(),
                entry.step
            ));
        }
    }
    for entry in &layout.exchange_ops {
        if !matches!(
            preorders[&entry.call].get(entry.step as usize),
            Some(Step::Exchange { .. })
        ) {
            return fail(format!(
                "operation `{}` of call `{}` step {}: not an exchange step",
                entry.op,
                entry.call.name(),
                entry.step
            ));
        }
    }
    let run_steps = preorders[&Call::Run].len() as u32;
    let mut previous = None;
    for memory in &layout.memory {
        if package.tile(memory.tile).is_none() || previous >= Some(memory.tile) {
            return fail(format!(
                "placement of tile {}: not a package tile, out of order or listed twice",
                memory.tile
            ));
        }
        previous = Some(memory.tile);
        for buffer in &memory.buffers {
            if buffer.first_step > buffer.last_step || buffer.last_step >= run_steps {
                return fail(format!(
                    "placement of tile {}: {} lives in steps {}..={} of a {run_steps}-step run",
                    memory.tile, buffer.name, buffer.first_step, buffer.last_step
                ));
            }
        }
    }
    Ok(())
}
