//! Run-at-a-time exchange lowering: which buffer holds each element of an
//! activation, and the transfers that gather a piece from those holders.
//!
//! Both work on runs of slots ([`Piece::for_each_run`]) mapped through a
//! view affinely ([`View::base_run`]), so the per-element work left is one
//! table write or read; contiguous stretches of a home buffer are found by
//! a precomputed length instead of element by element.

use super::layout::{flat_index, Piece};
use super::program::{Buffer, BufferId, Transfer};
use super::view::View;
use std::collections::HashMap;
use std::ops::Range;

/// For each element of a materialised activation: the home buffer and slot
/// holding it, and how many elements from it on sit in the same buffer at
/// consecutive slots (so a gather of consecutive elements takes them as one
/// transfer without visiting each).
#[derive(Debug)]
pub(super) struct OwnerTable {
    owners: Owners,
}

#[derive(Debug)]
enum Owners {
    /// One entry per element: its holder, and the length of the stretch of
    /// consecutive slots from it (at least one).
    Elements {
        owner: Vec<(u32, u32)>,
        contiguous: Vec<u32>,
    },
    /// The homes' stretches of consecutive elements at consecutive slots,
    /// sorted, disjoint and covering the tensor: stretch i starts at
    /// element `first[i]` (held at `holder[i]`) and ends where the next
    /// starts. A tensor held in long stretches (a product's channel blocks
    /// hold 16 elements at a time) needs a fraction of a table per element.
    Stretches {
        first: Vec<usize>,
        holder: Vec<(u32, u32)>,
        element_count: usize,
    },
}

/// A table of stretches is used when they average at least this many
/// elements; shorter ones (homes read along a strided dimension) keep one
/// entry per element, whose lookups cost nothing.
const MIN_MEAN_STRETCH: usize = 8;

impl OwnerTable {
    /// The table of a tensor with `element_count` elements held by `homes`
    /// (later homes win where two hold the same element). An element no
    /// home holds is returned as the error.
    pub(super) fn new<'b>(
        element_count: usize,
        homes: impl IntoIterator<Item = (BufferId, &'b Buffer)>,
    ) -> Result<OwnerTable, usize> {
        let homes: Vec<(BufferId, &Buffer)> = homes.into_iter().collect();
        if let Some(owners) = Self::stretches(element_count, &homes)? {
            return Ok(OwnerTable { owners });
        }
        let mut owner = vec![(u32::MAX, 0u32); element_count];
        for &(id, buffer) in &homes {
            let coordinates = &buffer.coordinates;
            buffer.piece.for_each_run(|run| {
                let first = flat_index(coordinates, run.index);
                let stride: usize = coordinates[run.dim + 1..].iter().product();
                let holders = (run.slot as u32..).map(|slot| (id.0, slot));
                if stride == 1 {
                    for (entry, holder) in owner[first..first + run.len].iter_mut().zip(holders) {
                        *entry = holder;
                    }
                } else {
                    for (t, holder) in holders.take(run.len).enumerate() {
                        owner[first + t * stride] = holder;
                    }
                }
            });
        }
        if let Some(element) = owner.iter().position(|&(b, _)| b == u32::MAX) {
            return Err(element);
        }
        let mut contiguous = vec![1u32; element_count];
        for element in (0..element_count.saturating_sub(1)).rev() {
            let ((buffer, slot), next) = (owner[element], owner[element + 1]);
            if next == (buffer, slot.wrapping_add(1)) {
                contiguous[element] = contiguous[element + 1] + 1;
            }
        }
        Ok(OwnerTable {
            owners: Owners::Elements { owner, contiguous },
        })
    }

