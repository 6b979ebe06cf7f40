//! Where the elements of a shard sit in a tile buffer.
//!
//! A [`Piece`] is a box of a logical tensor (a start and an extent per
//! dimension) stored on one tile in a [`Layout`]. Storage slots are visited
//! in address order by [`Piece::for_each_slot`], which yields the logical
//! index stored in each slot, or nothing for padding. Exchange lowering
//! walks slots, so any layout the kernels want can be produced by exchange;
//! it takes them a run at a time ([`Piece::for_each_run`]) to stay fast.

use crate::graph::MAX_RANK;
use serde::{Deserialize, Serialize};

/// Storage order of a piece.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Layout {
    /// Row-major over the box extents.
    RowMajor,
    /// AMP weight blocks over the last two dimensions `(inner, cols)` of the
    /// box: `[cols/16][inner/k][16][k]`, with `inner` padded to a multiple of
    /// `k` and `cols` to a multiple of 16; leading dimensions row-major
    /// outside. One block is the 16 output channels by `k` inputs that one
    /// AMP weight load takes.
    AmpWeights { k: usize },
    /// Row-major with the last dimension padded to a multiple of `multiple`
    /// (GEMM inputs, so a vector load never reads past a row).
    PaddedRows { multiple: usize },
    /// GEMM inputs over the last two dimensions `(rows, inner)`:
    /// `[inner/k][rows][k]`, `inner` padded to a multiple of `k`, so one AMP
    /// pass over a K block streams every row's `k` inputs contiguously.
    KBlocks { k: usize },
    /// GEMM outputs (and partials) over the last two dimensions
    /// `(rows, cols)`: `[cols/16][rows][16]`, `cols` padded to a multiple
    /// of 16, so one AMP pass streams every row's 16 channels contiguously.
    ChannelBlocks,
    /// GEMM outputs in the swapped orientation (the kernel computes the
    /// transposed product, in [`Layout::ChannelBlocks`] of its own rows and
    /// columns) over the last two dimensions `(rows, cols)`:
    /// `[rows/16][cols][16]`, `rows` padded to a multiple of 16.
    RowBlocks,
}

/// Output channels of one AMP weight block.
pub(super) const AMP_CHANNELS: usize = 16;

/// A box of a logical tensor in a layout.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Piece {
    pub start: Vec<usize>,
    pub extent: Vec<usize>,
    pub layout: Layout,
}

impl Piece {
    pub(crate) fn row_major(start: Vec<usize>, extent: Vec<usize>) -> Piece {
        Piece {
            start,
            extent,
            layout: Layout::RowMajor,
        }
    }

    #[cfg(test)]
    /// Row-major rows padded to a multiple of `multiple` elements; plain
    /// row-major when no padding is needed.
    pub(super) fn padded_rows(start: Vec<usize>, extent: Vec<usize>, multiple: usize) -> Piece {
        let layout = if extent.last().is_some_and(|&n| n % multiple == 0) {
            Layout::RowMajor
        } else {
            Layout::PaddedRows { multiple }
        };
        Piece {
            start,
            extent,
            layout,
        }
    }

    /// For a row-major piece that occupies one contiguous run of the
    /// row-major order of `coordinates`: that run as (first flat index,
    /// length). Two such pieces hold the same elements in the same order
    /// exactly when their runs are equal, whatever their coordinates.
    pub(super) fn flat_run(&self, coordinates: &[usize]) -> Option<(usize, usize)> {
        if self.layout != Layout::RowMajor {
            return None;
        }
        // After the first dimension with extent above one, every dimension
        // must be whole for the box to be one run.
        let first = self
            .extent
            .iter()
            .position(|&e| e > 1)
            .unwrap_or(self.extent.len());
        let whole = (first + 1..self.extent.len())
            .all(|d| self.start[d] == 0 && self.extent[d] == coordinates[d]);
        whole.then(|| (flat_index(coordinates, &self.start), self.elements()))
    }

