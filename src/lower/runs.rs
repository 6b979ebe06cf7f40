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
                for t in 0..run.len {
                    owner[first + t * stride] = (id.0, (run.slot + t) as u32);
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
    transfers: &mut Vec<Transfer>,
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
                    if last.source.0 == source
                        && last.source_offset + last.bytes == source_offset
                        && last.destinations[0].1 + last.bytes == offset
                    {
                        last.bytes += bytes;
                        continue;
                    }
                }
                transfers.push(Transfer {
                    source: BufferId(source),
                    source_offset,
                    bytes,
                    destinations: vec![(destination, offset)],
                });
            }
            done += count;
        }
    });
}
