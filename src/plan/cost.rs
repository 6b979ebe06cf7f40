//! The analytical cost model: cycles and bytes of a candidate plan, from the
//! target's published rates. It is deliberately simple and monotone so the
//! planner's ranking is easy to reason about; the model device measures the
//! truth and `ipub run` prints both side by side.

use crate::graph::DType;
use crate::partition::KernelId;
pub(crate) use crate::partition::MemoryClass;
use crate::target::Target;
use serde::{Deserialize, Serialize};

/// Estimated cost of one plan, per tile where it says so.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct Estimate {
    /// Cycles of the slowest tile's compute.
    pub compute_cycles: u64,
    /// Cycles of the exchange phases (slowest tile), without sync.
    pub exchange_cycles: u64,
    /// Cycles of the syncs between phases.
    pub sync_cycles: u64,
    /// Exchange phases the plan needs.
    pub exchange_phases: u32,
    /// Peak bytes on the busiest tile in standard and interleaved memory.
    pub peak_standard_bytes: u64,
    pub peak_interleaved_bytes: u64,
    /// Of the peak, the weight bytes that stay resident all program long,
    /// as laid out (a GEMM's padding of whole AMP blocks included): what
    /// they take from the tile.
    pub resident_weight_bytes: u64,
    /// The same weights' own elements, without the padding of their
    /// layout: what the weight budget counts (`plan::weight_budget`). The
    /// budget bounds copies of the weights, and a layout that pads every
    /// one of many tiny matrices to a 512-byte block makes one copy
    /// thirty-two times its size without replicating anything.
    pub resident_weight_data_bytes: u64,
}

impl Estimate {
    pub(crate) fn total_cycles(&self) -> u64 {
        self.compute_cycles + self.exchange_cycles + self.sync_cycles
    }

    pub(crate) fn peak_total_bytes(&self) -> u64 {
        self.peak_standard_bytes + self.peak_interleaved_bytes
    }
}

/// AMP inputs consumed per issue per output channel, and output channels per
/// issue: one issue multiplies 16 output channels by 4 f16 or 8 FP8 inputs.
pub(crate) const AMP_OUTPUT_CHANNELS: u64 = 16;

pub(crate) fn amp_inputs_per_issue(input: DType) -> u64 {
    match input {
        DType::F143 | DType::F152 => 8,
        DType::F16 => 4,
        // f32 AMP: 16 MACs per cycle = 16 channels x 1 input.
        DType::F32 => 1,
    }
}

/// Inputs per output channel of one AMP weight block (the width of CWEI):
/// four issues' worth.
pub(crate) fn amp_block_inputs(input: DType) -> u64 {
    4 * amp_inputs_per_issue(input)
}

/// Issue slots of one GEMM pass (one weight block: 16 channels by one K
/// block) besides the AMP bundles: the 512-byte weight load (64 64-bit
/// loads, or 32 128-bit ones from interleaved memory) and loop set-up.
fn gemm_pass_overhead_issues(interleaved: bool) -> u64 {
    if interleaved {
        32 + 8
    } else {
        64 + 8
    }
}

/// Cycles of a tile GEMM of `batch` products of `rows x inner` by `inner
/// x cols`: the calibrated `.ipub_cost` of the GEMM variant for this shard
/// ([`super::kernel_cost`]). `interleaved` operands allow the packed
/// load/load/store bundle; otherwise each AMP issue needs three memory
/// instructions of its own.
pub(crate) fn gemm_tile_cycles(
    target: &Target,
    input: DType,
    (batch, rows, inner, cols): (u64, u64, u64, u64),
    interleaved: bool,
) -> u64 {
    if batch == 0 || rows == 0 || inner == 0 || cols == 0 {
        return 0;
    }
    let kernel = KernelId::Gemm {
        fp8: input.is_fp8(),
        interleaved,
        k: u32::try_from(inner).unwrap_or(u32::MAX),
        c: u32::try_from(cols).unwrap_or(u32::MAX),
        r: u32::try_from(rows).unwrap_or(u32::MAX),
    };
    let batch_param = i64::try_from(batch).unwrap_or(i64::MAX);
    super::kernel_cost::cycles(kernel, &[("batch", batch_param)]).unwrap_or_else(|| {
        gemm_schedule_cycles(target, input, (batch, rows, inner, cols), interleaved)
    })
}

/// The GEMM's schedule from first principles, for a shard whose formula
/// cannot be evaluated (one too large for its integers): the work is cut
/// into passes of one 16-channel block by one K block; the six workers
/// share the batch's channel blocks (and, when there are fewer than six,
/// the rows); a pass streams `rows + 1` rows of four AMP bundles after
/// loading its weights.
fn gemm_schedule_cycles(
    target: &Target,
    input: DType,
    (batch, rows, inner, cols): (u64, u64, u64, u64),
    interleaved: bool,
) -> u64 {
    let workers = u64::from(target.worker_contexts);
    let col_blocks = cols.div_ceil(AMP_OUTPUT_CHANNELS);
    let k_blocks = inner.div_ceil(amp_block_inputs(input));
    let row_groups = (workers / col_blocks).max(1);
    let rows_per_worker = rows.div_ceil(row_groups);
    let blocks_per_worker = match col_blocks >= workers {
        true => batch.saturating_mul(col_blocks).div_ceil(workers),
        false => batch,
    };
    let per_row = if interleaved { 4 } else { 12 };
    let pass = (rows_per_worker + 1) * per_row + gemm_pass_overhead_issues(interleaved);
    let issues = blocks_per_worker
        .saturating_mul(k_blocks)
        .saturating_mul(pass);
    // Each worker issues once every six cycles (the barrel rule).
    issues.saturating_mul(u64::from(target.barrel_slots))
        + u64::from(target.exchange.six_worker_call_cycles)
}

