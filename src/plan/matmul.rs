//! Operator plans for matrix products: a partition of batch, rows, output
//! columns and the inner dimension over tiles, the weights' memory class,
//! and the GEMM kernel variant each tile runs. A split inner dimension is
//! staged as a reduction: each tile of a group computes f16 partials over
//! its slice of K, and the group sums them with the reduce-add kernel
//! ([`KernelId::ReduceAdd`]), each
//! tile the rows it keeps. A product with an f32 result runs the GEMM that
//! carries f32 partials ([`KernelId::GemmF32Out`]) and sums a split K's
//! f32 partials with [`KernelId::ReduceAddF32`].

use super::cost::{self, Estimate, MemoryClass, AMP_OUTPUT_CHANNELS};
use super::{Candidate, Partition};
use crate::graph::DType;
use crate::partition::{epilogue_kernels, EpilogueKernel, KernelId};
pub(crate) use crate::partition::{reduced_rows, Grid, Shard};
use crate::plan::signature::{OpSignature, Operand, SignatureKind};
use crate::target::Target;

/// The logical problem: `batch` products of `[rows, inner] x [inner, cols]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct MatmulShape {
    pub batch: usize,
    pub rows: usize,
    pub inner: usize,
    pub cols: usize,
}

impl MatmulShape {
    pub(super) fn of(signature: &OpSignature) -> MatmulShape {
        let lhs = &signature.inputs[0].shape;
        let out = &signature.output.shape;
        let rank = out.len();
        // The output shape already accounts for a transposed right operand;
        // transposition only changes how the kernel reads the weights.
        MatmulShape {
            batch: out[..rank - 2].iter().product(),
            rows: out[rank - 2],
            inner: lhs[lhs.len() - 1],
            cols: out[rank - 1],
        }
    }
}

/// Split counts worth trying for a dimension with `extent` parts: powers of
/// two, and three and five times powers of two, up to the extent and the
/// tile budget. The fives fill budgets the others leave idle: six heads of
/// 197 rows on 64 tiles split five ways use 60 of them, not 48.
fn split_counts(extent: usize, tiles: u32) -> Vec<u32> {
    let limit = (extent as u64).min(u64::from(tiles)) as u32;
    let mut counts: Vec<u32> = (0..)
        .map(|i| 1u32 << i)
        .take_while(|&c| c <= limit)
        .flat_map(|c| [c, c * 3, c * 5])
        .filter(|&c| c <= limit)
        .collect();
    counts.sort_unstable();
    counts.dedup();
    counts
}

/// Split counts for the inner dimension: the inner dimension is cut into
/// slices of whole AMP blocks, `ceil(blocks / count)` each, the last slice
/// taking what is left (fewer blocks, possibly a partial block). Every tile
/// of a reduction group runs the same kernel variant (its K is the largest
/// slice; the run's `inner` parameter is the slice's own), so slices need
/// not be equal, only none empty. Inner dimensions with a prime number of
/// blocks (4304 = 269 blocks of 16) split too.
fn inner_splits(inner: usize, block: usize, tiles: u32) -> Vec<u32> {
    let blocks = inner.div_ceil(block);
    split_counts(blocks, tiles)
        .into_iter()
        .filter(|&k| {
            let per = blocks.div_ceil(k as usize);
            per * (k as usize - 1) < blocks
        })
        .collect()
}

/// Columns (rows, swapped) rounded up to whole AMP channel blocks (the
/// output layout).
fn padded_cols(cols: usize) -> usize {
    cols.div_ceil(AMP_OUTPUT_CHANNELS as usize) * AMP_OUTPUT_CHANNELS as usize
}

/// Bytes of one operand's shard.
fn bytes(operand: &Operand, elements: usize) -> u64 {
    (elements * operand.dtype.size_bytes()) as u64
}

/// Bytes of the three buffers lowering gives a tile's GEMM over `shard`
/// (`crate::lower`), padding included: the GEMM reads and writes whole
/// AMP blocks, so the streamed operand holds `[K'/kb][rows][kb]` per
/// batch, the held one (the AMP weights) `[C'/16][K'/kb][16][kb]` and the
/// result `[C'/16][rows][16]`, with the inner dimension rounded up to a K
/// block and the held operand's columns to 16 channels
/// (`device/gemm_f16_amp.S`). A batch of `[1, 2] x [2, 1]` takes a whole
/// 512-byte weight block, so counting only the elements would let a plan
/// through that lowering cannot place. Swapped, the kernel computes the
/// transposed product: the right operand streams and the left is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct GemmBuffers {
    lhs: u64,
    rhs: u64,
    /// The result, in the dtype the GEMM writes (`written`).
    out: u64,
}

