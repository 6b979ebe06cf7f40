//! Plans of a layer or RMS normalisation or a softmax whose rows are cut
//! into segments on several tiles ([`Partition::Segments`]): for rows too
//! few to fill the chip one to a tile (a ViT-B layernorm has 197 rows for
//! 1472 tiles), a row's work spreads over as many tiles as help. Each tile
//! computes the partial statistics of its segments, one more exchange
//! phase brings a group's statistics to each of its tiles, and each tile
//! combines them and writes its segments (`device/include/norm.h`, the
//! segmented form; a softmax's records hold a maximum and a sum of
//! exponentials instead).

use super::layouts::layouts;
use super::{cost, received_bytes, row_kernel, share_element_bytes, Candidate};
use crate::graph::DType;
use crate::partition::{
    cast_epilogue, norm_prologue, segment_fold, split_norm, KernelId, Partition,
    NORM_PART_ROW_BYTES, NORM_RECORD_BYTES,
};
use crate::plan::signature::{OpSignature, SignatureKind};
use crate::target::Target;

/// Segments are a multiple of this many elements long (all but a row's
/// last), so each starts where the kernels' f16 quads do.
pub(crate) const SEGMENT_QUANTUM: usize = 4;

/// The segmented second kernel of a signature's layernorm, RMS norm or
/// softmax (of f16 rows, not causal, masked or not; a cast of its result
/// to FP8 follows it on each tile), if it has one.
pub(crate) fn segmented_kernel(signature: &OpSignature) -> Option<KernelId> {
    if let SignatureKind::Reduce { .. } = signature.kind {
        return super::reductions::segmented_kernel(signature);
    }
    let kernel = row_kernel(signature)?;
    match kernel {
        KernelId::Softmax {
            dtype: DType::F16,
            causal: false,
            ..
        } => return Some(KernelId::SoftmaxParts),
        KernelId::SoftmaxMasked {
            dtype: DType::F16,
            mask,
        } => return Some(KernelId::SoftmaxMaskedParts { mask }),
        _ => {}
    }
    match split_norm(kernel)? {
        KernelId::LayernormParts { out, .. } => Some(KernelId::LayernormParts {
            out,
            segmented: true,
        }),
        KernelId::RmsnormParts { .. } => Some(KernelId::RmsnormParts { segmented: true }),
        _ => None,
    }
}

/// Candidates for every grouping of rows (1, 2, 4, ... rows to a group,
/// and all of them in one),
/// each with the most segments the tiles allow and halvings of that down
/// to one. One segment keeps a group's rows whole on one tile, but its
/// kernels still deal the statistics out to the six workers in equal
/// shares, where the row kernels give a row to one worker or make every
/// worker of a split row read all of it: what a tile with fewer long rows
/// than workers wants. Each is costed as its
/// busiest tile's kernels (statistics, fold, output, and a fused cast
/// after them) by their formulas (the first and the last segment, which
/// may be shorter), the operand exchange and the statistics exchange, and
/// two phases' sync.
pub(super) fn candidates(signature: &OpSignature, target: &Target) -> Vec<Candidate> {
    if let SignatureKind::Reduce { .. } = signature.kind {
        return super::reductions::candidates(signature, target);
    }
    let Some(kernel) = segmented_kernel(signature) else {
        return Vec::new();
    };
    let (Some(stats), Some(fold)) = (norm_prologue(kernel), segment_fold(kernel)) else {
        return Vec::new();
    };
    let shape = &signature.output.shape;
    let row_length = shape.last().copied().unwrap_or(1);
    let rows: usize = shape[..shape.len().saturating_sub(1)].iter().product();
    let most_segments = row_length / SEGMENT_QUANTUM;
    let epilogue = cast_epilogue(kernel, signature.output.dtype);
    let element_bytes = share_element_bytes(signature, epilogue);
    let tiles = signature.tiles as usize;
    let mut found = Vec::new();
    for layout in layouts(rows, row_length, tiles, most_segments, SEGMENT_QUANTUM) {
        let (rows_per_tile, segment, segments) =
            (layout.rows_per_tile, layout.segment, layout.segments());
        if segments < 1 {
            continue;
        }
        let last = layout.last();
        let tile_cycles = |length: usize| -> Option<u64> {
            let params = [
                ("rows", rows_per_tile.min(rows) as i64),
                ("row_length", length as i64),
                ("segment", 0),
                ("segments", segments as i64),
            ];
            let cast = match epilogue {
                Some(cast) => cost::kernel_cycles(cast, &params)?,
                None => 0,
            };
            Some(
                cost::kernel_cycles(stats, &params)?
                    + cost::kernel_cycles(fold, &params)?
                    + cost::kernel_cycles(kernel, &params)?
                    + cast,
            )
        };
        let (Some(first), Some(end)) = (tile_cycles(segment), tile_cycles(last)) else {
            continue;
        };
        let elements = (rows_per_tile * segment) as u64;
        // The tile's six records of each row, and a record of each
        // row from every tile of the group.
        let folded = (rows_per_tile * segments * NORM_RECORD_BYTES) as u64;
        let records = (rows_per_tile * NORM_PART_ROW_BYTES) as u64 + folded;
        let statistics = folded - (rows_per_tile * NORM_RECORD_BYTES) as u64;
        let operands = received_bytes(signature, elements, segment);
        // A group of one tile has no other tile's records to receive.
        let phases = u32::from(statistics > 0) + u32::from(operands > 0);
        found.push(layout.candidate(
            target,
            kernel,
            first.max(end),
            operands + statistics,
            phases,
            elements * element_bytes + records,
        ));
    }
    found
}

/// Whether `partition` is a segmented plan of `signature`'s shape with
/// its segmented kernel, on at most its tiles.
pub(super) fn partition_fits(signature: &OpSignature, partition: &Partition) -> bool {
    let Partition::Segments {
        rows,
        row_length,
        rows_per_tile,
        segment,
        kernel,
    } = partition
    else {
        return false;
    };
    // A reduction's rows are its input's (its result's are one long).
    let shape = match signature.kind {
        SignatureKind::Reduce { .. } => &signature.inputs[0].shape,
        _ => &signature.output.shape,
    };
    let leading: usize = shape[..shape.len().saturating_sub(1)].iter().product();
    let segments = Partition::segments(*row_length, *segment);
    Some(row_length) == shape.last()
        && *rows == leading
        && (1..=(*rows).max(1)).contains(rows_per_tile)
        && segment.is_multiple_of(SEGMENT_QUANTUM)
        && (SEGMENT_QUANTUM..=row_length.next_multiple_of(SEGMENT_QUANTUM)).contains(segment)
        && rows.div_ceil(*rows_per_tile) * segments <= signature.tiles as usize
        && Some(*kernel) == segmented_kernel(signature)
}