/// Cycles per element of the vector kernels, at 4 f16 (or 2 f32) lanes per
/// issue and one issue per cycle across six workers. The factors count the
/// issues per vector of the kernel's inner loop.
pub(crate) fn vector_tile_cycles(
    target: &Target,
    issues_per_vector: u64,
    dtype: DType,
    elements: u64,
) -> u64 {
    if elements == 0 {
        return 0;
    }
    let lanes = u64::from(match dtype {
        DType::F32 => target.throughput.vector_f32_lanes,
        _ => target.throughput.vector_f16_lanes,
    });
    elements.div_ceil(lanes) * issues_per_vector + u64::from(target.exchange.six_worker_call_cycles)
}

/// Cycles of one `rearrange_blocks` run: its calibrated `.ipub_cost`
/// ([`super::kernel_cost`]) for `outer` steps of `inner` chunk rows of
/// `words` 64-bit words.
pub(crate) fn block_copy_cycles(outer: u64, inner: u64, words: u64) -> u64 {
    let params = [
        ("outer", outer as i64),
        ("inner", inner as i64),
        ("words", words as i64),
    ];
    super::kernel_cost::cycles(KernelId::RearrangeBlocks, &params).unwrap_or(u64::MAX / 4)
}

/// Cycles of one run of `kernel`, `reduce_add_f16` or one of its variants
/// (with addends, [`KernelId::ReduceAddPlus`], or storing FP8,
/// [`KernelId::ReduceCast`]) or `reduce_add_f32`, summing `count` partials
/// of `length` values:
/// its calibrated `.ipub_cost` ([`super::kernel_cost`]).
pub(crate) fn reduce_cycles(kernel: KernelId, count: u64, length: u64) -> u64 {
    let params = [("count", count as i64), ("length", length as i64)];
    super::kernel_cost::cycles(kernel, &params).unwrap_or(u64::MAX / 4)
}

/// Cycles of a tile GEMM with an f32 result (`gemm_f16_f32out`): its
/// calibrated `.ipub_cost`. Its loops are the same in either memory class,
/// so the class changes the kernel variant but not the figure.
pub(crate) fn gemm_f32_out_tile_cycles(
    (batch, rows, inner, cols): (u64, u64, u64, u64),
    interleaved: bool,
) -> u64 {
    if batch == 0 || rows == 0 || inner == 0 || cols == 0 {
        return 0;
    }
    let kernel = KernelId::GemmF32Out {
        interleaved,
        k: u32::try_from(inner).unwrap_or(u32::MAX),
        c: u32::try_from(cols).unwrap_or(u32::MAX),
        r: u32::try_from(rows).unwrap_or(u32::MAX),
    };
    let batch = i64::try_from(batch).unwrap_or(i64::MAX);
    super::kernel_cost::cycles(kernel, &[("batch", batch)]).unwrap_or(u64::MAX / 4)
}

/// The cycles of one run of `kernel` with `params` by its calibrated
/// formula ([`super::kernel_cost`]); `None` for a kernel without one.
pub(crate) fn kernel_cycles(kernel: KernelId, params: &[(&str, i64)]) -> Option<u64> {
    super::kernel_cost::cycles(kernel, params)
}

/// Cycles for one tile to receive `bytes` over ordinary exchange.
pub(crate) fn exchange_cycles(target: &Target, bytes: u64) -> u64 {
    bytes.div_ceil(u64::from(target.exchange.bytes_per_cycle))
}

/// Cycles to move `bytes` between the host and the device over the host
/// link; the model device counts its host transfers with this too.
pub(crate) fn host_cycles(target: &Target, bytes: u64) -> u64 {
    let cycles = (u128::from(bytes) * u128::from(target.clock_hz))
        .div_ceil(u128::from(target.host_link_bytes_per_second.max(1)));
    u64::try_from(cycles).unwrap_or(u64::MAX)
}

pub(crate) fn sync_cycles(target: &Target, phases: u32) -> u64 {
    u64::from(phases) * u64::from(target.exchange.global_sync_cycles)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::IPU21;

    #[test]
    fn fp8_gemm_is_twice_as_fast_as_f16() {
        let f16 = gemm_tile_cycles(&IPU21, DType::F16, (1, 64, 512, 96), true);
        let f8 = gemm_tile_cycles(&IPU21, DType::F143, (1, 64, 512, 96), true);
        // Half the K blocks, each as long: twice as fast but for the call.
        assert!(
            f8 < f16 && 2 * f8 > f16 && 2 * f8 < f16 + 1000,
            "{f8} {f16}"
        );
        let slow = gemm_tile_cycles(&IPU21, DType::F143, (1, 64, 512, 96), false);
        assert!(slow > 2 * f8);
        // The fallback schedule agrees with the formula to within a tenth.
        let schedule = gemm_schedule_cycles(&IPU21, DType::F143, (1, 64, 512, 96), true);
        assert!(schedule.abs_diff(f8) * 10 < f8, "{schedule} {f8}");
    }

    #[test]
    fn exchange_moves_four_bytes_a_cycle() {
        assert_eq!(exchange_cycles(&IPU21, 4096), 1024);
        assert_eq!(exchange_cycles(&IPU21, 5), 2);
    }
}