    /// Logical elements in the box.
    pub(crate) fn elements(&self) -> usize {
        self.extent.iter().product()
    }

    /// Storage slots, padding included.
    pub(crate) fn slots(&self) -> usize {
        match self.layout {
            Layout::RowMajor => self.elements(),
            Layout::PaddedRows { multiple } => {
                let rank = self.extent.len();
                let rows: usize = self.extent[..rank - 1].iter().product();
                rows * self.extent[rank - 1].div_ceil(multiple) * multiple
            }
            Layout::AmpWeights { k } => {
                let rank = self.extent.len();
                let outer: usize = self.extent[..rank - 2].iter().product();
                let inner = self.extent[rank - 2].div_ceil(k) * k;
                let cols = self.extent[rank - 1].div_ceil(AMP_CHANNELS) * AMP_CHANNELS;
                outer * inner * cols
            }
            Layout::KBlocks { k } => self.blocked_slots(k),
            Layout::ChannelBlocks => self.blocked_slots(AMP_CHANNELS),
            Layout::RowBlocks => self.transposed_channel_blocks().slots(),
        }
    }

    /// A [`Layout::RowBlocks`] piece as what it is stored as: the
    /// transposed box in [`Layout::ChannelBlocks`] (the swapped GEMM's own
    /// output).
    fn transposed_channel_blocks(&self) -> Piece {
        let rank = self.extent.len();
        let (mut start, mut extent) = (self.start.clone(), self.extent.clone());
        start.swap(rank - 2, rank - 1);
        extent.swap(rank - 2, rank - 1);
        Piece {
            start,
            extent,
            layout: Layout::ChannelBlocks,
        }
    }

    /// Sets the leading (all but the last two) dimensions of `outer_index`
    /// to the `o`-th box of those dimensions in row-major order.
    fn set_outer_index(&self, o: usize, outer_index: &mut [usize]) {
        let mut rest = o;
        for d in (0..outer_index.len()).rev() {
            outer_index[d] = self.start[d] + rest % self.extent[d];
            rest /= self.extent[d];
        }
    }

    /// Slots of a layout that pads the last dimension to `block`.
    fn blocked_slots(&self, block: usize) -> usize {
        let rank = self.extent.len();
        let outer: usize = self.extent[..rank - 1].iter().product();
        outer * self.extent[rank - 1].div_ceil(block) * block
    }

    pub(crate) fn has_padding(&self) -> bool {
        self.slots() != self.elements()
    }

    /// Calls `visit(slot, index)` for every storage slot in address order,
    /// with the logical index stored there (`None` for padding).
    pub(super) fn for_each_slot(&self, mut visit: impl FnMut(usize, Option<&[usize]>)) {
        let rank = self.extent.len();
        let mut index = self.start.clone();
        match self.layout {
            Layout::RowMajor => {
                for slot in 0..self.elements() {
                    let mut rest = slot;
                    for d in (0..rank).rev() {
                        index[d] = self.start[d] + rest % self.extent[d];
                        rest /= self.extent[d];
                    }
                    visit(slot, Some(&index));
                }
            }
            Layout::PaddedRows { multiple } => {
                let row_length = self.extent[rank - 1];
                let padded = row_length.div_ceil(multiple) * multiple;
                let rows: usize = self.extent[..rank - 1].iter().product();
                for row in 0..rows {
                    let mut rest = row;
                    for d in (0..rank - 1).rev() {
                        index[d] = self.start[d] + rest % self.extent[d];
                        rest /= self.extent[d];
                    }
                    for column in 0..padded {
                        let slot = row * padded + column;
                        if column < row_length {
                            index[rank - 1] = self.start[rank - 1] + column;
                            visit(slot, Some(&index));
                        } else {
                            visit(slot, None);
                        }
                    }
                }
            }
            Layout::AmpWeights { k } => {
                let outer: usize = self.extent[..rank - 2].iter().product();
                let (inner, cols) = (self.extent[rank - 2], self.extent[rank - 1]);
                let inner_blocks = inner.div_ceil(k);
                let col_blocks = cols.div_ceil(AMP_CHANNELS);
                let mut slot = 0;
                for o in 0..outer {
                    self.set_outer_index(o, &mut index[..rank - 2]);
                    for cb in 0..col_blocks {
                        for kb in 0..inner_blocks {
                            for c in 0..AMP_CHANNELS {
                                for kk in 0..k {
                                    let (i, j) = (kb * k + kk, cb * AMP_CHANNELS + c);
                                    if i < inner && j < cols {
                                        index[rank - 2] = self.start[rank - 2] + i;
                                        index[rank - 1] = self.start[rank - 1] + j;
                                        visit(slot, Some(&index));
                                    } else {
                                        visit(slot, None);
                                    }
                                    slot += 1;
                                }
                            }
                        }
                    }
                }
            }
            Layout::KBlocks { k } => self.for_each_blocked_slot(k, &mut index, &mut visit),
            Layout::ChannelBlocks => {
                self.for_each_blocked_slot(AMP_CHANNELS, &mut index, &mut visit)
            }
            Layout::RowBlocks => {
                let transposed = self.transposed_channel_blocks();
                let mut at = transposed.start.clone();
                transposed.for_each_blocked_slot(AMP_CHANNELS, &mut at, &mut |slot, at| match at {
                    Some(at) => {
                        index.copy_from_slice(at);
                        index.swap(rank - 2, rank - 1);
                        visit(slot, Some(&index));
                    }
                    None => visit(slot, None),
                });
            }
        }
    }

