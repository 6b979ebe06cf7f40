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

/// For each element of a materialised activation: the home buffer and slot
/// holding it.
#[derive(Debug)]
pub(super) struct OwnerTable {
    /// Element → (buffer, slot).
    owner: Vec<(u32, u32)>,
    /// Element → how many elements from it on sit in the same buffer at
    /// consecutive slots (at least one), so a gather of consecutive
    /// elements takes them as one transfer without visiting each.
    contiguous: Vec<u32>,
}

impl OwnerTable {
    /// The table of a tensor with `element_count` elements held by `homes`
    /// (later homes win where two hold the same element). An element no
    /// home holds is returned as the error.
    pub(super) fn new<'b>(
        element_count: usize,
        homes: impl IntoIterator<Item = (BufferId, &'b Buffer)>,
    ) -> Result<OwnerTable, usize> {
        let mut owner = vec![(u32::MAX, 0u32); element_count];
        for (id, buffer) in homes {
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
        Ok(OwnerTable { owner, contiguous })
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
                let (source, source_slot) = owners.owner[element];
                let stretch = if stride == 1 {
                    (owners.contiguous[element] as usize).min(count - t)
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

/// Merges transfers of the same source bytes into one broadcast each,
/// keeping first-seen order (of the transfers and of each broadcast's
/// destinations).
///
/// Sorting (key, position) pairs groups equal keys with their first
/// occurrence first, which gives the same result as a first-seen hash map
/// without hashing every transfer.
pub(super) fn merge_broadcasts(transfers: Vec<Gather>) -> Vec<Transfer> {
    let key = |t: &Gather| {
        (u128::from(t.source) << 96)
            | (u128::from(t.source_offset) << 64)
            | (u128::from(t.bytes) << 32)
    };
    let mut order: Vec<u128> = transfers
        .iter()
        .enumerate()
        .map(|(position, t)| key(t) | position as u128)
        .collect();
    order.sort_unstable();
    // For each transfer, the position of the first one with its key.
    let mut first = vec![0usize; transfers.len()];
    for group in order.chunk_by(|a, b| a >> 32 == b >> 32) {
        let leader = (group[0] & u128::from(u32::MAX)) as usize;
        for &member in group {
            first[(member & u128::from(u32::MAX)) as usize] = leader;
        }
    }
    let mut merged: Vec<Transfer> = Vec::new();
    // Position in `merged` of each transfer that leads its group.
    let mut slot_of = vec![0usize; transfers.len()];
    for (position, t) in transfers.into_iter().enumerate() {
        let leader = first[position];
        if leader == position {
            slot_of[position] = merged.len();
            merged.push(Transfer {
                source: BufferId(t.source),
                source_offset: t.source_offset,
                bytes: t.bytes,
                destinations: vec![(t.destination, t.offset)],
            });
        } else {
            merged[slot_of[leader]]
                .destinations
                .push((t.destination, t.offset));
        }
    }
    merged
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

    /// Row blocks (each home one contiguous stretch) and column blocks
    /// (every row of a home a separate stretch).
    fn homes() -> [Vec<Buffer>; 2] {
        [
            vec![
                home([0, 0], [2, 10]),
                home([2, 0], [2, 10]),
                home([4, 0], [2, 10]),
            ],
            vec![home([0, 0], [6, 4]), home([0, 4], [6, 6])],
        ]
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

    #[test]
    fn broadcasts_merge_in_first_seen_order() {
        let gather = |source, source_offset, destination, offset| Gather {
            source,
            source_offset,
            bytes: 4,
            destination: BufferId(destination),
            offset,
        };
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
        let merged = merge_broadcasts(gathers);
        assert_eq!(merged, expected);
        assert_eq!(merged.len(), 3);
        assert_eq!(
            merged[0].destinations,
            vec![(BufferId(10), 0), (BufferId(11), 0), (BufferId(12), 4)]
        );
    }
}