    /// The table as sorted stretches, when the homes hold the tensor in
    /// stretches long enough on average and no two homes hold the same
    /// element (where they do, the later must win, which the per-element
    /// table settles); `None` otherwise. An element no home holds is the
    /// error, as for the per-element table: the first such.
    fn stretches(
        element_count: usize,
        homes: &[(BufferId, &Buffer)],
    ) -> Result<Option<Owners>, usize> {
        let budget = element_count / MIN_MEAN_STRETCH;
        let mut stretches: Vec<(usize, usize, (u32, u32))> = Vec::new();
        let mut short = false;
        for &(id, buffer) in homes {
            let coordinates = &buffer.coordinates;
            buffer.piece.for_each_run(|run| {
                if short {
                    return;
                }
                let first = flat_index(coordinates, run.index);
                let stride: usize = coordinates[run.dim + 1..].iter().product();
                let holder = (id.0, run.slot as u32);
                match stretches.last_mut() {
                    // A run continuing the previous one in both the tensor
                    // and the buffer extends its stretch.
                    Some((start, len, (b, slot)))
                        if stride == 1
                            && *b == id.0
                            && *start + *len == first
                            && *slot as usize + *len == run.slot =>
                    {
                        *len += run.len;
                    }
                    _ if stride == 1 => stretches.push((first, run.len, holder)),
                    _ => short = true,
                }
                short |= stretches.len() > budget;
            });
            if short {
                return Ok(None);
            }
        }
        stretches.sort_unstable_by_key(|&(first, _, _)| first);
        let mut end = 0;
        for &(first, len, _) in &stretches {
            match first.cmp(&end) {
                std::cmp::Ordering::Less => return Ok(None),
                std::cmp::Ordering::Greater => return Err(end),
                std::cmp::Ordering::Equal => end = first + len,
            }
        }
        if end < element_count {
            return Err(end);
        }
        let (first, holder) = stretches
            .into_iter()
            .map(|(first, _, holder)| (first, holder))
            .unzip();
        Ok(Some(Owners::Stretches {
            first,
            holder,
            element_count,
        }))
    }

    /// The holder (buffer, slot) of `element` and how many elements from it
    /// on sit at consecutive slots of that buffer. `hint` is the stretch
    /// the previous lookup found: a walk in element order finds the next
    /// one there or just after it without searching.
    fn lookup(&self, element: usize, hint: &mut usize) -> ((u32, u32), usize) {
        match &self.owners {
            Owners::Elements { owner, contiguous } => {
                (owner[element], contiguous[element] as usize)
            }
            Owners::Stretches {
                first,
                holder,
                element_count,
            } => {
                let end = |i: usize| first.get(i + 1).copied().unwrap_or(*element_count);
                let within = |i: usize| i < first.len() && first[i] <= element && element < end(i);
                let i = if within(*hint) {
                    *hint
                } else if within(*hint + 1) {
                    *hint + 1
                } else {
                    first.partition_point(|&f| f <= element) - 1
                };
                *hint = i;
                let (buffer, slot) = holder[i];
                let offset = element - first[i];
                ((buffer, slot + offset as u32), end(i) - element)
            }
        }
    }
}

/// A transfer to one destination, before transfers of the same source
/// bytes are merged into broadcasts (plain data, so gathering allocates
/// nothing per transfer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Gather {
    pub source: u32,
    pub source_offset: u32,
    pub bytes: u32,
    pub destination: BufferId,
    pub offset: u32,
}

/// Adds the transfers that fill `piece` of buffer `destination` from the
/// homes in `owners`, one per run contiguous in both source and destination.
///
/// Slots are taken in address order and each stretch is merged into the
/// previous transfer when both sides continue it, so the transfers are
/// exactly those of an element-by-element walk.
pub(super) fn fill(
    piece: &Piece,
    view: &View,
    owners: &OwnerTable,
    element_bytes: u32,
    destination: BufferId,
    transfers: &mut Vec<Gather>,
) {
    let start = transfers.len();
    let mut at: Vec<usize> = Vec::with_capacity(piece.extent.len());
    let mut hint = 0;
    piece.for_each_run(|run| {
        at.clear();
        at.extend_from_slice(run.index);
        let mut done = 0;
        while done < run.len {
            at[run.dim] = run.index[run.dim] + done;
            let (first, stride, count) = view.base_run(&at, run.dim, run.len - done);
            let slot = run.slot + done;
            let mut t = 0;
            while t < count {
                let element = first + t * stride;
                let ((source, source_slot), contiguous) = owners.lookup(element, &mut hint);
                let stretch = if stride == 1 {
                    contiguous.min(count - t)
                } else {
                    1
                };
                let source_offset = source_slot * element_bytes;
                let offset = (slot + t) as u32 * element_bytes;
                let bytes = stretch as u32 * element_bytes;
                t += stretch;
                if let Some(last) = transfers[start..].last_mut() {
                    if last.source == source
                        && last.source_offset + last.bytes == source_offset
                        && last.offset + last.bytes == offset
                    {
                        last.bytes += bytes;
                        continue;
                    }
                }
                transfers.push(Gather {
                    source,
                    source_offset,
                    bytes,
                    destination,
                    offset,
                });
            }
            done += count;
        }
    });
}

