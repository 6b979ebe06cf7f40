//! Plans of a reduction over the last axis whose rows are cut into
//! segments on several tiles
//! ([`Partition::Segments`](crate::partition::Partition::Segments)): each
//! tile reduces six pieces of each row of its segment into f32 partial
//! results (fewer for a short segment), so a tile's one long row keeps all
//! its workers busy, and one tile of each group of rows reduces the group's partials,
//! after an exchange phase that brings them (none when a group has one
//! tile). A row longer than a tile holds has no other plan.

use super::layouts::layouts;
use super::{cost, received_bytes, Candidate};
use crate::graph::DType;
use crate::partition::{
    reduce_part_count, reduce_partial, reduce_partials, reduce_piece, KernelId,
};
use crate::plan::signature::{OpSignature, SignatureKind};
use crate::target::Target;

/// Segments of a reduction are a multiple of this many elements long (all
/// but a row's last): six pieces of whole quads.
pub(crate) const REDUCE_SEGMENT_QUANTUM: usize = 24;

/// The kernel that reduces a segmented reduction's partials into its
/// results, the kernel its segments plans name.
pub(crate) fn segmented_kernel(signature: &OpSignature) -> Option<KernelId> {
    match signature.kind {
        SignatureKind::Reduce { reduction } => {
            Some(reduce_partials(reduction, signature.output.dtype))
        }
        _ => None,
    }
}

/// The reduced rows and their length: the input's leading axes and its
/// last (the output's last axis has extent 1).
pub(crate) fn reduced_rows(signature: &OpSignature) -> (usize, usize) {
    let shape = &signature.inputs[0].shape;
    let row_length = shape.last().copied().unwrap_or(1);
    (
        shape[..shape.len().saturating_sub(1)].iter().product(),
        row_length,
    )
}

/// Candidates for every grouping of rows (1, 2, 4, ... rows to a group,
/// and all of them in one), each with the most segments the tiles allow
/// and halvings of that down to one, costed as the busiest tile's partial
/// run (the first or the last segment) and the group's reduction of the
/// partials, the operand exchange and the partials' exchange, and their
/// phases' sync.
pub(super) fn candidates(signature: &OpSignature, target: &Target) -> Vec<Candidate> {
    let SignatureKind::Reduce { reduction } = signature.kind else {
        return Vec::new();
    };
    let Some(kernel) = segmented_kernel(signature) else {
        return Vec::new();
    };
    let input = signature.inputs[0].dtype;
    let partial = reduce_partial(reduction, input);
    let (rows, row_length) = reduced_rows(signature);
    let most_segments = (row_length / REDUCE_SEGMENT_QUANTUM).max(1);
    let tiles = signature.tiles as usize;
    let f32_bytes = DType::F32.size_bytes();
    let mut found = Vec::new();
    for layout in layouts(
        rows,
        row_length,
        tiles,
        most_segments,
        REDUCE_SEGMENT_QUANTUM,
    ) {
        let (segment, segments, last) = (layout.segment, layout.segments(), layout.last());
        let count = layout.rows_per_tile.min(rows);
        let parts = (segments - 1) * reduce_part_count(segment) + reduce_part_count(last);
        let partial_cycles = |length: usize| {
            let k = reduce_part_count(length);
            cost::kernel_cycles(
                partial,
                &[
                    ("rows", count as i64),
                    ("row_length", length as i64),
                    ("parts", k as i64),
                    ("piece", reduce_piece(length, k) as i64),
                ],
            )
        };
        let total = cost::kernel_cycles(
            kernel,
            &[
                ("rows", count as i64),
                ("row_length", parts as i64),
                ("divisor", row_length as i64),
            ],
        );
        // A row shorter than its segment is its one segment.
        let (Some(first), Some(end), Some(total)) = (
            partial_cycles(segment.min(row_length)),
            partial_cycles(last),
            total,
        ) else {
            continue;
        };
        let elements = (count * segment) as u64;
        let gathered = (count * parts * f32_bytes) as u64;
        let partials = match segments {
            1 => 0,
            _ => gathered,
        };
        let operands = received_bytes(signature, elements, segment);
        let phases = u32::from(partials > 0) + u32::from(operands > 0);
        let peak = elements * input.size_bytes() as u64
            + gathered
            + partials
            + (count * signature.output.dtype.size_bytes()) as u64;
        found.push(layout.candidate(
            target,
            kernel,
            first.max(end) + total,
            operands + partials,
            phases,
            peak,
        ));
    }
    found
}
