//! The layouts of segmented plans
//! ([`Partition::Segments`](crate::partition::Partition)): how many rows a
//! tile takes and how long a segment of a row is, for the norms' and
//! softmaxes' (`segments.rs`) and the reductions' (`reductions.rs`)
//! candidates alike, and the candidate a costed layout makes.

use super::cost::{self, Estimate};
use super::Candidate;
use crate::partition::{KernelId, Partition};
use crate::target::Target;

/// One layout of a segmented plan: `rows` rows of `row_length`,
/// `rows_per_tile` of them to a group of tiles, each tile holding a
/// `segment` of each (the last segment of a row may be shorter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Layout {
    pub rows: usize,
    pub row_length: usize,
    pub rows_per_tile: usize,
    pub segment: usize,
}

impl Layout {
    /// The groups of rows, each on its own tiles.
    pub(super) fn groups(&self) -> usize {
        self.rows.div_ceil(self.rows_per_tile).max(1)
    }

    /// The segments of a row: the tiles of a group.
    pub(super) fn segments(&self) -> usize {
        Partition::segments(self.row_length, self.segment)
    }

    /// The length of a row's last segment.
    pub(super) fn last(&self) -> usize {
        self.row_length - self.segments().saturating_sub(1) * self.segment
    }

    /// The candidate of this layout run by `kernel`: the busiest tile's
    /// `compute_cycles`, `exchanged_bytes` received over `phases` exchange
    /// phases, and `peak_standard_bytes` on the busiest tile.
    pub(super) fn candidate(
        &self,
        target: &Target,
        kernel: KernelId,
        compute_cycles: u64,
        exchanged_bytes: u64,
        phases: u32,
        peak_standard_bytes: u64,
    ) -> Candidate {
        Candidate {
            partition: Partition::Segments {
                rows: self.rows,
                row_length: self.row_length,
                rows_per_tile: self.rows_per_tile,
                segment: self.segment,
                kernel,
            },
            tiles_used: (self.groups() * self.segments()) as u32,
            estimate: Estimate {
                compute_cycles,
                exchange_cycles: cost::exchange_cycles(target, exchanged_bytes),
                sync_cycles: cost::sync_cycles(target, phases),
                exchange_phases: phases,
                peak_standard_bytes,
                peak_interleaved_bytes: 0,
                resident_weight_bytes: 0,
                resident_weight_data_bytes: 0,
            },
            refined: None,
            pruned: false,
        }
    }
}

/// Every layout a segmented plan of `rows` rows of `row_length` on
/// `tiles` tiles may take: the rows grouped 1, 2, 4, ... at a time and last all in one group, each grouping with the most
/// segments the tiles allow (at most `most_segments`) and halvings of that
/// down to one. A segment is a multiple of `quantum` long, no longer than
/// the row rounded up to a quad (four elements); halvings that round to
/// the same segment are one layout.
pub(super) fn layouts(
    rows: usize,
    row_length: usize,
    tiles: usize,
    most_segments: usize,
    quantum: usize,
) -> Vec<Layout> {
    let mut found = Vec::new();
    let mut rows_per_tile = 1;
    loop {
        let groups = rows.div_ceil(rows_per_tile).max(1);
        let mut wanted = (tiles / groups).min(most_segments);
        let mut previous = None;
        while wanted >= 1 {
            let segment = row_length
                .div_ceil(wanted)
                .next_multiple_of(quantum)
                .min(row_length.next_multiple_of(4));
            wanted /= 2;
            if previous.replace(segment) != Some(segment) {
                found.push(Layout {
                    rows,
                    row_length,
                    rows_per_tile,
                    segment,
                });
            }
        }
        // Doublings, and last every row in one group.
        if rows_per_tile >= rows {
            break;
        }
        rows_per_tile = (rows_per_tile * 2).min(rows);
    }
    found
}