/// Adds the transfers that fill `piece` of buffer `destination` from the
/// one buffer `source`, whose `source_piece` (in the same coordinates)
/// holds every element of `piece`: exactly the transfers [`fill`] makes
/// with that buffer as the only home, found from the two layouts' slot
/// arithmetic instead of an owner table over the whole tensor. An element
/// the source does not hold is returned as the error.
pub(super) fn copy_from(
    source: BufferId,
    source_piece: &Piece,
    piece: &Piece,
    element_bytes: u32,
    destination: BufferId,
    transfers: &mut Vec<Gather>,
) -> Result<(), Vec<usize>> {
    let start = transfers.len();
    let mut missing = None;
    let mut at: Vec<usize> = Vec::with_capacity(piece.extent.len());
    piece.for_each_run(|run| {
        if missing.is_some() {
            return;
        }
        at.clear();
        at.extend_from_slice(run.index);
        let mut done = 0;
        while done < run.len {
            at[run.dim] = run.index[run.dim] + done;
            let Some(first) = source_piece.slot_of(&at) else {
                missing = Some(at.clone());
                return;
            };
            // Slots grow strictly along a dimension, so the first `len`
            // elements of the rest sit at consecutive source slots exactly
            // when the last of them is at `first + len - 1`: the longest
            // such stretch is the whole rest, or else found by bisection
            // (a source block boundary inside the run ends it).
            let consecutive = |at: &mut Vec<usize>, len: usize| {
                at[run.dim] = run.index[run.dim] + done + len - 1;
                source_piece.slot_of(at) == Some(first + len - 1)
            };
            let rest = run.len - done;
            let (mut stretch, mut over) = match consecutive(&mut at, rest) {
                true => (rest, rest + 1),
                false => (1, rest),
            };
            while over - stretch > 1 {
                let len = (stretch + over) / 2;
                match consecutive(&mut at, len) {
                    true => stretch = len,
                    false => over = len,
                }
            }
            let (source_offset, offset, bytes) = (
                first as u32 * element_bytes,
                (run.slot + done) as u32 * element_bytes,
                stretch as u32 * element_bytes,
            );
            done += stretch;
            if let Some(last) = transfers[start..].last_mut() {
                if last.source_offset + last.bytes == source_offset
                    && last.offset + last.bytes == offset
                {
                    last.bytes += bytes;
                    continue;
                }
            }
            transfers.push(Gather {
                source: source.0,
                source_offset,
                bytes,
                destination,
                offset,
            });
        }
    });
    missing.map_or(Ok(()), Err)
}

/// The gathers of one exchange phase, before they are merged into
/// broadcasts. A demand that repeats an earlier one of the phase (the same
/// piece through the same view, into another tile) would produce the same
/// gathers into another buffer; it is recorded as a mirror of the earlier
/// fill instead of being filled and stored again (on a full chip one
/// operand piece is often wanted by dozens of tiles).
#[derive(Debug, Default)]
pub(super) struct Gathers {
    /// The gathers, one destination each, in the order they were made.
    pub list: Vec<Gather>,
    /// Copies of earlier gathers into other buffers, each standing where
    /// its copies would have been appended to `list`.
    mirrors: Vec<Mirror>,
    /// The earlier fills a repeated demand may mirror, by piece and view.
    fills: HashMap<(Piece, View), Range<usize>>,
}

