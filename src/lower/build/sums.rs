//! Where the reduction of a matrix product with a split inner dimension
//! sums its partials: each reducing tile's piece of the result, and the
//! buffer on that tile its partials arrive in, slice after slice.
//!
//! By default each group of tiles that computed one output shard over
//! different slices of K reduces it among themselves, tile `r` of the group
//! a band of the shard's rows ([`Lowering::band_sums`]). When the result is
//! read by whole rows (a norm, a softmax: [`row_readers`]), the tiles that
//! read it reduce it instead, each the rows it reads
//! ([`Lowering::reader_sums`]), so the rows are where the reader wants
//! them and its gather, with its exchange phase and sync, goes away.

use super::Lowering;
use crate::graph::{DType, Graph, OpId, OpKind, TensorId};
use crate::lower::layout::{flat_index, Layout, Piece};
use crate::lower::program::{Buffer, BufferId, BufferRole};
use crate::lower::runs::{copy_from, fill, Gather, OwnerTable};
use crate::lower::view::View;
use crate::lower::LowerError;
use crate::partition::{MemoryClass, Partition};
use crate::plan::cost;
use std::collections::HashMap;

/// A reducing tile, its piece of the result and its received partials.
pub(super) type Sum = (u32, Piece, BufferId);

/// For each tensor a layer or RMS norm or a softmax reads (as its first
/// input) with a rows partition in order: the row chunks
/// ([`crate::partition::row_chunks`]) of the first such reader in program
/// order.
pub(super) fn row_readers(
    graph: &Graph,
    plan_of: &dyn Fn(OpId) -> Partition,
) -> HashMap<TensorId, Vec<(u32, usize, usize)>> {
    let mut readers = HashMap::new();
    for (index, op) in graph.ops.iter().enumerate() {
        let Some(&input) = op.inputs.first() else {
            continue;
        };
        // Only the operations that need whole rows on a tile: an
        // element-wise reader takes any layout (and refinement's synthetic
        // one, `pipeline::refine`, must not move a finalist's reduction).
        let whole_rows = matches!(
            op.kind,
            OpKind::Layernorm { .. } | OpKind::Rmsnorm { .. } | OpKind::Softmax { .. }
        );
        if readers.contains_key(&input) || !whole_rows {
            continue;
        }
        if let Partition::Rows {
            rows,
            row_length,
            rows_per_tile,
            folded: false,
            ..
        } = plan_of(OpId(index as u32))
        {
            let shape = &graph.tensor(input).shape;
            let matrix_rows = crate::partition::matrix_rows(shape);
            if shape.last() == Some(&row_length)
                && shape.iter().product::<usize>() == rows * row_length
            {
                let chunks = crate::partition::row_chunks(rows, rows_per_tile, matrix_rows, false);
                readers.insert(input, chunks);
            }
        }
    }
    readers
}

/// Moves `gathers`, made for a piece's slots, to its slice that starts
/// `slots` in of the received buffer.
fn into_slice(gathers: &mut [Gather], slots: usize, element_bytes: u32) {
    for gather in gathers {
        gather.offset += slots as u32 * element_bytes;
    }
}

