//! Plans of operations that only move data (`concat`): the output is split
//! into row pieces over the tiles like a row-wise operation's, and the
//! exchange that gathers each piece from the inputs is the whole of the
//! work, so a plan costs its exchange and the sync before it, no compute.

use super::cost::{self, Estimate};
use super::signature::{OpSignature, SignatureKind};
use super::{Candidate, Partition};
use crate::target::Target;

/// The candidates of a gathered operation: its output's rows over as many
/// tiles as there are rows (or the signature allows), then half as many,
/// and so on. More tiles receive fewer bytes each, so the widest split wins
/// unless it does not fit.
pub(super) fn candidates(signature: &OpSignature, target: &Target) -> Vec<Candidate> {
    let SignatureKind::Concat { axis } = signature.kind else {
        return Vec::new();
    };
    let shape = &signature.output.shape;
    let row_length = shape.last().copied().unwrap_or(1);
    let rows: usize = shape[..shape.len().saturating_sub(1)].iter().product();
    let element_bytes = signature.output.dtype.size_bytes() as u64;
    let last_axis = axis + 1 == shape.len();
    let mut found = Vec::new();
    let mut tiles = signature.tiles.min(rows.max(1) as u32);
    while tiles >= 1 {
        let rows_per_tile = rows.div_ceil(tiles as usize).max(1);
        let used = rows.div_ceil(rows_per_tile) as u32;
        let bytes = (rows_per_tile * row_length) as u64 * element_bytes;
        // Each tile receives its whole piece. Joined along the last axis,
        // every row of the piece is one run per input, each a transfer its
        // sender issues; along an outer axis a piece is a few long runs.
        let runs = if last_axis {
            (rows_per_tile * signature.inputs.len()) as u64
        } else {
            signature.inputs.len() as u64
        };
        found.push(Candidate {
            partition: Partition::Gathered {
                rows,
                row_length,
                rows_per_tile,
            },
            tiles_used: used,
            estimate: Estimate {
                compute_cycles: 0,
                exchange_cycles: cost::exchange_cycles(target, bytes) + runs,
                sync_cycles: cost::sync_cycles(target, 1),
                exchange_phases: 1,
                peak_standard_bytes: bytes,
                peak_interleaved_bytes: 0,
                resident_weight_bytes: 0,
                resident_weight_data_bytes: 0,
            },
            refined: None,
            pruned: false,
        });
        tiles /= 2;
    }
    found
}

/// Whether `partition` is a gathered plan of `signature`'s output: its
/// rows and row length, a row count per tile in range, within the tiles.
pub(super) fn partition_fits(signature: &OpSignature, partition: &Partition) -> bool {
    let Partition::Gathered {
        rows,
        row_length,
        rows_per_tile,
    } = partition
    else {
        return false;
    };
    let shape = &signature.output.shape;
    let leading: usize = shape[..shape.len().saturating_sub(1)].iter().product();
    Some(row_length) == shape.last()
        && *rows == leading
        && (1..=(*rows).max(1)).contains(rows_per_tile)
        && rows.div_ceil(*rows_per_tile) <= signature.tiles as usize
}

#[cfg(test)]
mod tests {
    use super::super::signature::Operand;
    use super::super::{dump, finalists};
    use super::*;
    use crate::graph::DType;
    use crate::target::IPU21;
    use expect_test::expect;

    fn operand(shape: &[usize], dtype: DType) -> Operand {
        Operand {
            shape: shape.to_vec(),
            dtype,
            scale: 0,
            weight: false,
            host: false,
        }
    }

    fn check(axis: usize, inputs: &[&[usize]], output: &[usize], expected: expect_test::Expect) {
        let signature = OpSignature {
            kind: SignatureKind::Concat { axis },
            inputs: inputs.iter().map(|s| operand(s, DType::F16)).collect(),
            output: operand(output, DType::F16),
            tiles: 64,
            spread: 0,
            target: crate::target::TargetId::Ipu21,
            unread: false,
        };
        let plans = finalists(&signature, &IPU21);
        for candidate in &plans.finalists {
            assert!(partition_fits(&signature, &candidate.partition));
        }
        expected.assert_eq(&dump(&signature, &plans));
    }

    #[test]
    fn a_class_token_and_patches_spread_over_every_tile() {
        check(
            0,
            &[&[1, 192], &[196, 192]],
            &[197, 192],
            expect![[r#"
                concat(f16[1, 192], f16[196, 192]) -> f16[197, 192] on 64 tiles
                  candidates 7
                 *finalist 0: rows 197x192 per-tile 4 gathered (no kernel) tiles=50 cycles=986 (compute 0 exchange 386 sync 600) phases=1 peak_standard=1536 peak_interleaved=0
                  finalist 1: rows 197x192 per-tile 7 gathered (no kernel) tiles=29 cycles=1274 (compute 0 exchange 674 sync 600) phases=1 peak_standard=2688 peak_interleaved=0
                  finalist 2: rows 197x192 per-tile 13 gathered (no kernel) tiles=16 cycles=1850 (compute 0 exchange 1250 sync 600) phases=1 peak_standard=4992 peak_interleaved=0
                  finalist 3: rows 197x192 per-tile 25 gathered (no kernel) tiles=8 cycles=3002 (compute 0 exchange 2402 sync 600) phases=1 peak_standard=9600 peak_interleaved=0
            "#]],
        );
    }

    #[test]
    fn joining_the_last_axis_costs_a_run_per_row_and_input() {
        check(
            1,
            &[&[8, 32], &[8, 32]],
            &[8, 64],
            expect![[r#"
                concat(f16[8, 32], f16[8, 32]) -> f16[8, 64] on 64 tiles
                  candidates 4
                 *finalist 0: rows 8x64 per-tile 1 gathered (no kernel) tiles=8 cycles=634 (compute 0 exchange 34 sync 600) phases=1 peak_standard=128 peak_interleaved=0
                  finalist 1: rows 8x64 per-tile 2 gathered (no kernel) tiles=4 cycles=668 (compute 0 exchange 68 sync 600) phases=1 peak_standard=256 peak_interleaved=0
                  finalist 2: rows 8x64 per-tile 4 gathered (no kernel) tiles=2 cycles=736 (compute 0 exchange 136 sync 600) phases=1 peak_standard=512 peak_interleaved=0
                  finalist 3: rows 8x64 per-tile 8 gathered (no kernel) tiles=1 cycles=872 (compute 0 exchange 272 sync 600) phases=1 peak_standard=1024 peak_interleaved=0
            "#]],
        );
    }
}
