//! Where the elements of a shard sit in a tile buffer.
//!
//! A [`Piece`] is a box of a logical tensor (a start and an extent per
//! dimension) stored on one tile in a [`Layout`]. Storage slots are visited
//! in address order by [`Piece::for_each_slot`], which yields the logical
//! index stored in each slot, or nothing for padding. Exchange lowering
//! walks slots, so any layout the kernels want can be produced by exchange.

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
}

/// Output channels of one AMP weight block.
pub const AMP_CHANNELS: usize = 16;

/// A box of a logical tensor in a layout.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Piece {
    pub start: Vec<usize>,
    pub extent: Vec<usize>,
    pub layout: Layout,
}

impl Piece {
    pub fn row_major(start: Vec<usize>, extent: Vec<usize>) -> Piece {
        Piece {
            start,
            extent,
            layout: Layout::RowMajor,
        }
    }

    /// Logical elements in the box.
    pub fn elements(&self) -> usize {
        self.extent.iter().product()
    }

    /// Storage slots, padding included.
    pub fn slots(&self) -> usize {
        match self.layout {
            Layout::RowMajor => self.elements(),
            Layout::AmpWeights { k } => {
                let rank = self.extent.len();
                let outer: usize = self.extent[..rank - 2].iter().product();
                let inner = self.extent[rank - 2].div_ceil(k) * k;
                let cols = self.extent[rank - 1].div_ceil(AMP_CHANNELS) * AMP_CHANNELS;
                outer * inner * cols
            }
        }
    }

    pub fn has_padding(&self) -> bool {
        self.slots() != self.elements()
    }

    /// Calls `visit(slot, index)` for every storage slot in address order,
    /// with the logical index stored there (`None` for padding).
    pub fn for_each_slot(&self, mut visit: impl FnMut(usize, Option<&[usize]>)) {
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
            Layout::AmpWeights { k } => {
                let outer_extent = &self.extent[..rank - 2];
                let outer: usize = outer_extent.iter().product();
                let (inner, cols) = (self.extent[rank - 2], self.extent[rank - 1]);
                let inner_blocks = inner.div_ceil(k);
                let col_blocks = cols.div_ceil(AMP_CHANNELS);
                let mut slot = 0;
                for o in 0..outer {
                    let mut rest = o;
                    for d in (0..rank - 2).rev() {
                        index[d] = self.start[d] + rest % outer_extent[d];
                        rest /= outer_extent[d];
                    }
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
        }
    }
}

/// Row-major flat index of `index` in `shape`.
pub fn flat_index(shape: &[usize], index: &[usize]) -> usize {
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
            vec![Some(vec![1, 2]), Some(vec![1, 3]), Some(vec![2, 2]), Some(vec![2, 3])]
        );
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
}
