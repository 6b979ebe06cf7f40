//! The layouts of segmented plans
//! ([`Partition::Segments`](crate::partition::Partition)): how many rows a
//! tile takes and how long a segment of a row is, for the norms' and
//! softmaxes' (`segments.rs`) and the reductions' (`reductions.rs`)
//! candidates alike.

/// Every layout, `(rows_per_tile, segment)`, a segmented plan of `rows`
/// rows of `row_length` on `tiles` tiles may take: the rows grouped 1, 2,
/// 4, ... at a time and last all in one group, each grouping with the most
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
) -> Vec<(usize, usize)> {
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
                found.push((rows_per_tile, segment));
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