impl GemmBuffers {
    fn of(shard: &Shard, swapped: bool, (lhs, rhs, written): (DType, DType, DType)) -> GemmBuffers {
        let block = cost::amp_block_inputs(lhs) as usize;
        let inner = shard.inner.div_ceil(block) * block;
        let b = shard.batch;
        let size = |dtype: DType, slots: usize| (slots * dtype.size_bytes()) as u64;
        match swapped {
            false => GemmBuffers {
                lhs: size(lhs, b * shard.rows * inner),
                rhs: size(rhs, b * inner * padded_cols(shard.cols)),
                out: size(written, b * shard.rows * padded_cols(shard.cols)),
            },
            true => GemmBuffers {
                lhs: size(lhs, b * inner * padded_cols(shard.rows)),
                rhs: size(rhs, b * shard.cols * inner),
                out: size(written, b * padded_cols(shard.rows) * shard.cols),
            },
        }
    }
}

pub(super) fn candidates(signature: &OpSignature, target: &Target) -> Vec<Candidate> {
    let shape = MatmulShape::of(signature);
    let (lhs, rhs, out) = (
        &signature.inputs[0],
        &signature.inputs[1],
        &signature.output,
    );
    let fused = Epilogue::of(signature);
    let input = lhs.dtype;
    let inner_block = cost::amp_block_inputs(input) as usize;
    let col_blocks = shape.cols.div_ceil(AMP_OUTPUT_CHANNELS as usize);

    let mut found = Vec::new();
    for &batch in &split_counts(shape.batch, signature.tiles) {
        for &rows in &split_counts(shape.rows, signature.tiles / batch) {
            for &cols in &split_counts(col_blocks, signature.tiles / (batch * rows)) {
                let left = signature.tiles / (batch * rows * cols);
                for inner in inner_splits(shape.inner, inner_block, left) {
                    let grid = Grid {
                        batch,
                        rows,
                        cols,
                        inner,
                    };
                    let shard = shard_of(&shape, &grid, input);
                    for swapped in [false, true] {
                        for weights in [MemoryClass::Interleaved, MemoryClass::Standard] {
                            found.push(estimate(
                                target,
                                (grid, shard, weights, swapped),
                                (lhs, rhs, out),
                                &fused,
                            ));
                        }
                    }
                }
            }
        }
    }
    found
}

/// The largest shard of `shape` a tile computes on `grid`: whole AMP
/// blocks of the inner dimension and whole channel blocks of the columns.
fn shard_of(shape: &MatmulShape, grid: &Grid, input: DType) -> Shard {
    let inner_block = cost::amp_block_inputs(input) as usize;
    let col_blocks = shape.cols.div_ceil(AMP_OUTPUT_CHANNELS as usize);
    let inner_blocks = shape.inner.div_ceil(inner_block);
    Shard {
        batch: shape.batch.div_ceil(grid.batch as usize),
        rows: shape.rows.div_ceil(grid.rows as usize),
        inner: (inner_blocks.div_ceil(grid.inner as usize) * inner_block).min(shape.inner),
        cols: (col_blocks.div_ceil(grid.cols as usize) * AMP_OUTPUT_CHANNELS as usize)
            .min(shape.cols),
    }
}

/// A product's fused epilogue (`crate::fuse`) as the planner costs it:
/// the kernels that run over each tile's piece of the result, and the
/// extra operands they read.
struct Epilogue<'s> {
    kernels: Vec<EpilogueKernel>,
    extras: &'s [Operand],
}