/// The gathers `list[range]` again, into `destination` at the same
/// offsets, standing before `list[at]`, less those from the buffers in
/// `skip` (sorted): the destination's tile holds them and rearranges them
/// itself.
#[derive(Debug)]
struct Mirror {
    at: usize,
    range: Range<usize>,
    destination: BufferId,
    skip: Vec<u32>,
}

impl Mirror {
    /// The positions in `list` of the gathers this mirror copies.
    fn copied<'a>(&'a self, list: &'a [Gather]) -> impl Iterator<Item = usize> + 'a {
        self.range
            .clone()
            .filter(|&p| self.skip.binary_search(&list[p].source).is_err())
    }
}

impl From<Vec<Gather>> for Gathers {
    fn from(list: Vec<Gather>) -> Gathers {
        Gathers {
            list,
            ..Gathers::default()
        }
    }
}

impl Gathers {
    pub(super) fn is_empty(&self) -> bool {
        self.list.is_empty() && self.mirrors.is_empty()
    }

    /// Where in `list` an earlier fill of `piece` through `view` stands,
    /// if one was recorded.
    pub(super) fn earlier_fill(&self, piece: &Piece, view: &View) -> Option<Range<usize>> {
        self.fills.get(&(piece.clone(), view.clone())).cloned()
    }

    /// Records `list[start..]` as the fill of `piece` through `view`, for
    /// later demands of the same to mirror (the first fill stays).
    pub(super) fn record_fill(&mut self, piece: &Piece, view: &View, start: usize) {
        let end = self.list.len();
        self.fills
            .entry((piece.clone(), view.clone()))
            .or_insert(start..end);
    }

    /// Fills `destination` with the gathers of the earlier fill at
    /// `range` ([`Gathers::earlier_fill`]), less those from the buffers in
    /// `skip`.
    pub(super) fn mirror(
        &mut self,
        range: Range<usize>,
        destination: BufferId,
        mut skip: Vec<u32>,
    ) {
        skip.sort_unstable();
        skip.dedup();
        self.mirrors.push(Mirror {
            at: self.list.len(),
            range,
            destination,
            skip,
        });
    }

    /// Merges gathers of the same source bytes into one broadcast each,
    /// keeping first-seen order (of the transfers and of each broadcast's
    /// destinations), mirrors counted where they stand.
    ///
    /// Sorting (key, position) pairs groups equal keys with their first
    /// occurrence first, which gives the same result as a first-seen hash
    /// map without hashing every transfer. Mirrored gathers are not sorted:
    /// each joins the group of the gather it copies, which came first.
    pub(super) fn merge_broadcasts(self) -> Vec<Transfer> {
        let Gathers { list, mirrors, .. } = self;
        let (first, mut group_size) = leaders(&list);
        for mirror in &mirrors {
            for position in mirror.copied(&list) {
                group_size[first[position] as usize] += 1;
            }
        }
        let groups = group_size.iter().filter(|&&size| size > 0).count();
        let mut merged: Vec<Transfer> = Vec::with_capacity(groups);
        // Position in `merged` of each gather that leads its group.
        let mut slot_of = vec![0u32; list.len()];
        // A mirror's gathers join the broadcasts their originals lead.
        let add_mirror = |merged: &mut Vec<Transfer>, slot_of: &[u32], mirror: &Mirror| {
            for copied in mirror.copied(&list) {
                let slot = slot_of[first[copied] as usize] as usize;
                merged[slot]
                    .destinations
                    .push((mirror.destination, list[copied].offset));
            }
        };
        let mut mirrors = mirrors.iter().peekable();
        for (position, t) in list.iter().enumerate() {
            while let Some(mirror) = mirrors.next_if(|m| m.at == position) {
                add_mirror(&mut merged, &slot_of, mirror);
            }
            let leader = first[position] as usize;
            if leader == position {
                slot_of[position] = merged.len() as u32;
                let mut destinations = Vec::with_capacity(group_size[position] as usize);
                destinations.push((t.destination, t.offset));
                merged.push(Transfer {
                    source: BufferId(t.source),
                    source_offset: t.source_offset,
                    bytes: t.bytes,
                    destinations,
                });
            } else {
                merged[slot_of[leader] as usize]
                    .destinations
                    .push((t.destination, t.offset));
            }
        }
        for mirror in mirrors {
            add_mirror(&mut merged, &slot_of, mirror);
        }
        merged
    }
}