    /// The storage slot holding logical `index`, or `None` when the index
    /// lies outside the box. The inverse of [`Piece::for_each_slot`].
    ///
    /// In every layout the slot grows strictly with each dimension's index
    /// when the others are fixed, so a stretch along one dimension is
    /// contiguous exactly when its last slot is its first plus its length
    /// minus one.
    pub(super) fn slot_of(&self, index: &[usize]) -> Option<usize> {
        let rank = self.extent.len();
        if index.len() != rank {
            return None;
        }
        let mut local = [0usize; MAX_RANK];
        let local = local.get_mut(..rank)?;
        for d in 0..rank {
            local[d] = index[d].checked_sub(self.start[d])?;
            if local[d] >= self.extent[d] {
                return None;
            }
        }
        if rank == 0 {
            return Some(0);
        }
        // Row-major over the leading dimensions `..upto`.
        let outer = |upto: usize| (0..upto).fold(0usize, |acc, d| acc * self.extent[d] + local[d]);
        // `[last/block][rows][block]` with `rows` and `last` the given
        // dimensions (swapped for the transposed `RowBlocks`).
        let blocked = |block: usize, rows_dim: usize, last_dim: usize| {
            let (rows, last) = (self.extent[rows_dim], self.extent[last_dim]);
            let (r, j) = (local[rows_dim], local[last_dim]);
            ((outer(rank - 2) * last.div_ceil(block) + j / block) * rows + r) * block + j % block
        };
        Some(match self.layout {
            Layout::RowMajor => outer(rank),
            Layout::PaddedRows { multiple } => {
                let pitch = self.extent[rank - 1].div_ceil(multiple) * multiple;
                outer(rank - 1) * pitch + local[rank - 1]
            }
            Layout::AmpWeights { k } if rank >= 2 && k > 0 => {
                let (inner, cols) = (self.extent[rank - 2], self.extent[rank - 1]);
                let (i, j) = (local[rank - 2], local[rank - 1]);
                let block = ((outer(rank - 2) * cols.div_ceil(AMP_CHANNELS) + j / AMP_CHANNELS)
                    * inner.div_ceil(k)
                    + i / k)
                    * AMP_CHANNELS
                    + j % AMP_CHANNELS;
                block * k + i % k
            }
            Layout::KBlocks { k } if rank >= 2 && k > 0 => blocked(k, rank - 2, rank - 1),
            Layout::ChannelBlocks if rank >= 2 => blocked(AMP_CHANNELS, rank - 2, rank - 1),
            Layout::RowBlocks if rank >= 2 => blocked(AMP_CHANNELS, rank - 1, rank - 2),
            // Blocked layouts of rank below two hold nothing.
            _ => return None,
        })
    }