impl<'s> Epilogue<'s> {
    fn of(signature: &'s OpSignature) -> Epilogue<'s> {
        let steps = match &signature.kind {
            SignatureKind::Matmul { epilogue, .. } => epilogue.as_slice(),
            _ => &[],
        };
        Epilogue {
            kernels: epilogue_kernels(steps, signature.output.dtype),
            extras: signature.inputs.get(2..).unwrap_or_default(),
        }
    }

    /// Compute cycles, received bytes, buffer bytes and resident weight
    /// bytes of the epilogue over `slots` slots of a tile's result: each
    /// run's kernel, each extra operand gathered into the result's layout
    /// unless the host or the package writes it there (a weight stays
    /// for the whole program), and an f16 buffer per run. The first
    /// `absorbed` runs are carried out by the reduction (whose cycles
    /// count them), so only their operands count here.
    fn cost(&self, target: &Target, slots: u64, absorbed: usize) -> EpilogueCost {
        let f16 = DType::F16.size_bytes() as u64;
        let params = [("rows", slots as i64), ("row_length", 1)];
        let mut total = EpilogueCost::default();
        for (i, run) in self.kernels.iter().enumerate() {
            // A kernel without a calibrated formula is priced as the
            // unfused operation's plan prices it.
            if i >= absorbed {
                total.compute += cost::kernel_cycles(run.kernel, &params).unwrap_or_else(|| {
                    let kind = match run.kernel {
                        KernelId::Binary { op, .. } => SignatureKind::Binary { op },
                        KernelId::Unary { op, .. } => SignatureKind::Unary { op },
                        _ => SignatureKind::Add,
                    };
                    let issues = super::issues_per_vector(&kind);
                    cost::vector_tile_cycles(target, issues, DType::F16, slots)
                });
                total.bytes += f16 * slots;
            }
            if let Some(extra) = run.operand.and_then(|j| self.extras.get(j)) {
                total.bytes += f16 * slots;
                if extra.weight {
                    total.resident += f16 * slots;
                } else if !extra.host {
                    total.received += f16 * slots;
                }
            }
        }
        total
    }
}

/// What an epilogue adds to a plan's estimate ([`Epilogue::cost`]).
#[derive(Default)]
struct EpilogueCost {
    compute: u64,
    received: u64,
    bytes: u64,
    resident: u64,
}

fn estimate(
    target: &Target,
    (grid, shard, weights, swapped): (Grid, Shard, MemoryClass, bool),
    (lhs, rhs, out): (&Operand, &Operand, &Operand),
    fused: &Epilogue,
) -> Candidate {
    let b = shard.batch;
    // Activations arrive over exchange; weights are preloaded where used
    // and streamed inputs written by the host where used. Only elements
    // move: the padding of the GEMM's layouts is zeroed at load.
    let (lhs_data, rhs_data) = (
        bytes(lhs, b * shard.rows * shard.inner),
        bytes(rhs, b * shard.inner * shard.cols),
    );
    let mut received = 0;
    if !lhs.weight && !lhs.host {
        received += lhs_data;
    }
    if !rhs.weight && !rhs.host {
        received += rhs_data;
    }
    let mut phases = 1;
    // The memory class applies to all three GEMM operands: the packed
    // load/load/store bundle of the fast loop needs them interleaved.
    // The kernel's own shard: swapped, it computes the transposed product.
    let kernel_shard = match swapped {
        false => shard,
        true => Shard {
            rows: shard.cols,
            cols: shard.rows,
            ..shard
        },
    };
    let f32_out = out.dtype == DType::F32;
    let kernel_shape = (
        b as u64,
        kernel_shard.rows as u64,
        kernel_shard.inner as u64,
        kernel_shard.cols as u64,
    );
    let interleaved = weights == MemoryClass::Interleaved;
    let compute = match f32_out {
        true => cost::gemm_f32_out_tile_cycles(kernel_shape, interleaved),
        false => cost::gemm_tile_cycles(target, lhs.dtype, kernel_shape, interleaved),
    };
    // A fused cast to FP8 (`crate::fuse`) converts the f16 the GEMM, or
    // the reduction of a split K, writes to a buffer of the tile: its
    // kernel runs over that buffer's slots in the same step.
    let mut epilogue = crate::partition::cast_epilogue(KernelId::ReduceAdd, out.dtype);
    let accumulated = crate::partition::written_dtype(KernelId::ReduceAdd, out.dtype);
    let mut slots = match swapped {
        false => b * shard.rows * padded_cols(shard.cols),
        true => b * padded_cols(shard.rows) * shard.cols,
    } as u64;
    // A split inner dimension leaves partials (of the accumulated dtype)
    // on every tile of a reduction group: each tile then receives the
    // others' partials of the rows it keeps, in a second phase, and sums
    // them.
    // The GEMM writes the result's home, or with a split K a partial of
    // the accumulated dtype.
    let written = match grid.inner {
        1 => out.dtype,
        _ => accumulated,
    };
    let buffers = GemmBuffers::of(&shard, swapped, (lhs.dtype, rhs.dtype, written));
    let (mut compute, mut operands) = (compute, buffers.lhs + buffers.out + buffers.rhs);
    // How many of the epilogue's runs the reduction carries out.
    let mut absorbed = 0;
    if grid.inner > 1 {
        let band = reduced_rows(shard.rows, grid.inner);
        let kept = match swapped {
            false => b * band * padded_cols(shard.cols),
            true => b * padded_cols(band) * shard.cols,
        } as u64;
        slots = kept;
        let partials = u64::from(grid.inner) * kept;
        let element = accumulated.size_bytes() as u64;
        received += element * (partials - kept);
        // The reduction's kernel may run the cast, or the epilogue's
        // leading adds, in its one pass.
        let (reduce, adds) = KernelId::reduce_with(grid.inner, out.dtype, &fused.kernels);
        absorbed = adds;
        if let KernelId::ReduceCast { .. } = reduce {
            epilogue = None;
        }
        compute += cost::reduce_cycles(reduce, u64::from(grid.inner), kept);
        operands += element * (partials + kept);
        phases += 1;
    }
    // Weights stay where they are laid out, padding and all, for the
    // whole program: the held operand, and a streamed one in the swapped
    // orientation.
    let (mut resident, mut resident_data) = (0, 0);
    if lhs.weight {
        resident += buffers.lhs;
        resident_data += lhs_data;
    }
    if rhs.weight {
        resident += buffers.rhs;
        resident_data += rhs_data;
    }
    if !fused.kernels.is_empty() {
        let added = fused.cost(target, slots, absorbed);
        compute += added.compute;
        received += added.received;
        operands += added.bytes;
        resident += added.resident;
        resident_data += added.resident;
    } else if let Some(cast) = epilogue {
        let params = [("rows", slots as i64), ("row_length", 1)];
        compute += cost::kernel_cycles(cast, &params).unwrap_or(0);
        // The reduction's result is already counted as f16 above.
        if grid.inner == 1 {
            operands += 2 * slots;
        }
    }
    let (standard, interleaved) = match weights {
        MemoryClass::Standard => (operands, 0),
        MemoryClass::Interleaved => (0, operands),
    };
    let estimate = Estimate {
        compute_cycles: compute,
        exchange_cycles: cost::exchange_cycles(target, received),
        sync_cycles: cost::sync_cycles(target, phases),
        exchange_phases: phases,
        peak_standard_bytes: standard,
        peak_interleaved_bytes: interleaved,
        resident_weight_bytes: resident,
        resident_weight_data_bytes: resident_data,
    };
    Candidate {
        partition: Partition::Matmul {
            grid,
            shard,
            weights,
            swapped,
            kernel: KernelId::gemm_for(lhs.dtype, out.dtype, weights, &kernel_shard),
        },
        tiles_used: grid.tiles(),
        estimate,
        refined: None,
        pruned: false,
    }
}

/// Whether `partition` is a matmul partition of `signature`'s product as
/// the planner makes them (and lowering relies on): a grid within the
/// tiles, the shard the planner derives from that grid for this product
/// (so the grid covers it), every slice of the inner dimension holding
/// some of it, and the kernel the shard names.
pub(super) fn partition_fits(signature: &OpSignature, partition: &Partition) -> bool {
    let Partition::Matmul {
        grid,
        shard,
        weights,
        swapped,
        kernel,
    } = partition
    else {
        return false;
    };
    let Some(lhs) = signature.inputs.first() else {
        return false;
    };
    let extras = Epilogue::of(signature)
        .kernels
        .iter()
        .filter(|run| run.operand.is_some())
        .count();
    if signature.inputs.len() != 2 + extras
        || signature.output.shape.len() < 2
        || lhs.shape.is_empty()
    {
        return false;
    }
    let axes = [grid.batch, grid.rows, grid.cols, grid.inner];
    let tiles = axes.iter().try_fold(1u32, |n, &g| n.checked_mul(g));
    if axes.contains(&0) || tiles.is_none_or(|t| t > signature.tiles) {
        return false;
    }
    let shape = MatmulShape::of(signature);
    let kernel_shard = match swapped {
        false => *shard,
        true => Shard {
            rows: shard.cols,
            cols: shard.rows,
            ..*shard
        },
    };
    *shard == shard_of(&shape, grid, lhs.dtype)
        && (grid.inner as usize - 1) * shard.inner < shape.inner
        && *kernel == KernelId::gemm_for(lhs.dtype, signature.output.dtype, *weights, &kernel_shard)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_counts_are_smooth_numbers_within_limits() {
        assert_eq!(split_counts(10, 64), vec![1, 2, 3, 4, 5, 6, 8, 10]);
        assert_eq!(split_counts(1000, 8), vec![1, 2, 3, 4, 5, 6, 8]);
        assert_eq!(split_counts(1, 64), vec![1]);
        assert_eq!(
            split_counts(64, 64),
            vec![1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 40, 48, 64]
        );
    }

    #[test]
    fn k_splits_cut_the_inner_dimension_into_slices_of_whole_blocks_none_empty() {
        // 1024 inputs = 64 blocks of 16 (three slices: 22, 22, 20 blocks);
        // 48 = 3 blocks; 40 = 2.5 blocks.
        assert_eq!(inner_splits(1024, 16, 8), vec![1, 2, 3, 4, 5, 6, 8]);
        assert_eq!(inner_splits(48, 16, 64), vec![1, 2, 3]);
        assert_eq!(inner_splits(40, 16, 64), vec![1, 2, 3]);
        // 269 blocks (a prime): uneven slices, the last one shorter.
        assert_eq!(
            inner_splits(4304, 16, 16),
            vec![1, 2, 3, 4, 5, 6, 8, 10, 12, 16]
        );
        // 10 blocks in 6 slices of 2 would leave the sixth empty.
        assert_eq!(inner_splits(160, 16, 8), vec![1, 2, 3, 4, 5]);
        assert_eq!(reduced_rows(20, 8), 3);
    }
}