impl Lowering<'_> {
    /// The received buffer of `op`'s reduction on `tile` for the result's
    /// piece `kept`: `slices` copies of its slots, one per K slice.
    fn received(
        &mut self,
        op: OpId,
        (tile, kept): (u32, &Piece),
        (slices, coordinates): (usize, &[usize]),
        (dtype, class): (DType, MemoryClass),
    ) -> BufferId {
        let node = self.graph.op(op);
        self.add_buffer(Buffer {
            tile,
            dtype,
            piece: Piece {
                start: [vec![0], kept.start.clone()].concat(),
                extent: [vec![slices], kept.extent.clone()].concat(),
                layout: kept.layout,
            },
            coordinates: [&[slices][..], coordinates].concat(),
            class,
            // Numbered after the operation's inputs (an epilogue's extra
            // operands among them).
            role: BufferRole::Operand {
                op,
                operand: node.inputs.len() as u32,
            },
        })
    }

    /// Bands of each group's shard: the groups in the order the partials
    /// were made (each slice's buffers list one per group); tile `r` of a
    /// group keeps band `r` of its rows, `band` rows each.
    pub(super) fn band_sums(
        &mut self,
        op: OpId,
        partials: &[Vec<BufferId>],
        (band, coordinates): (usize, [usize; 3]),
        (accumulated, class): (DType, MemoryClass),
        transfers: &mut Vec<Gather>,
    ) -> Result<Vec<Sum>, LowerError> {
        let out = self.graph.tensor(self.graph.op(op).output);
        let slices = partials.len();
        let element_bytes = accumulated.size_bytes() as u32;
        let mut sums = Vec::new();
        for (g, &first) in partials[0].iter().enumerate() {
            let shard_piece = self.program.buffer(first).piece.clone();
            let (b0, m0, n0) = (
                shard_piece.start[0],
                shard_piece.start[1],
                shard_piece.start[2],
            );
            let (eb, em, en) = (
                shard_piece.extent[0],
                shard_piece.extent[1],
                shard_piece.extent[2],
            );
            let group_tile = self.program.buffer(first).tile;
            for r in 0..slices {
                let r0 = r * band;
                if r0 >= em {
                    continue;
                }
                let tile = group_tile + r as u32;
                let kept = Piece {
                    start: vec![b0, m0 + r0, n0],
                    extent: vec![eb, band.min(em - r0), en],
                    layout: shard_piece.layout,
                };
                let length = kept.slots();
                let received = self.received(
                    op,
                    (tile, &kept),
                    (slices, &coordinates),
                    (accumulated, class),
                );
                // Slice `s` of the group's partial sums is one buffer on
                // tile `group_tile + s` with the group's piece, so each band
                // is copied from it directly.
                for (s, slice) in partials.iter().enumerate() {
                    let source = slice[g];
                    debug_assert_eq!(self.program.buffer(source).tile, group_tile + s as u32);
                    let start = transfers.len();
                    copy_from(
                        source,
                        &self.program.buffer(source).piece,
                        &kept,
                        element_bytes,
                        received,
                        transfers,
                    )
                    .map_err(|index| LowerError::Uncovered {
                        tensor: format!("{} (partials)", out.name),
                        element: flat_index(&coordinates, &index),
                    })?;
                    into_slice(&mut transfers[start..], s * length, element_bytes);
                }
                sums.push((tile, kept, received));
            }
        }
        Ok(sums)
    }

    /// The row chunks of the result's reader ([`row_readers`]) as the
    /// reducing tiles' pieces, row-major, when the partials are in channel
    /// blocks (rows in runs of 16), each chunk lies in one matrix of the
    /// batch and is whole 64-bit words, and the busiest tile's reduction,
    /// its partials' exchange and `kernel_cycles` for its chunk, costs
    /// less than a band's ([`Self::band_sums`]: the others' partials, the
    /// copy of its own, the kernel) with the reader's gather of its rows
    /// and that phase's sync. `None` otherwise. Each slice's partials are
    /// gathered from every group that holds part of the chunk.
    pub(super) fn reader_sums(
        &mut self,
        op: OpId,
        partials: &[Vec<BufferId>],
        (band, coordinates): (usize, [usize; 3]),
        (accumulated, class): (DType, MemoryClass),
        kernel_cycles: &dyn Fn(usize) -> u64,
        transfers: &mut Vec<Gather>,
    ) -> Result<Option<Vec<Sum>>, LowerError> {
        let node = self.graph.op(op);
        let out = self.graph.tensor(node.output);
        let Some(chunks) = self.row_readers.get(&node.output).cloned() else {
            return Ok(None);
        };
        let [_, m, n] = coordinates;
        let band_slots = partials
            .first()
            .and_then(|slice| slice.first())
            .map_or(0, |&first| {
                let piece = &self.program.buffer(first).piece;
                piece.extent[0] * band * piece.extent[2]
            });
        let within =
            |&(_, first, count): &(u32, usize, usize)| first / m == (first + count - 1) / m;
        let Some(chunk) = chunks.iter().map(|c| c.2 * n).max() else {
            return Ok(None);
        };
        let slices = partials.len();
        let element_bytes = accumulated.size_bytes() as u32;
        let target = self.graph.target.spec();
        let receive = |bytes: usize| cost::exchange_cycles(target, bytes as u64);
        let eb = element_bytes as usize;
        let into_rows = receive(slices * chunk * eb) + kernel_cycles(chunk);
        let copy_rate = target.exchange.memcpy_bytes_per_cycle.max(1) as usize;
        let by_bands = receive((slices - 1) * band_slots * eb)
            + (band_slots * eb).div_ceil(copy_rate) as u64
            + kernel_cycles(band_slots)
            + receive(chunk * out.dtype.size_bytes())
            + cost::sync_cycles(target, 1);
        // Partials in row blocks (the swapped orientation) would reach rows
        // one element per transfer, each an issue of its sender.
        let channel_blocks = partials
            .iter()
            .flatten()
            .all(|&id| self.program.buffer(id).piece.layout == Layout::ChannelBlocks);
        // The kernel reads each slice's partials with 64-bit loads, one
        // slice after another: a chunk must be whole 8-byte words.
        let whole_words = |&(_, _, count): &(u32, usize, usize)| (count * n * eb).is_multiple_of(8);
        if !channel_blocks
            || !chunks.iter().all(within)
            || !chunks.iter().all(whole_words)
            || into_rows >= by_bands
        {
            return Ok(None);
        }
        let element_count = out.element_count();
        let owners = partials
            .iter()
            .map(|slice| {
                let buffers = &self.program.buffers;
                OwnerTable::new(
                    element_count,
                    slice.iter().map(|&id| (id, &buffers[id.0 as usize])),
                )
                .map_err(|element| LowerError::Uncovered {
                    tensor: format!("{} (partials)", out.name),
                    element,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let view = View::of(self.graph, node.output).reshaped(&coordinates);
        let mut sums = Vec::new();
        for (tile, first, count) in chunks {
            let kept = Piece {
                start: vec![first / m, first % m, 0],
                extent: vec![1, count, n],
                layout: Layout::RowMajor,
            };
            let length = kept.slots();
            let received = self.received(
                op,
                (tile, &kept),
                (slices, &coordinates),
                (accumulated, class),
            );
            for (s, owners) in owners.iter().enumerate() {
                let start = transfers.len();
                fill(&kept, &view, owners, element_bytes, received, transfers);
                into_slice(&mut transfers[start..], s * length, element_bytes);
            }
            sums.push((tile, kept, received));
        }
        Ok(Some(sums))
    }
}