/// For each gather, the position of the first one with the same source
/// bytes; and for each such leader, how many gathers share them.
fn leaders(list: &[Gather]) -> (Vec<u32>, Vec<u32>) {
    // Counting sort by source buffer first: each bucket is then small and
    // sorted alone on the rest of the key, which is cheaper than sorting
    // every gather of a phase at once.
    let buckets = list
        .iter()
        .map(|t| t.source as usize + 1)
        .max()
        .unwrap_or(0);
    let mut starts = vec![0usize; buckets + 1];
    for t in list {
        starts[t.source as usize + 1] += 1;
    }
    for b in 1..starts.len() {
        starts[b] += starts[b - 1];
    }
    let mut order = vec![0u128; list.len()];
    let mut next = starts.clone();
    for (position, t) in list.iter().enumerate() {
        order[next[t.source as usize]] =
            (u128::from(t.source_offset) << 64) | (u128::from(t.bytes) << 32) | position as u128;
        next[t.source as usize] += 1;
    }
    let mut first = vec![0u32; list.len()];
    let mut group_size = vec![0u32; list.len()];
    for bucket in starts.windows(2) {
        let bucket = &mut order[bucket[0]..bucket[1]];
        bucket.sort_unstable();
        for group in bucket.chunk_by(|a, b| a >> 32 == b >> 32) {
            let leader = (group[0] & u128::from(u32::MAX)) as u32;
            group_size[leader as usize] = group.len() as u32;
            for &member in group {
                first[(member & u128::from(u32::MAX)) as usize] = leader;
            }
        }
    }
    (first, group_size)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{DType, TensorId};
    use crate::lower::layout::Layout;
    use crate::lower::program::BufferRole;
    use crate::partition::MemoryClass;
    use std::collections::HashMap;

    const SHAPE: [usize; 2] = [6, 10];

    fn home(start: [usize; 2], extent: [usize; 2]) -> Buffer {
        Buffer {
            tile: 0,
            dtype: DType::F16,
            piece: Piece::row_major(start.to_vec(), extent.to_vec()),
            coordinates: SHAPE.to_vec(),
            class: MemoryClass::Standard,
            role: BufferRole::Activation {
                tensor: TensorId(0),
            },
        }
    }

    /// Row blocks (each home one contiguous stretch), column blocks
    /// (every row of a home a separate stretch) and overlapping row blocks
    /// (the later home wins the rows both hold).
    fn homes() -> [Vec<Buffer>; 3] {
        [
            vec![
                home([0, 0], [2, 10]),
                home([2, 0], [2, 10]),
                home([4, 0], [2, 10]),
            ],
            vec![home([0, 0], [6, 4]), home([0, 4], [6, 6])],
            vec![home([0, 0], [4, 10]), home([2, 0], [4, 10])],
        ]
    }

    /// Long stretches get a table of stretches; short ones, or homes that
    /// overlap, one entry per element.
    #[test]
    fn owner_tables_keep_stretches_when_they_are_long_and_disjoint() {
        let kinds: Vec<bool> = homes()
            .iter()
            .map(|homes| {
                let table = OwnerTable::new(60, homes.iter().map(|b| (BufferId(0), b)))
                    .expect("the homes cover the tensor");
                matches!(table.owners, Owners::Stretches { .. })
            })
            .collect();
        assert_eq!(kinds, [true, false, false]);
    }

    /// The element-by-element walk lowering did before it worked in runs.
    fn reference_fill(piece: &Piece, view: &View, homes: &[Buffer]) -> Vec<Gather> {
        let mut owners = vec![(u32::MAX, 0u32); SHAPE.iter().product()];
        for (id, buffer) in homes.iter().enumerate() {
            buffer.piece.for_each_slot(|slot, index| {
                if let Some(index) = index {
                    owners[flat_index(&buffer.coordinates, index)] = (id as u32, slot as u32);
                }
            });
        }
        let mut transfers: Vec<Gather> = Vec::new();
        piece.for_each_slot(|slot, index| {
            let Some(index) = index else { return };
            let (source, source_slot) = owners[view.base_flat_index(index)];
            let (source_offset, offset) = (source_slot * 2, slot as u32 * 2);
            if let Some(last) = transfers.last_mut() {
                if last.source == source
                    && last.source_offset + last.bytes == source_offset
                    && last.offset + last.bytes == offset
                {
                    last.bytes += 2;
                    return;
                }
            }
            transfers.push(Gather {
                source,
                source_offset,
                bytes: 2,
                destination: BufferId(99),
                offset,
            });
        });
        transfers
    }

    fn views() -> Vec<View> {
        let base = View::identity(TensorId(0), &SHAPE, &SHAPE);
        vec![
            base.clone(),
            base.clone().transposed_last_two(),
            base.clone().reshaped(&[3, 20]),
            base.clone().reshaped(&[2, 3, 10]).transposed_last_two(),
            base.clone().broadcast_to(&[2, 6, 10]),
            View::identity(TensorId(0), &SHAPE, &[60])
                .reshaped(&[60, 1])
                .broadcast_to(&[60, 3]),
        ]
    }

    fn pieces(shape: &[usize]) -> Vec<Piece> {
        let rank = shape.len();
        let whole = Piece::row_major(vec![0; rank], shape.to_vec());
        let mut start = vec![0; rank];
        let mut extent = shape.to_vec();
        start[rank - 1] = 1;
        extent[rank - 1] -= 1;
        if rank > 1 {
            start[rank - 2] = shape[rank - 2] / 2;
            extent[rank - 2] -= shape[rank - 2] / 2;
        }
        let mut inner = vec![
            whole.clone(),
            Piece::row_major(start.clone(), extent.clone()),
        ];
        inner.push(Piece::padded_rows(start.clone(), extent.clone(), 8));
        if rank >= 2 {
            for k in [4, 8] {
                inner.push(Piece {
                    start: start.clone(),
                    extent: extent.clone(),
                    layout: Layout::AmpWeights { k },
                });
            }
            for layout in [Layout::KBlocks { k: 8 }, Layout::ChannelBlocks] {
                inner.push(Piece {
                    start: start.clone(),
                    extent: extent.clone(),
                    layout,
                });
            }
        }
        inner
    }

    #[test]
    fn gathers_equal_the_element_by_element_walk() {
        for homes in homes() {
            let table = OwnerTable::new(
                60,
                homes
                    .iter()
                    .enumerate()
                    .map(|(id, b)| (BufferId(id as u32), b)),
            )
            .expect("the homes cover the tensor");
            for view in views() {
                for piece in pieces(&view.shape) {
                    let mut gathers = Vec::new();
                    fill(&piece, &view, &table, 2, BufferId(99), &mut gathers);
                    assert_eq!(
                        gathers,
                        reference_fill(&piece, &view, &homes),
                        "{piece:?} through {view:?}"
                    );
                }
            }
        }
    }

    /// One source holding the whole tensor in any layout: the copies
    /// equal the element-by-element walk with that source as the home.
    #[test]
    fn copies_from_one_buffer_equal_the_element_by_element_walk() {
        let view = View::identity(TensorId(0), &SHAPE, &SHAPE);
        let layouts = pieces(&SHAPE).into_iter().map(|p| p.layout);
        for layout in layouts.chain([Layout::RowBlocks]) {
            let whole = Piece {
                start: vec![0, 0],
                extent: SHAPE.to_vec(),
                layout,
            };
            let mut source = home([0, 0], SHAPE);
            source.piece = whole.clone();
            for piece in pieces(&SHAPE) {
                let mut copies = Vec::new();
                copy_from(BufferId(0), &whole, &piece, 2, BufferId(99), &mut copies)
                    .expect("the source holds the piece");
                assert_eq!(
                    copies,
                    reference_fill(&piece, &view, std::slice::from_ref(&source)),
                    "{piece:?} from {whole:?}"
                );
            }
        }
    }

    #[test]
    fn an_element_the_source_lacks_is_reported() {
        let source = Piece::row_major(vec![0, 0], vec![6, 4]);
        let piece = Piece::row_major(vec![2, 2], vec![2, 3]);
        let mut copies = Vec::new();
        let missing = copy_from(BufferId(0), &source, &piece, 2, BufferId(9), &mut copies);
        assert_eq!(missing, Err(vec![2, 4]));
    }

    #[test]
    fn an_element_no_home_holds_is_reported() {
        let homes = [home([0, 0], [2, 10]), home([3, 0], [3, 10])];
        let table = OwnerTable::new(60, homes.iter().map(|b| (BufferId(0), b)));
        assert_eq!(table.err(), Some(20));
    }

    /// A 4-byte gather from `source` into buffer `destination`.
    fn gather(source: u32, source_offset: u32, destination: u32, offset: u32) -> Gather {
        Gather {
            source,
            source_offset,
            bytes: 4,
            destination: BufferId(destination),
            offset,
        }
    }

    /// Mirrored fills merge exactly as the gathers they stand for would.
    #[test]
    fn mirrors_merge_as_their_copies_would() {
        let piece = Piece::row_major(vec![0, 0], vec![1, 3]);
        let view = View::identity(TensorId(0), &[1, 3], &[1, 3]);
        let into = |destination| {
            vec![
                gather(1, 0, destination, 0),
                gather(2, 4, destination, 4),
                gather(1, 8, destination, 8),
            ]
        };
        let mut mirrored = Gathers::from(vec![gather(2, 4, 9, 0)]);
        let mut expanded = mirrored.list.clone();
        let start = mirrored.list.len();
        mirrored.list.extend(into(10));
        mirrored.record_fill(&piece, &view, start);
        expanded.extend(into(10));
        let earlier = mirrored
            .earlier_fill(&piece, &view)
            .expect("a recorded fill");
        assert_eq!(earlier, 1..4);
        mirrored.mirror(earlier.clone(), BufferId(11), Vec::new());
        expanded.extend(into(11));
        mirrored.list.push(gather(1, 8, 12, 0));
        expanded.push(gather(1, 8, 12, 0));
        // Buffer 13's tile holds source 1: only source 2's gather remains.
        mirrored.mirror(earlier, BufferId(13), vec![1, 1]);
        expanded.push(gather(2, 4, 13, 4));
        assert_eq!(
            mirrored.merge_broadcasts(),
            Gathers::from(expanded).merge_broadcasts()
        );
    }

    #[test]
    fn broadcasts_merge_in_first_seen_order() {
        let gathers = vec![
            gather(2, 0, 10, 0),
            gather(1, 8, 10, 4),
            gather(2, 0, 11, 0),
            gather(1, 4, 11, 4),
            gather(1, 8, 12, 0),
            gather(2, 0, 12, 4),
        ];
        // What a first-seen hash map gives.
        let mut expected: Vec<Transfer> = Vec::new();
        let mut seen = HashMap::new();
        for g in &gathers {
            let key = (g.source, g.source_offset, g.bytes);
            match seen.get(&key) {
                Some(&i) => {
                    let t: &mut Transfer = &mut expected[i];
                    t.destinations.push((g.destination, g.offset))
                }
                None => {
                    seen.insert(key, expected.len());
                    expected.push(Transfer {
                        source: BufferId(g.source),
                        source_offset: g.source_offset,
                        bytes: g.bytes,
                        destinations: vec![(g.destination, g.offset)],
                    });
                }
            }
        }
        let merged = Gathers::from(gathers).merge_broadcasts();
        assert_eq!(merged, expected);
        assert_eq!(merged.len(), 3);
        assert_eq!(
            merged[0].destinations,
            vec![(BufferId(10), 0), (BufferId(11), 0), (BufferId(12), 4)]
        );
    }
}