    /// `[last/block][rows][block]` over the last two dimensions, leading
    /// dimensions row-major outside.
    fn for_each_blocked_slot(
        &self,
        block: usize,
        index: &mut [usize],
        visit: &mut impl FnMut(usize, Option<&[usize]>),
    ) {
        let rank = self.extent.len();
        let outer: usize = self.extent[..rank - 2].iter().product();
        let (rows, last) = (self.extent[rank - 2], self.extent[rank - 1]);
        let blocks = last.div_ceil(block);
        let mut slot = 0;
        for o in 0..outer {
            self.set_outer_index(o, &mut index[..rank - 2]);
            for b in 0..blocks {
                for r in 0..rows {
                    index[rank - 2] = self.start[rank - 2] + r;
                    for c in 0..block {
                        let j = b * block + c;
                        if j < last {
                            index[rank - 1] = self.start[rank - 1] + j;
                            visit(slot, Some(index));
                        } else {
                            visit(slot, None);
                        }
                        slot += 1;
                    }
                }
            }
        }
    }
}

impl Piece {
    /// Calls `visit(run)` for every run of storage slots that hold
    /// consecutive logical indices along one dimension, in address order.
    /// Padding slots belong to no run; together the runs visit exactly the
    /// slots [`Piece::for_each_slot`] gives an index, with the same indices.
    ///
    /// Exchange lowering and the verifier work run by run: the index
    /// arithmetic is paid once per run instead of once per element.
    pub(crate) fn for_each_run(&self, mut visit: impl FnMut(&SlotRun<'_>)) {
        let rank = self.extent.len();
        let mut index = [0usize; MAX_RANK];
        let Some(index) = index.get_mut(..rank) else {
            // Ranks above `MAX_RANK` are rejected by validation; visit
            // element by element rather than fail.
            self.for_each_slot(|slot, index| {
                if let Some(index) = index {
                    visit(&SlotRun {
                        slot,
                        index,
                        dim: index.len().saturating_sub(1),
                        len: 1,
                    });
                }
            });
            return;
        };
        if rank == 0 {
            visit(&SlotRun {
                slot: 0,
                index,
                dim: 0,
                len: 1,
            });
            return;
        }
        match self.layout {
            Layout::RowMajor | Layout::PaddedRows { .. } => {
                let row_length = self.extent[rank - 1];
                let pitch = match self.layout {
                    Layout::PaddedRows { multiple } => row_length.div_ceil(multiple) * multiple,
                    _ => row_length,
                };
                if row_length == 0 {
                    return;
                }
                // Unpadded trailing dimensions of extent 1 (a column of
                // elements, `[n, 1]`) keep consecutive indices of the
                // dimension before them in consecutive slots: the runs go
                // along that one instead of an element at a time.
                let dim = match pitch {
                    1 => self.extent[..rank - 1]
                        .iter()
                        .rposition(|&e| e > 1)
                        .unwrap_or(rank - 1),
                    _ => rank - 1,
                };
                let len = self.extent[dim];
                let row_slots = if dim == rank - 1 { pitch } else { len };
                let rows: usize = self.extent[..dim].iter().product();
                index.copy_from_slice(&self.start);
                for row in 0..rows {
                    if row > 0 {
                        // Odometer step over the leading dimensions.
                        for d in (0..dim).rev() {
                            index[d] += 1;
                            if index[d] < self.start[d] + self.extent[d] {
                                break;
                            }
                            index[d] = self.start[d];
                        }
                    }
                    visit(&SlotRun {
                        slot: row * row_slots,
                        index,
                        dim,
                        len,
                    });
                }
            }
            Layout::AmpWeights { k } => {
                if rank < 2 || k == 0 {
                    return;
                }
                let outer: usize = self.extent[..rank - 2].iter().product();
                let (inner, cols) = (self.extent[rank - 2], self.extent[rank - 1]);
                let inner_blocks = inner.div_ceil(k);
                let col_blocks = cols.div_ceil(AMP_CHANNELS);
                let mut slot = 0;
                for o in 0..outer {
                    self.set_outer_index(o, &mut index[..rank - 2]);
                    for cb in 0..col_blocks {
                        for kb in 0..inner_blocks {
                            let len = k.min(inner - kb * k);
                            for c in 0..AMP_CHANNELS {
                                let j = cb * AMP_CHANNELS + c;
                                if j < cols {
                                    index[rank - 2] = self.start[rank - 2] + kb * k;
                                    index[rank - 1] = self.start[rank - 1] + j;
                                    visit(&SlotRun {
                                        slot,
                                        index,
                                        dim: rank - 2,
                                        len,
                                    });
                                }
                                slot += k;
                            }
                        }
                    }
                }
            }
            Layout::KBlocks { k } => self.for_each_blocked_run(k, index, &mut visit),
            Layout::ChannelBlocks => self.for_each_blocked_run(AMP_CHANNELS, index, &mut visit),
            Layout::RowBlocks => {
                if rank < 2 {
                    return;
                }
                let (mut at, mut swapped) = ([0usize; MAX_RANK], [0usize; MAX_RANK]);
                let transposed = self.transposed_channel_blocks();
                transposed.for_each_blocked_run(AMP_CHANNELS, &mut at[..rank], &mut |run| {
                    let at = &mut swapped[..rank];
                    at.copy_from_slice(run.index);
                    at.swap(rank - 2, rank - 1);
                    visit(&SlotRun {
                        slot: run.slot,
                        index: at,
                        dim: if run.dim == rank - 1 {
                            rank - 2
                        } else {
                            run.dim
                        },
                        len: run.len,
                    });
                });
            }
        }
    }

    /// Runs of `[last/block][rows][block]`: one per (block, row), along the
    /// last dimension.
    fn for_each_blocked_run(
        &self,
        block: usize,
        index: &mut [usize],
        visit: &mut impl FnMut(&SlotRun<'_>),
    ) {
        let rank = self.extent.len();
        if rank < 2 || block == 0 {
            return;
        }
        let outer: usize = self.extent[..rank - 2].iter().product();
        let (rows, last) = (self.extent[rank - 2], self.extent[rank - 1]);
        let blocks = last.div_ceil(block);
        let mut slot = 0;
        for o in 0..outer {
            self.set_outer_index(o, &mut index[..rank - 2]);
            for b in 0..blocks {
                let len = block.min(last - b * block);
                for r in 0..rows {
                    index[rank - 2] = self.start[rank - 2] + r;
                    index[rank - 1] = self.start[rank - 1] + b * block;
                    visit(&SlotRun {
                        slot,
                        index,
                        dim: rank - 1,
                        len,
                    });
                    slot += block;
                }
            }
        }
    }
}

/// Slots `slot..slot + len` of a piece hold the logical indices `index`,
/// `index + e(dim)`, ..., `index + (len - 1) e(dim)`, where `e(dim)` steps
/// dimension `dim` by one.
#[derive(Debug)]
pub(crate) struct SlotRun<'a> {
    pub slot: usize,
    pub index: &'a [usize],
    pub dim: usize,
    pub len: usize,
}

/// Row-major flat index of `index` in `shape`.
pub(super) fn flat_index(shape: &[usize], index: &[usize]) -> usize {
    index
        .iter()
        .zip(shape)
        .fold(0, |flat, (&i, &extent)| flat * extent + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(piece: &Piece) -> Vec<Option<Vec<usize>>> {
        let mut out = Vec::new();
        piece.for_each_slot(|_, index| out.push(index.map(<[usize]>::to_vec)));
        out
    }

    #[test]
    fn row_major_boxes_visit_rows_in_order() {
        let piece = Piece::row_major(vec![1, 2], vec![2, 2]);
        assert_eq!(
            slots(&piece),
            vec![
                Some(vec![1, 2]),
                Some(vec![1, 3]),
                Some(vec![2, 2]),
                Some(vec![2, 3])
            ]
        );
    }

    #[test]
    fn flat_runs_identify_the_same_rows_in_other_coordinates() {
        let rows = Piece::row_major(vec![4, 0], vec![4, 64]);
        let boxed = Piece::row_major(vec![0, 4, 0], vec![1, 4, 64]);
        assert_eq!(rows.flat_run(&[64, 64]), Some((256, 256)));
        assert_eq!(boxed.flat_run(&[1, 64, 64]), Some((256, 256)));
        let columns = Piece::row_major(vec![0, 32], vec![4, 32]);
        assert_eq!(columns.flat_run(&[64, 64]), None);
    }

    #[test]
    fn padded_rows_pad_only_the_last_dimension() {
        let piece = Piece {
            start: vec![0, 0],
            extent: vec![2, 3],
            layout: Layout::PaddedRows { multiple: 4 },
        };
        assert_eq!(piece.slots(), 8);
        let visited = slots(&piece);
        assert_eq!(visited[2], Some(vec![0, 2]));
        assert_eq!(visited[3], None);
        assert_eq!(visited[4], Some(vec![1, 0]));
    }

    #[test]
    fn amp_weight_blocks_pad_inner_and_columns() {
        let piece = Piece {
            start: vec![0, 0],
            extent: vec![3, 17],
            layout: Layout::AmpWeights { k: 2 },
        };
        assert_eq!(piece.slots(), 4 * 32);
        assert!(piece.has_padding());
        let visited = slots(&piece);
        // First block: channel 0 takes inputs 0 and 1, channel 1 the same...
        assert_eq!(visited[0], Some(vec![0, 0]));
        assert_eq!(visited[1], Some(vec![1, 0]));
        assert_eq!(visited[2], Some(vec![0, 1]));
        // ...the second inner block holds input 2 and one padding slot.
        assert_eq!(visited[32], Some(vec![2, 0]));
        assert_eq!(visited[33], None);
        // The second column block holds only channel 16.
        assert_eq!(visited[64], Some(vec![0, 16]));
        assert_eq!(visited[66], None);
        assert_eq!(visited.iter().filter(|s| s.is_some()).count(), 3 * 17);
    }

    /// Expands runs back into (slot, index) pairs.
    fn runs(piece: &Piece) -> Vec<(usize, Vec<usize>)> {
        let mut out = Vec::new();
        piece.for_each_run(|run| {
            for t in 0..run.len {
                let mut index = run.index.to_vec();
                index[run.dim] += t;
                out.push((run.slot + t, index));
            }
        });
        out
    }

    fn elements_by_slot(piece: &Piece) -> Vec<(usize, Vec<usize>)> {
        let mut out = Vec::new();
        piece.for_each_slot(|slot, index| {
            if let Some(index) = index {
                out.push((slot, index.to_vec()));
            }
        });
        out
    }

    /// The swapped GEMM writes the transposed product in channel blocks:
    /// slot for slot, `RowBlocks` of a box is `ChannelBlocks` of the
    /// transposed box with the last two indices exchanged.
    #[test]
    fn row_blocks_are_channel_blocks_of_the_transpose() {
        let rows = Piece {
            start: vec![1, 3, 2],
            extent: vec![2, 21, 5],
            layout: Layout::RowBlocks,
        };
        let channels = Piece {
            start: vec![1, 2, 3],
            extent: vec![2, 5, 21],
            layout: Layout::ChannelBlocks,
        };
        let swap = |slots: Vec<Option<Vec<usize>>>| -> Vec<Option<Vec<usize>>> {
            slots
                .into_iter()
                .map(|i| i.map(|i| vec![i[0], i[2], i[1]]))
                .collect()
        };
        assert_eq!(rows.slots(), 2 * 32 * 5);
        assert_eq!(slots(&rows), swap(slots(&channels)));
    }

    /// Boxes of ranks one to four in every layout that applies to them
    /// (the blocked layouts need two dimensions).
    fn every_layout() -> Vec<Piece> {
        let boxes = [
            (vec![3], vec![5]),
            (vec![1, 2], vec![3, 5]),
            (vec![0, 4, 0], vec![2, 3, 17]),
            (vec![1, 0, 2, 3], vec![2, 2, 9, 33]),
            // Trailing dimensions of extent 1: a column of elements.
            (vec![7, 0], vec![5, 1]),
            (vec![1, 3, 2, 0], vec![2, 4, 1, 1]),
            (vec![0, 0], vec![1, 1]),
        ];
        let layouts = [
            Layout::RowMajor,
            Layout::PaddedRows { multiple: 8 },
            Layout::AmpWeights { k: 4 },
            Layout::AmpWeights { k: 16 },
            Layout::KBlocks { k: 8 },
            Layout::ChannelBlocks,
            Layout::RowBlocks,
        ];
        let mut pieces = Vec::new();
        for (start, extent) in boxes {
            for layout in layouts {
                if matches!(layout, Layout::RowMajor | Layout::PaddedRows { .. })
                    || extent.len() >= 2
                {
                    pieces.push(Piece {
                        start: start.clone(),
                        extent: extent.clone(),
                        layout,
                    });
                }
            }
        }
        pieces
    }

    /// `slot_of` inverts `for_each_slot` in every layout, and refuses
    /// indices outside the box.
    #[test]
    fn slot_of_finds_every_element_where_the_slots_put_it() {
        for piece in every_layout() {
            for (slot, index) in elements_by_slot(&piece) {
                assert_eq!(piece.slot_of(&index), Some(slot), "{piece:?} at {index:?}");
            }
            let (start, extent) = (&piece.start, &piece.extent);
            let past: Vec<usize> = start.iter().zip(extent).map(|(s, e)| s + e).collect();
            assert_eq!(piece.slot_of(&past), None, "{piece:?}");
            if start[0] > 0 {
                let mut before = start.clone();
                before[0] -= 1;
                assert_eq!(piece.slot_of(&before), None, "{piece:?}");
            }
        }
    }

    #[test]
    fn runs_visit_the_same_slots_and_indices_as_slot_by_slot() {
        for piece in every_layout() {
            assert_eq!(runs(&piece), elements_by_slot(&piece), "{piece:?}");
        }
    }

    #[test]
    fn runs_are_rows_or_amp_input_columns() {
        let mut seen = Vec::new();
        Piece::row_major(vec![1, 2], vec![2, 3])
            .for_each_run(|run| seen.push((run.slot, run.index.to_vec(), run.dim, run.len)));
        assert_eq!(seen, vec![(0, vec![1, 2], 1, 3), (3, vec![2, 2], 1, 3)]);
        seen.clear();
        // A column of elements (the coordinates of element ranges) is one
        // run down the column, not one per element.
        Piece::row_major(vec![4, 0], vec![5704, 1])
            .for_each_run(|run| seen.push((run.slot, run.index.to_vec(), run.dim, run.len)));
        assert_eq!(seen, vec![(0, vec![4, 0], 0, 5704)]);
        seen.clear();
        let amp = Piece {
            start: vec![0, 0],
            extent: vec![3, 17],
            layout: Layout::AmpWeights { k: 2 },
        };
        amp.for_each_run(|run| seen.push((run.slot, run.index.to_vec(), run.dim, run.len)));
        // Channel 0 of the first block holds inputs 0 and 1; the second
        // inner block holds only input 2; channel 16 starts column block 2.
        assert_eq!(seen[0], (0, vec![0, 0], 0, 2));
        assert_eq!(seen[16], (32, vec![2, 0], 0, 1));
        assert_eq!(seen[32], (64, vec![0, 16], 0, 2));
        assert_eq!(seen.len(), 17 * 2);
    }
}
